"""``record change_contract open|revise|cancel`` (docs/delivery.md, "The record tool").

A change is a unit of delivery with a profile: ``quick`` needs an outcome, ``standard``
adds acceptance, ``major`` and ``incident`` want the whole contract, classification and
research disposition. Missing parts are warnings (``CHANGE_CONTRACT_GAP:<field>``), never
refusals: the contract grows while the change is worked on. A quick change carrying risk
flags is advised to escalate. The change's folder holds ``intent.md`` (the caller's
Markdown, verbatim) and, for incidents,
``diagnosis.md`` (``ithaca.delivery.checkpoints.diagnosis``).

Other parts reach changes through ``find``, ``load`` and ``writable`` (which refuses an
archived change with ``CHANGE_ARCHIVED``), and refresh a diagnosis with
``diagnosis_write``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from ithaca.delivery import documents, layout, rows
from ithaca.delivery.checkpoints import diagnosis, ulysses_link
from ithaca.delivery.contract import (
    Diagnostic,
    check_expected_revision,
    diagnostic,
)
from ithaca.delivery.records import merge_patch
from ithaca.delivery.schemas.dialect import check
from ithaca.delivery.schemas.record import CHANGE_BODY
from ithaca.delivery.units import owners as processes
from ithaca.delivery.units import registry
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite, unchanged
from ithaca.kernel import clock, journal
from ithaca.kernel.errors import Conflict, NotFound, Refused
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

ALL_PARTS = (
    "contract.outcome",
    "contract.acceptance",
    "contract.non_goals",
    "contract.public_seams",
    "contract.recovery",
    "classification.rationale",
    "classification.risk_flags",
    "research_disposition",
)
PROFILE_PARTS = {
    "quick": ("contract.outcome",),
    "standard": ("contract.outcome", "contract.acceptance"),
    "major": ALL_PARTS,
    "incident": ALL_PARTS,
}
_COLUMNS = (
    "id",
    "kind",
    "status",
    "title",
    "contract",
    "classification",
    "research_disposition",
    "diagnosis",
    "debug_session_id",
    "path",
    "revision",
    "cancel_reason",
)
_JSON_COLUMNS = ("contract", "classification", "diagnosis")
_BODY_FIELDS = ("kind", "title", "contract", "classification", "research_disposition")


# --- reading ------------------------------------------------------------------------------


def find(conn: sqlite3.Connection, change_id: str) -> Row | None:
    row = conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM delivery_changes WHERE id = ?", (change_id,)
    ).fetchone()
    return rows.loaded(row, _COLUMNS, _JSON_COLUMNS)


def load(conn: sqlite3.Connection, change_id: str) -> Row:
    found = find(conn, change_id)
    if found is None:
        raise NotFound("CHANGE_NOT_FOUND", f"no change {change_id}", {"change_id": change_id})
    return found


def writable(conn: sqlite3.Connection, change_id: str) -> Row:
    """The change, provided it may still be written to (not archived)."""
    found = load(conn, change_id)
    if found["status"] == "archived":
        raise Refused(
            "CHANGE_ARCHIVED",
            f"change {change_id} is archived; its records are immutable",
            {"change_id": change_id},
        )
    return found


def view(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "kind": row["kind"],
        "status": row["status"],
        "title": row["title"],
        "revision": row["revision"],
        "path": row["path"],
        "contract": row["contract"],
        "classification": row["classification"],
        "research_disposition": row["research_disposition"],
        "debug_session_id": row["debug_session_id"],
    }


def profile_gaps(body: dict[str, Any], subject: str) -> list[Diagnostic]:
    """The profile's missing contract parts, and the escalation hint for risky quick ones."""
    found = [
        diagnostic(
            f"CHANGE_CONTRACT_GAP:{part}",
            "warning",
            f"{part} is missing; the {body['kind']} profile asks for it",
            subject,
        )
        for part in PROFILE_PARTS[body["kind"]]
        if _missing(body, part)
    ]
    risks = body.get("classification", {}).get("risk_flags") or []
    if body["kind"] == "quick" and risks:
        found.append(
            diagnostic(
                "CHANGE_PROFILE_ESCALATION_SUGGESTED",
                "warning",
                f"a quick change with risk flags ({', '.join(risks)}) is better run as"
                " standard or major",
                subject,
            )
        )
    return found


def diagnosis_write(conn: sqlite3.Connection, row: Row) -> tuple[TrackedWrite, list[Diagnostic]]:
    """An incident's ``diagnosis.md`` rendered now (fresh Ulysses blocks) and its gaps."""
    sections = row["diagnosis"] or {}
    session, diagnostics = _linked_session(conn, row["debug_session_id"], row["id"])
    text = diagnosis.render(row["id"], sections, session)
    write = TrackedWrite(
        layout.diagnosis_path(row["id"]), documents.markdown(text), "diagnosis", "change", row["id"]
    )
    return write, diagnostics + diagnosis.missing_sections(sections, row["id"])


# --- actions --------------------------------------------------------------------------------


def open_change(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    change_id = data.get("id") or _new_id(conn, data["title"])
    if find(conn, change_id) is not None:
        raise Conflict(
            "CHANGE_EXISTS",
            f"change {change_id} already exists; revise it, or open under another id",
            {"change_id": change_id},
        )
    sections = data.get("diagnosis")
    if sections is not None:
        diagnosis.check_caller_text(sections, "/diagnosis")
    now = clock.now()
    row: Row = {
        "id": change_id,
        "kind": data["kind"],
        "status": "active",
        "title": data["title"],
        "contract": data["contract"],
        "classification": data["classification"],
        "research_disposition": data.get("research_disposition"),
        "diagnosis": sections,
        "debug_session_id": data.get("debug_session_id"),
        "path": layout.change_folder(change_id),
        "revision": 1,
        "cancel_reason": None,
    }
    writes, diagnostics = _files(conn, row, data["intent"])
    diagnostics = profile_gaps(_body(row), change_id) + diagnostics

    def commit(tx: sqlite3.Connection) -> Outcome:
        if find(tx, change_id) is not None:
            raise Stale(change_id)
        tx.execute(
            f"INSERT INTO delivery_changes ({', '.join(_COLUMNS)}, created_at, updated_at)"
            f" VALUES ({', '.join('?' * (len(_COLUMNS) + 2))})",
            (*_stored(row), now, now),
        )
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.change_opened",
            subject=change_id,
            payload={"id": change_id, "kind": row["kind"], "files": _file_refs(writes)},
        )
        return Outcome({"change": view(row), "files": _file_refs(writes)}, seq)

    return Plan("change_contract.open", commit, tuple(writes), diagnostics)


def revise_change(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    before = _revisable(conn, data["id"])
    check_expected_revision(data.get("expected_revision"), before["revision"], data["id"])
    body = check(CHANGE_BODY, merge_patch.apply(_body(before), data["patch"]), "/patch")
    sections = before["diagnosis"]
    if "diagnosis" in data:
        diagnosis.check_caller_text(data["diagnosis"], "/diagnosis")
        sections = {**(sections or {}), **data["diagnosis"]}
    after: Row = {
        **before,
        **{name: body.get(name) for name in _BODY_FIELDS},
        "contract": body.get("contract", {}),
        "classification": body.get("classification", {}),
        "debug_session_id": body.get("debug_session_id"),
        "status": data.get("status", before["status"]),
        "diagnosis": sections,
    }
    writes, diagnostics = _files(conn, after, data.get("intent"))
    diagnostics = profile_gaps(_body(after), after["id"]) + diagnostics
    moved = [write for write in writes if _registered_digest(conn, write.path) != write.digest]
    if _stored(after) == _stored(before) and not moved:
        return unchanged("change_contract.revise", {"change": view(before)}, diagnostics)
    after["revision"] = before["revision"] + 1
    changed = sorted(
        name for name in _COLUMNS if after[name] != before[name] and name != "revision"
    )

    def commit(tx: sqlite3.Connection) -> Outcome:
        _update(tx, before, after)
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.change_revised",
            subject=after["id"],
            payload={
                "id": after["id"],
                "revision": after["revision"],
                "changed": changed,
                "files": _file_refs(moved),
            },
        )
        return Outcome({"change": view(after), "files": _file_refs(writes)}, seq)

    return Plan("change_contract.revise", commit, tuple(writes), diagnostics)


def cancel_change(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    before = writable(conn, data["id"])
    if before["status"] == "cancelled":
        note = diagnostic(
            "CHANGE_ALREADY_CANCELLED", "info", f"change {before['id']} was already cancelled"
        )
        return unchanged("change_contract.cancel", {"change": view(before)}, [note])
    require_nothing_running(conn, before["id"], "SESSIONS_RUNNING")
    after = {
        **before,
        "status": "cancelled",
        "cancel_reason": data["reason"],
        "revision": before["revision"] + 1,
    }

    def commit(tx: sqlite3.Connection) -> Outcome:
        require_nothing_running(tx, before["id"], "SESSIONS_RUNNING")
        _update(tx, before, after)
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.change_cancelled",
            subject=after["id"],
            payload={"id": after["id"], "revision": after["revision"], "reason": data["reason"]},
        )
        return Outcome({"change": view(after)}, seq)

    return Plan("change_contract.cancel", commit, (), [])


# --- pieces -----------------------------------------------------------------------------------


def _revisable(conn: sqlite3.Connection, change_id: str) -> Row:
    found = writable(conn, change_id)
    if found["status"] == "cancelled":
        raise Refused(
            "CHANGE_CANCELLED",
            f"change {change_id} is cancelled; open a new change instead",
            {"change_id": change_id},
        )
    return found


def _files(
    conn: sqlite3.Connection, row: Row, intent: str | None
) -> tuple[list[TrackedWrite], list[Diagnostic]]:
    """The files a change's new state needs written, and the link/diagnosis diagnostics."""
    writes = []
    if intent is not None:
        data = documents.markdown(intent)
        writes.append(
            TrackedWrite(layout.intent_path(row["id"]), data, "intent", "change", row["id"])
        )
    if row["kind"] == "incident":
        write, diagnostics = diagnosis_write(conn, row)
        writes.append(write)
        return writes, diagnostics
    _, diagnostics = _linked_session(conn, row["debug_session_id"], row["id"])
    if row["diagnosis"] is not None:
        diagnostics.append(
            diagnostic(
                "DIAGNOSIS_NOT_WRITTEN",
                "info",
                "only incidents get diagnosis.md; the sections are kept with the change",
                row["id"],
            )
        )
    return writes, diagnostics


def _linked_session(
    conn: sqlite3.Connection, session_id: str | None, subject: str
) -> tuple[dict[str, Any] | None, list[Diagnostic]]:
    if session_id is None:
        return None, []
    session = ulysses_link.read_session(conn, session_id)
    if session is None:
        return None, [
            diagnostic(
                "DEBUG_SESSION_NOT_FOUND",
                "warning",
                f"no Ulysses session {session_id}; the link is kept and shown once it exists",
                subject,
            )
        ]
    return session, []


def require_nothing_running(conn: sqlite3.Connection, change_id: str, code: str) -> None:
    """``Conflict`` ``code`` while a task of the change is in progress (a session runs it)
    or a run-plan is at work on it: cancelling or archiving under a running worker would
    pull the floor from under it. A paused run, or one whose runner died, holds nothing
    up: it has no worker, and otherwise a run paused for good would pin the change."""
    running = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM delivery_tasks WHERE change_id = ? AND status = 'in_progress'"
            " ORDER BY id",
            (change_id,),
        )
    ]
    if running:
        raise Conflict(
            code,
            f"change {change_id} has tasks in progress ({', '.join(running)}); close their"
            " sessions first",
            {"change_id": change_id, "tasks": running},
        )
    run = conn.execute(
        "SELECT id, owner_pid, owner_start FROM delivery_plan_runs WHERE change_id = ?"
        " AND status = 'running'",
        (change_id,),
    ).fetchone()
    if run is not None and (run[1] is None or processes.is_alive(run[1], run[2])):
        raise Conflict(
            code,
            f"run-plan {run[0]} is at work on change {change_id} (pid {run[1]}); let it pause"
            " or finish first",
            {"change_id": change_id, "plan_run_id": run[0], "owner_pid": run[1]},
        )


def _update(conn: sqlite3.Connection, before: Row, after: Row) -> None:
    assignments = ", ".join(f"{name} = ?" for name in _COLUMNS[1:])
    moved = conn.execute(
        f"UPDATE delivery_changes SET {assignments}, updated_at = ?"
        " WHERE id = ? AND revision = ? AND status = ?",
        (*_stored(after)[1:], clock.now(), before["id"], before["revision"], before["status"]),
    ).rowcount
    if not moved:
        raise Stale(before["id"])


def _stored(row: Row) -> tuple[Any, ...]:
    return rows.stored(row, _COLUMNS, _JSON_COLUMNS)


def _body(row: Row) -> dict[str, Any]:
    """The part of a change ``revise`` patches (absent optional fields left out)."""
    body = {name: row[name] for name in _BODY_FIELDS if row[name] is not None}
    if row["debug_session_id"] is not None:
        body["debug_session_id"] = row["debug_session_id"]
    return body


def _missing(body: dict[str, Any], part: str) -> bool:
    value: Any = body
    for step in part.split("."):
        value = value.get(step) if isinstance(value, dict) else None
    if isinstance(value, str):
        return not value.strip()
    if part == "contract.acceptance":
        return not value
    return value is None or value == {}


def _registered_digest(conn: sqlite3.Connection, path: str) -> str | None:
    found = registry.lookup(conn, path)
    return None if found is None else found["digest"]


def _file_refs(writes: list[TrackedWrite]) -> list[dict[str, str]]:
    return [{"path": write.path, "digest": write.digest} for write in writes]


def _new_id(conn: sqlite3.Connection, title: str) -> str:
    """A free slug of the title (``add-login``, then ``add-login-2``)."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    base = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")[:50].strip("-")
    if len(base) < 2:
        base = "change"
    candidate, number = base, 2
    while find(conn, candidate) is not None:
        candidate, number = f"{base}-{number}", number + 1
    return candidate
