"""The ``checkpoint`` tool: a stage of work declared done, pinned to its evidence
(docs/delivery.md, "checkpoint").

A checkpoint is per (stage, scope): at most one mutable ``draft`` and one ``accepted``
revision. ``draft`` creates or replaces the draft, ``abandon`` drops it, ``accept``
(the default) replaces the draft with the given payload first, or accepts the existing
draft. The request is checked first (``ithaca.delivery.checkpoints.request``); acceptance
runs these steps in order:

1. the scope must exist (a task inside the change it is named with;
   ``ithaca.delivery.checkpoints.scope``);
2. evidence is re-read from disk (``ithaca.delivery.checkpoints.evidence``);
3. the stage's advisory warnings (a test checkpoint without a result, an incident whose
   diagnosis has gaps, whose file is refreshed here, …), never blocking;
4. the full context envelope is stored as a blob, so the acceptance can later be read
   against exactly the authority it was made under;
5. a ``plan`` computes the change's execution waves; a dependency cycle or an unknown
   dependency keeps the draft instead of accepting it;
6. the same payload and evidence as the accepted revision change nothing;
7. one transaction supersedes the previous revision and accepts the new one
   (``ithaca.delivery.checkpoints.transitions``), whose ``digest`` covers everything it
   claims and is re-verified whenever a row is read (``ithaca.delivery.checkpoints.rows``),
   so a row edited behind Ithaca's back is ``CHECKPOINT_DIGEST_MISMATCH``;
8. a plan writes ``plan.json`` and ``plan.md`` in the same recoverable unit.

A run that was killed while it wrote those files may have left a temp file beside them
(``kernel.files``); the next run removes, from the folders it writes, every temp no live
writer holds, as ``ithaca doctor --repair`` does (docs/delivery.md, ``doctor``).

Every row's id is ``cp-`` and the first 16 hex digits of its digest. The team ledger is
published after acceptance once ``sync`` exists.
"""

from __future__ import annotations

import os
from typing import Any

from ithaca.delivery.checkpoints import transitions
from ithaca.delivery.checkpoints.evidence import pinned
from ithaca.delivery.checkpoints.request import Request, parse
from ithaca.delivery.checkpoints.rows import Row, read
from ithaca.delivery.checkpoints.scope import Scope
from ithaca.delivery.checkpoints.scope import resolve as resolve_scope
from ithaca.delivery.checkpoints.transitions import Draft
from ithaca.delivery.context import tool as context
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.idempotency import Guard, request_digest
from ithaca.delivery.records import changes
from ithaca.delivery.run_plan import waves
from ithaca.delivery.units import registry
from ithaca.delivery.units.plans import Plan, TrackedWrite, flat
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput, NotFound
from ithaca.kernel.files import abandoned_temps
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

TOOL = "checkpoint"


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
    prepared: list[Plan] = []

    def prepare(conn: sqlite3.Connection) -> Plan:
        prepared.append(_prepare(conn, project, request))
        return prepared[-1]

    try:
        answer, replayed = runner.run_keyed(
            guard, prepare, f"checkpoint {request.stage}", {"stage": request.stage}
        )
    finally:
        if prepared:
            _sweep_temps(project, prepared[-1])
    return {**flat(answer), "replayed": True} if replayed else flat(answer)


def _sweep_temps(project: Project, plan: Plan) -> None:
    """Remove the temps an earlier, killed run left in the folders this plan writes."""
    folders = {os.path.dirname(write.path) for write in plan.writes}
    for folder in sorted(folders):
        try:
            abandoned_temps(os.path.join(project.state_root, folder), remove=True)
        except OSError:
            continue  # the doctor reports what stays (TEMP_FILE_LEFT)


def _prepare(conn: sqlite3.Connection, project: Project, request: Request) -> Plan:
    """Steps 1–7 read in one snapshot: the plan to commit. An accepting plan stores the
    envelope as a blob first (a file, so outside any transaction); the envelope is only
    built when the checkpoint is really accepted and has no say in the outcome."""
    scope = resolve_scope(conn, request.scope)
    if request.stage == "plan" and scope.type != "change":
        raise InvalidInput(
            "PLAN_SCOPE_INVALID",
            "a plan belongs to a change: name only its change_id as the scope",
            {"scope": request.scope},
        )
    current = read(conn, request.stage, scope.type, scope.id, "draft")
    if request.operation == "abandon":
        return transitions.abandon(_require_draft(current, request))
    payload = request.payload
    if payload is None:
        payload = _require_draft(current, request)["payload"]
    evidence, found = pinned(conn, project, payload["evidence"])
    found += _stage_warnings(conn, request.stage, scope, payload, evidence)
    writes, gaps = _incident(conn, scope)
    found += gaps
    if request.operation == "draft":
        draft = Draft(request.stage, scope, payload, evidence, found)
        return transitions.save_draft(draft, current, writes, "checkpoint.draft")
    planned = None
    if request.stage == "plan":
        assert scope.id is not None
        planned = waves.plan_change(conn, scope.id)
        found += planned.conflicts
        if planned.conflicts:
            draft = Draft(request.stage, scope, payload, evidence, found)
            return transitions.save_draft(draft, current, writes, "checkpoint.accept")
        if not planned.tasks:
            note = f"change {scope.id} has no open tasks to plan"
            found.append(diagnostic("PLAN_NO_TASKS", "warning", note, scope.id))
    draft = Draft(request.stage, scope, payload, evidence, found)
    accepted = read(conn, request.stage, scope.type, scope.id)
    if accepted is not None and _same_as(conn, accepted, draft, planned):
        kept = writes + _plan_files(scope, accepted["revision"], planned)[0]
        return transitions.keep(draft, accepted, current, kept)
    revision = 1 if accepted is None else accepted["revision"] + 1
    plan_writes, document = _plan_files(scope, revision, planned)
    envelope = context.envelope(
        project, conn, stage=request.stage, scope=scope.envelope_scope(), detail="full"
    )
    fingerprint = None if planned is None else waves.tasks_fingerprint(conn, scope.id or "")
    accepting = transitions.Accepting(
        draft, accepted, current, envelope["digest"], fingerprint, document
    )
    plan = transitions.accept(accepting, writes + plan_writes)
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
    """The draft an accept without a payload or an abandon works on."""
    if current is None:
        raise NotFound(
            "CHECKPOINT_DRAFT_NOT_FOUND",
            f"there is no {request.stage} draft for this scope; give a payload",
            {"stage": request.stage, "scope": request.scope},
        )
    return current


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
    draft: Draft,
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
