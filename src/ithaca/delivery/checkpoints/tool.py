"""The ``checkpoint`` tool: a stage of work declared done, pinned to its evidence (§7).

A checkpoint is per (stage, scope): at most one mutable ``draft`` and one ``accepted``
revision. ``draft`` creates or replaces the draft, ``abandon`` drops it, ``accept``
(the default) replaces the draft with the given payload first, or accepts the existing
draft. Acceptance runs the reference's steps in order:

1. the scope must exist (a task inside the change it is named with);
2. evidence is re-read from disk (``ithaca.delivery.checkpoints.evidence``);
3. the stage's advisory warnings (a test checkpoint without a result, an incident whose
   diagnosis has gaps, whose file is refreshed here, …), never blocking;
4. the full context envelope is stored as a blob, so the acceptance can later be read
   against exactly the authority it was made under;
5. a ``plan`` computes the change's execution waves; a dependency cycle or an unknown
   dependency keeps the draft instead of accepting it;
6. the same payload and evidence as the accepted revision change nothing;
7. one transaction supersedes the previous revision and accepts the new one, whose
   ``digest`` covers everything it claims and is re-verified whenever a row is read, so a
   row edited behind Ithaca's back is ``CHECKPOINT_DIGEST_MISMATCH``;
8. a plan writes ``plan.json`` and ``plan.md`` in the same recoverable unit.

Every row's id is ``cp-`` and the first 16 hex digits of its digest. The team ledger is
published after acceptance once ``sync`` exists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.checkpoints.evidence import ROLES, pinned
from ithaca.delivery.context import tool as context
from ithaca.delivery.contract import Diagnostic, check_request_size, diagnostic, validation_error
from ithaca.delivery.idempotency import Guard, request_digest
from ithaca.delivery.records import changes, tasks
from ithaca.delivery.run_plan import waves
from ithaca.delivery.schemas import ids
from ithaca.delivery.schemas.dialect import Schema, array, check, obj, string_set, text
from ithaca.delivery.units import registry
from ithaca.delivery.units.recoverable import Outcome, Plan, Stale, TrackedWrite, Units, flat
from ithaca.kernel import canon, clock, journal
from ithaca.kernel.errors import Corrupt, InvalidInput, NotFound
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

TOOL = "checkpoint"
STAGES = ("research", "plan", "dev", "test", "review", "deliver")
OPERATIONS = ("draft", "accept", "abandon")
SUMMARY_BYTES = 4 * 1024
DATA_BYTES = 32 * 1024
MAX_EVIDENCE = 100

Row = dict[str, Any]

# --- schemas --------------------------------------------------------------------------------

CHECKPOINT_DESCRIPTION = (
    "Declare a stage done for a scope: operation draft|accept|abandon, payload {summary, "
    "evidence[{artifact_id|path, digest?}]} re-hashed from disk. plan writes plan.json waves."
)
CHECKPOINT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "stage": {"type": "string", "enum": list(STAGES)},
        "scope": {
            "type": "object",
            "properties": {
                "change_id": ids.CHANGE_ID,
                "task_id": ids.TASK_ID,
                "baseline": {"const": True},
            },
            "additionalProperties": False,
            "default": {},
        },
        "operation": {"type": "string", "enum": list(OPERATIONS), "default": "accept"},
        "payload": {"type": "object"},
        "idempotency_key": ids.IDEMPOTENCY_KEY,
    },
    "required": ["stage", "idempotency_key"],
    "additionalProperties": False,
}

_EVIDENCE_EXTRA: dict[str, Schema] = {
    "digest": ids.DIGEST,
    "role": {"type": "string", "enum": list(ROLES)},
    "note": text(2000),
}
EVIDENCE_ITEM: Schema = {
    "oneOf": [
        obj({"artifact_id": text(64)}, _EVIDENCE_EXTRA),
        obj({"path": text(1024)}, _EVIDENCE_EXTRA),
    ]
}
PAYLOAD = obj(
    {"summary": text(SUMMARY_BYTES)},
    {
        "evidence": array(EVIDENCE_ITEM, MAX_EVIDENCE, default=[]),
        "decisions": string_set(ids.DECISION_ID, 100),
        "data": {"type": "object"},
    },
)
_FINDINGS = array({"type": ["string", "object"]}, 200)
_COUNT: Schema = {"type": "integer", "minimum": 0}
STAGE_DATA: dict[str, Schema] = {
    "test": obj(
        optional={
            "result": {"type": "string", "enum": ["pass", "fail", "partial"]},
            "command": text(4000),
            "counts": obj(
                optional={"passed": _COUNT, "failed": _COUNT, "skipped": _COUNT, "errors": _COUNT}
            ),
        }
    ),
    "review": obj(
        optional={
            "verdict": {"type": "string", "enum": ["approve", "changes_requested", "comment"]},
            "findings": _FINDINGS,
        }
    ),
    "research": obj(
        optional={
            "findings": _FINDINGS,
            "disposition": {"type": "string", "enum": ["none", "bounded", "required"]},
        }
    ),
}


# --- requests -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    stage: str
    scope: dict[str, Any]
    operation: str
    payload: dict[str, Any] | None
    key: str

    def normalised(self) -> dict[str, Any]:
        """What the idempotency digest is taken over (the key left out)."""
        found: dict[str, Any] = {"stage": self.stage, "scope": self.scope}
        if self.payload is not None:
            found["payload"] = self.payload
        return found


def parse(arguments: Any) -> Request:
    """A ``checkpoint`` request, checked and normalised (payload and stage data too)."""
    if not isinstance(arguments, dict):
        raise validation_error("", "WRONG_TYPE", "expected an object with stage")
    check_request_size(arguments)
    request = check(CHECKPOINT_SCHEMA, arguments)
    scope = request["scope"]
    if scope.get("baseline") and len(scope) > 1:
        raise validation_error(
            "/scope/baseline", "CONFLICTING_FIELDS", "the baseline scope names no change or task"
        )
    payload = request.get("payload")
    if request["operation"] == "abandon" and payload is not None:
        raise validation_error("/payload", "NOT_ALLOWED", "abandon takes no payload")
    if request["operation"] == "draft" and payload is None:
        raise validation_error("/payload", "MISSING_FIELD", "a draft needs a payload")
    if payload is not None:
        payload = _checked_payload(request["stage"], payload)
    return Request(
        request["stage"], scope, request["operation"], payload, request["idempotency_key"]
    )


def _checked_payload(stage: str, payload: dict[str, Any]) -> dict[str, Any]:
    found = check(PAYLOAD, payload, "/payload")
    size = len(found["summary"].encode("utf-8"))
    if size > SUMMARY_BYTES:
        raise validation_error(
            "/payload/summary", "TOO_LARGE", f"{size} bytes; at most {SUMMARY_BYTES}"
        )
    if "data" in found:
        if stage in STAGE_DATA:
            found["data"] = check(STAGE_DATA[stage], found["data"], "/payload/data")
        size = len(canon.canonical(found["data"]))
        if size > DATA_BYTES:
            raise validation_error(
                "/payload/data", "TOO_LARGE", f"{size} canonical bytes; at most {DATA_BYTES}"
            )
    return found


# --- the service entry ----------------------------------------------------------------------


def checkpoint(
    project: Project,
    store: Store,
    config: dict[str, Any],
    arguments: Any,
    *,
    units: Units | None = None,
) -> dict[str, Any]:
    """``checkpoint {stage, scope?, operation?, payload?, idempotency_key}`` →
    ``{accepted?, checkpoint, plan?, unchanged?, diagnostics, journal_seq}``."""
    request = parse(arguments)
    runner = units or Units(project, store)
    guard = Guard(request.key, TOOL, request_digest(TOOL, request.operation, request.normalised()))
    answer, replayed = runner.run_keyed(
        guard,
        lambda conn: _prepare(conn, project, request),
        f"checkpoint {request.stage}",
        {"stage": request.stage},
    )
    return {**flat(answer), "replayed": True} if replayed else flat(answer)


# --- reading ----------------------------------------------------------------------------------

COLUMNS = (
    "id",
    "stage",
    "scope_type",
    "scope_id",
    "revision",
    "status",
    "payload",
    "evidence",
    "diagnostics",
    "envelope_digest",
    "supersedes_id",
    "digest",
)
_JSON_COLUMNS = ("payload", "evidence", "diagnostics")


def read(
    conn: sqlite3.Connection,
    stage: str,
    scope_type: str,
    scope_id: str | None,
    status: str = "accepted",
) -> Row | None:
    """The ``draft`` or ``accepted`` checkpoint of (stage, scope), digest verified."""
    found = conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM delivery_checkpoints WHERE stage = ?"
        " AND scope_type = ? AND ifnull(scope_id, '') = ? AND status = ?",
        (stage, scope_type, scope_id or "", status),
    ).fetchone()
    return None if found is None else verified(found)


def verified(values: tuple[Any, ...]) -> Row:
    """A checkpoint row as a dict, provided it still hashes to its stored digest."""
    row = dict(zip(COLUMNS, values, strict=True))
    for name in _JSON_COLUMNS:
        row[name] = json.loads(row[name])
    if row["digest"] is None or _digest(row) != row["digest"]:
        raise Corrupt(
            "CHECKPOINT_DIGEST_MISMATCH",
            f"checkpoint {row['id']} no longer matches its digest; it was changed outside"
            " Ithaca: run `ithaca doctor`",
            {"id": row["id"], "expected": row["digest"], "actual": _digest(row)},
        )
    return row


def view(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "stage": row["stage"],
        "scope": {"type": row["scope_type"], "id": row["scope_id"]},
        "status": row["status"],
        "revision": row["revision"],
        "digest": row["digest"],
        "envelope_digest": row["envelope_digest"],
        "supersedes_id": row["supersedes_id"],
        "payload": row["payload"],
        "evidence": row["evidence"],
        "diagnostics": row["diagnostics"],
    }


def _digest(row: Row) -> str:
    return canon.digest(
        {
            name: row[name]
            for name in (
                "stage",
                "scope_type",
                "scope_id",
                "revision",
                "payload",
                "evidence",
                "diagnostics",
                "envelope_digest",
                "supersedes_id",
            )
        }
    )


# --- preparing ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    type: str
    id: str | None
    change: Row | None
    task: Row | None

    def envelope_scope(self) -> dict[str, str]:
        found = {}
        if self.change is not None:
            found["change_id"] = self.change["id"]
        if self.task is not None:
            found["task_id"] = self.task["id"]
        return found


@dataclass
class _Draft:
    """A checkpoint as this request would leave it, before acceptance."""

    stage: str
    scope: Scope
    payload: dict[str, Any]
    evidence: list[dict[str, Any]]
    diagnostics: list[Diagnostic]

    def row(self, **accepted: Any) -> Row:
        row: Row = {
            "stage": self.stage,
            "scope_type": self.scope.type,
            "scope_id": self.scope.id,
            "revision": None,
            "status": "draft",
            "payload": self.payload,
            "evidence": self.evidence,
            "diagnostics": self.diagnostics,
            "envelope_digest": None,
            "supersedes_id": None,
            **accepted,
        }
        row["digest"] = _digest(row)
        row["id"] = f"cp-{row['digest'][:16]}"
        return row


def _prepare(conn: sqlite3.Connection, project: Project, request: Request) -> Plan:
    """Steps 1–7 read in one snapshot: the plan to commit. An accepting plan stores the
    envelope as a blob first (a file, so outside any transaction); the envelope is only
    built when the checkpoint is really accepted and has no say in the outcome."""
    scope = _scope(conn, request.scope)
    if request.stage == "plan" and scope.type != "change":
        raise InvalidInput(
            "PLAN_SCOPE_INVALID",
            "a plan belongs to a change: name only its change_id as the scope",
            {"scope": request.scope},
        )
    current = read(conn, request.stage, scope.type, scope.id, "draft")
    if request.operation == "abandon":
        return _abandon(_require_draft(current, request))
    payload = request.payload
    if payload is None:
        payload = _require_draft(current, request)["payload"]
    evidence, found = pinned(conn, project, payload["evidence"])
    found += _stage_warnings(conn, request.stage, scope, payload, evidence)
    writes, gaps = _incident(conn, scope)
    found += gaps
    if request.operation == "draft":
        draft = _Draft(request.stage, scope, payload, evidence, found)
        return _save_draft(draft, current, writes, "checkpoint.draft")
    planned = None
    if request.stage == "plan":
        assert scope.id is not None
        planned = waves.plan_change(conn, scope.id)
        found += planned.conflicts
        if planned.conflicts:
            draft = _Draft(request.stage, scope, payload, evidence, found)
            return _save_draft(draft, current, writes, "checkpoint.accept")
        if not planned.tasks:
            note = f"change {scope.id} has no open tasks to plan"
            found.append(diagnostic("PLAN_NO_TASKS", "warning", note, scope.id))
    draft = _Draft(request.stage, scope, payload, evidence, found)
    accepted = read(conn, request.stage, scope.type, scope.id)
    if accepted is not None and _same_as(conn, accepted, draft, planned):
        kept = writes + _plan_files(scope, accepted["revision"], planned)[0]
        return _keep(draft, accepted, current, kept)
    revision = 1 if accepted is None else accepted["revision"] + 1
    plan_writes, document = _plan_files(scope, revision, planned)
    envelope = context.envelope(
        project, conn, stage=request.stage, scope=scope.envelope_scope(), detail="full"
    )
    fingerprint = None if planned is None else waves.tasks_fingerprint(conn, scope.id or "")
    accepting = _Accepting(draft, accepted, current, envelope["digest"], fingerprint, document)
    plan = _accept(accepting, writes + plan_writes)
    plan.before = lambda: context.store_snapshot(project, envelope)
    return plan


def _plan_files(
    scope: Scope, revision: int, planned: waves.Planned | None
) -> tuple[list[TrackedWrite], dict[str, Any] | None]:
    """Step 8's files: plan.json and plan.md, for a plan only."""
    if planned is None or scope.id is None:
        return [], None
    return waves.plan_files(scope.id, revision, planned)


def _require_draft(current: Row | None, request: Request) -> Row:
    if current is None:
        raise NotFound(
            "CHECKPOINT_DRAFT_NOT_FOUND",
            f"there is no {request.stage} draft for this scope; give a payload",
            {"stage": request.stage, "scope": request.scope},
        )
    return current


# --- step 1: scope ----------------------------------------------------------------------------


def _scope(conn: sqlite3.Connection, given: dict[str, Any]) -> Scope:
    if given.get("baseline"):
        if conn.execute("SELECT 1 FROM delivery_baselines LIMIT 1").fetchone() is None:
            raise _scope_not_found("baseline", "there is no baseline yet; initialize one first")
        return Scope("baseline", None, None, None)
    change = None
    if "change_id" in given:
        if changes.find(conn, given["change_id"]) is None:
            raise _scope_not_found(given["change_id"], f"no change {given['change_id']}")
        change = changes.writable(conn, given["change_id"])
    if "task_id" not in given:
        if change is None:
            return Scope("project", None, None, None)
        return Scope("change", change["id"], change, None)
    task = tasks.find(conn, given["task_id"])
    if task is None:
        raise _scope_not_found(given["task_id"], f"no task {given['task_id']}")
    if change is not None and task["change_id"] != change["id"]:
        raise InvalidInput(
            "CHECKPOINT_SCOPE_MISMATCH",
            f"task {task['id']} does not belong to change {change['id']}",
            {"task_id": task["id"], "change_id": change["id"], "task_change": task["change_id"]},
        )
    if change is None and task["change_id"] is not None:
        change = changes.writable(conn, task["change_id"])
    return Scope("task", task["id"], change, task)


def _scope_not_found(subject: str, message: str) -> NotFound:
    return NotFound("CHECKPOINT_SCOPE_NOT_FOUND", message, {"scope": subject})


# --- step 3: advisory warnings ------------------------------------------------------------


def _stage_warnings(
    conn: sqlite3.Connection,
    stage: str,
    scope: Scope,
    payload: dict[str, Any],
    evidence: list[dict[str, Any]],
) -> list[Diagnostic]:
    data = payload.get("data", {})
    roles = {entry["role"] for entry in evidence}
    missing: list[tuple[str, str]] = []
    if stage == "research" and not evidence:
        missing.append(("RESEARCH_EVIDENCE_EMPTY", "the research checkpoint names no evidence"))
    if stage == "dev" and "worker_outcome" not in roles:
        missing.append(("WORKER_OUTCOME_MISSING", "no evidence has the worker_outcome role"))
    if stage == "test" and "result" not in data:
        missing.append(("TEST_RESULT_MISSING", "data.result (pass, fail, partial) is missing"))
    elif stage == "test" and data["result"] != "pass":
        missing.append(("TEST_FAILED", f"the tests did not pass (result {data['result']})"))
    if stage == "review" and "verdict" not in data:
        missing.append(("REVIEW_VERDICT_MISSING", "data.verdict is missing"))
    if stage == "deliver":
        for needed in ("test", "review"):
            if read(conn, needed, scope.type, scope.id) is None:
                missing.append(
                    (f"{needed.upper()}_CHECKPOINT_MISSING", f"no accepted {needed} checkpoint")
                )
        still_open = _open_tasks(conn, scope)
        if still_open:
            listed = ", ".join(still_open[:10]) + (" …" if len(still_open) > 10 else "")
            missing.append(("TASKS_OPEN", f"{len(still_open)} tasks are not completed: {listed}"))
    return [diagnostic(code, "warning", message, scope.id) for code, message in missing]


def _open_tasks(conn: sqlite3.Connection, scope: Scope) -> list[str]:
    if scope.type == "change":
        query, key = "change_id = ?", scope.id
    elif scope.type == "task":
        query, key = "id = ?", scope.id
    else:
        return []
    return [
        found[0]
        for found in conn.execute(
            f"SELECT id FROM delivery_tasks WHERE {query}"
            " AND status NOT IN ('completed', 'removed') ORDER BY id",
            (key,),
        )
    ]


def _incident(
    conn: sqlite3.Connection, scope: Scope
) -> tuple[list[TrackedWrite], list[Diagnostic]]:
    """An incident's diagnosis.md refreshed (its Ulysses block) and its section gaps."""
    if scope.change is None or scope.change["kind"] != "incident":
        return [], []
    write, found = changes.diagnosis_write(conn, scope.change)
    return [write], found


# --- step 6: unchanged --------------------------------------------------------------------


def _same_as(
    conn: sqlite3.Connection,
    accepted: Row,
    draft: _Draft,
    planned: waves.Planned | None,
) -> bool:
    """Whether accepting ``draft`` would repeat ``accepted``: same payload and evidence,
    and for a plan the same tasks and waves as the plan.json written for it."""
    if canon.digest([accepted["payload"], accepted["evidence"]]) != canon.digest(
        [draft.payload, draft.evidence]
    ):
        return False
    plan_writes, _ = _plan_files(draft.scope, accepted["revision"], planned)
    for write in plan_writes:
        known = registry.lookup(conn, write.path)
        if known is None or known["digest"] != write.digest:
            return False
    return True


# --- committing -----------------------------------------------------------------------------


def _save_draft(draft: _Draft, current: Row | None, writes: list[TrackedWrite], op: str) -> Plan:
    """Create or replace the draft; ``accepted: false`` tells an accept that it was kept."""
    row = draft.row()
    if current is not None and current["digest"] == row["digest"]:
        result = {"accepted": False, "checkpoint": view(current), "unchanged": True}
        return Plan(op, lambda tx: Outcome(result, None), tuple(writes), draft.diagnostics)

    def commit(tx: sqlite3.Connection) -> Outcome:
        _expect(tx, row, "draft", current)
        _put(tx, row, None if current is None else current["id"])
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.checkpoint_drafted",
            subject=row["id"],
            payload={**_event(row), "replaces": None if current is None else current["id"]},
        )
        return Outcome({"accepted": False, "checkpoint": view(row)}, seq)

    return Plan(op, commit, tuple(writes), draft.diagnostics)


def _abandon(current: Row) -> Plan:
    def commit(tx: sqlite3.Connection) -> Outcome:
        _drop_draft(tx, current, "abandoned by request")
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.checkpoint_abandoned",
            subject=current["id"],
            payload={**_event(current), "reason": "abandoned by request"},
        )
        return Outcome({"checkpoint": view({**current, "status": "abandoned"})}, seq)

    return Plan("checkpoint.abandon", commit, (), [])


def _keep(draft: _Draft, accepted: Row, current: Row | None, writes: list[TrackedWrite]) -> Plan:
    """The accepted revision already says this: nothing changes but a draft saying the
    same, which is dropped."""
    note = diagnostic(
        "CHECKPOINT_UNCHANGED",
        "info",
        f"revision {accepted['revision']} already holds this payload and evidence",
        accepted["id"],
    )

    def commit(tx: sqlite3.Connection) -> Outcome:
        _expect(tx, accepted, "accepted", accepted)
        seq = None
        if current is not None:
            _drop_draft(tx, current, "equal to the accepted revision")
            seq = journal.append(
                tx,
                actor="agent",
                kind="delivery.checkpoint_abandoned",
                subject=current["id"],
                payload={**_event(current), "reason": "equal to the accepted revision"},
            )
        result = {"accepted": True, "unchanged": True, "checkpoint": view(accepted)}
        return Outcome(result, seq)

    return Plan("checkpoint.accept", commit, tuple(writes), [*draft.diagnostics, note])


@dataclass(frozen=True)
class _Accepting:
    draft: _Draft
    accepted: Row | None
    current: Row | None
    envelope_digest: str
    fingerprint: str | None
    document: dict[str, Any] | None


def _accept(accepting: _Accepting, writes: list[TrackedWrite]) -> Plan:
    """Step 7 (and 8 through ``writes``): supersede and accept in one transaction."""
    previous = accepting.accepted
    row = accepting.draft.row(
        status="accepted",
        revision=1 if previous is None else previous["revision"] + 1,
        envelope_digest=accepting.envelope_digest,
        supersedes_id=None if previous is None else previous["id"],
    )
    scope = accepting.draft.scope

    def commit(tx: sqlite3.Connection) -> Outcome:
        _expect(tx, row, "accepted", previous)
        _expect(tx, row, "draft", accepting.current)
        if accepting.fingerprint is not None and accepting.fingerprint != (
            waves.tasks_fingerprint(tx, scope.id or "")
        ):
            raise Stale(scope.id)
        if previous is not None:
            tx.execute(
                "UPDATE delivery_checkpoints SET status = 'superseded', updated_at = ?"
                " WHERE id = ?",
                (clock.now(), previous["id"]),
            )
        _put(tx, row, None if accepting.current is None else accepting.current["id"])
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.checkpoint_accepted",
            subject=row["id"],
            payload={
                **_event(row),
                "revision": row["revision"],
                "supersedes_id": row["supersedes_id"],
                "envelope_digest": row["envelope_digest"],
            },
        )
        result: dict[str, Any] = {"accepted": True, "checkpoint": view(row)}
        if accepting.document is not None:
            result["plan"] = {
                "path": f"{layout.change_folder(scope.id or '')}/plan.json",
                "digest": accepting.document["digest"],
                "waves": accepting.document["waves"],
            }
        return Outcome(result, seq)

    return Plan("checkpoint.accept", commit, tuple(writes), accepting.draft.diagnostics)


def _expect(tx: sqlite3.Connection, like: Row, status: str, expected: Row | None) -> None:
    """``Stale`` unless the (stage, scope) row in ``status`` is still the one prepared on."""
    found = tx.execute(
        "SELECT id, digest FROM delivery_checkpoints WHERE stage = ? AND scope_type = ?"
        " AND ifnull(scope_id, '') = ? AND status = ?",
        (like["stage"], like["scope_type"], like["scope_id"] or "", status),
    ).fetchone()
    want = None if expected is None else (expected["id"], expected["digest"])
    if (None if found is None else tuple(found)) != want:
        raise Stale(f"{like['stage']} checkpoint")


def _put(tx: sqlite3.Connection, row: Row, replacing: str | None) -> None:
    """Write ``row``: over the draft ``replacing``, else as a new row. An abandoned draft
    with the very same content (hence id) gives way; the journal keeps its history."""
    now = clock.now()
    tx.execute(
        "DELETE FROM delivery_checkpoints WHERE id = ? AND status = 'abandoned'", (row["id"],)
    )
    values = [
        canon.canonical_text(row[name]) if name in _JSON_COLUMNS else row[name] for name in COLUMNS
    ]
    if replacing is None:
        tx.execute(
            f"INSERT INTO delivery_checkpoints ({', '.join(COLUMNS)}, created_at, updated_at)"
            f" VALUES ({', '.join('?' * (len(COLUMNS) + 2))})",
            (*values, now, now),
        )
        return
    assignments = ", ".join(f"{name} = ?" for name in COLUMNS)
    tx.execute(
        f"UPDATE delivery_checkpoints SET {assignments}, updated_at = ? WHERE id = ?",
        (*values, now, replacing),
    )


def _drop_draft(tx: sqlite3.Connection, current: Row, reason: str) -> None:
    moved = tx.execute(
        "UPDATE delivery_checkpoints SET status = 'abandoned', updated_at = ?"
        " WHERE id = ? AND status = 'draft' AND digest = ?",
        (clock.now(), current["id"], current["digest"]),
    ).rowcount
    if not moved:
        raise Stale(reason)


def _event(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "stage": row["stage"],
        "scope": {"type": row["scope_type"], "id": row["scope_id"]},
        "digest": row["digest"],
    }
