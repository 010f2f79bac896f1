"""``record task_contract define|revise|remove`` and the task status rules they touch.

A task's contract (title, verification, deps, declared files, acceptance …) is stored
canonically with its digest, which Worker Packets and plans pin: revising it yields a new
digest, bumps the revision and resets the task's circuit breaker. Unknown dependencies
and undeclared files are warnings (``TASK_DEP_UNKNOWN``, ``TASK_FILES_UNDECLARED``): plan
waves treat a task without declared files as overlapping everything.

The status machine (docs/delivery.md, "The record tool") is enforced here for the
transitions that need no session: ``remove`` (from pending or blocked), a parent becoming
``expanded`` when a child is defined under it, and an expanded parent completing once
every remaining child is completed. ``in_progress`` belongs to sessions: such a task
cannot be revised (``TASK_RUNNING``).
"""

from __future__ import annotations

import json
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.contract import Diagnostic, check_expected_revision, diagnostic
from ithaca.delivery.records import changes, merge_patch
from ithaca.delivery.schemas.dialect import check
from ithaca.delivery.schemas.record import TASK_BODY
from ithaca.delivery.units.plans import Outcome, Plan, Stale, unchanged
from ithaca.kernel import canon, clock, journal
from ithaca.kernel.errors import Conflict, InvalidInput, NotFound, Refused
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

# Which statuses each status may move to (docs/delivery.md, "The record tool").
TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"in_progress", "blocked", "expanded", "removed"}),
    "in_progress": frozenset({"completed", "blocked", "pending"}),
    "blocked": frozenset({"pending", "in_progress", "removed"}),
    "expanded": frozenset({"completed"}),
    "completed": frozenset({"in_progress"}),
    "removed": frozenset(),
}
_COLUMNS = ("id", "change_id", "parent_id", "status", "contract", "contract_digest", "revision")
_BODY_FIELDS = tuple(TASK_BODY["properties"])


def find(conn: sqlite3.Connection, task_id: str) -> Row | None:
    row = conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM delivery_tasks WHERE id = ?", (task_id,)
    ).fetchone()
    if row is None:
        return None
    found = dict(zip(_COLUMNS, row, strict=True))
    found["contract"] = json.loads(found["contract"])
    return found


def load(conn: sqlite3.Connection, task_id: str) -> Row:
    found = find(conn, task_id)
    if found is None:
        raise NotFound("TASK_NOT_FOUND", f"no task {task_id}", {"task_id": task_id})
    return found


def require_transition(task: Row, to: str) -> None:
    """``TASK_TRANSITION_INVALID`` unless the machine allows ``task`` to move to ``to``."""
    if to not in TRANSITIONS[task["status"]]:
        raise Refused(
            "TASK_TRANSITION_INVALID",
            f"task {task['id']} is {task['status']} and cannot become {to}",
            {"task_id": task["id"], "from": task["status"], "to": to},
        )


def view(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "status": row["status"],
        "revision": row["revision"],
        "change_id": row["change_id"],
        "parent_id": row["parent_id"],
        "contract": row["contract"],
        "contract_digest": row["contract_digest"],
    }


# --- actions ----------------------------------------------------------------------------


def define(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    task_id = data["id"]
    change_id = data.get("change_id")
    parent = None
    if data.get("parent_id") is not None:
        parent = _parent(conn, task_id, data["parent_id"], change_id)
        change_id = parent["change_id"]
    if change_id is not None:
        changes.writable(conn, change_id)
    body = _normalised_body({name: data[name] for name in _BODY_FIELDS if name in data})
    contract = _contract(task_id, change_id, data.get("parent_id"), body)
    digest = canon.digest(contract)
    existing = find(conn, task_id)
    if existing is not None:
        if existing["contract_digest"] == digest and existing["status"] != "removed":
            note = diagnostic("TASK_UNCHANGED", "info", f"task {task_id} is already defined")
            return unchanged("task_contract.define", {"task": view(existing)}, [note])
        raise Conflict(
            "TASK_EXISTS",
            f"task {task_id} already exists; revise it, or define the new one under another id",
            {"task_id": task_id, "status": existing["status"]},
        )
    row: Row = {
        "id": task_id,
        "change_id": change_id,
        "parent_id": data.get("parent_id"),
        "status": "pending",
        "contract": contract,
        "contract_digest": digest,
        "revision": 1,
    }
    diagnostics = _contract_gaps(conn, row)

    def commit(tx: sqlite3.Connection) -> Outcome:
        if find(tx, task_id) is not None:
            raise Stale(task_id)
        now = clock.now()
        tx.execute(
            "INSERT INTO delivery_tasks (id, change_id, parent_id, status, contract,"
            " contract_digest, revision, created_at, updated_at)"
            " VALUES (?, ?, ?, 'pending', ?, ?, 1, ?, ?)",
            (
                task_id,
                change_id,
                row["parent_id"],
                canon.canonical_text(contract),
                digest,
                now,
                now,
            ),
        )
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.task_defined",
            subject=task_id,
            payload={
                "id": task_id,
                "change_id": change_id,
                "parent_id": row["parent_id"],
                "contract_digest": digest,
            },
        )
        if parent is not None and parent["status"] == "pending":
            _set_status(tx, parent, "expanded")
            seq = journal.append(
                tx,
                actor="agent",
                kind="delivery.task_expanded",
                subject=parent["id"],
                payload={"id": parent["id"], "child": task_id},
            )
        elif parent is not None:
            _require_unchanged(tx, parent)
        return Outcome({"task": view(row)}, seq)

    return Plan("task_contract.define", commit, (), diagnostics)


def revise(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    before = load(conn, data["id"])
    if before["status"] == "in_progress":
        raise Conflict(
            "TASK_RUNNING",
            f"task {before['id']} is in progress; its contract changes after the session ends",
            {"task_id": before["id"]},
        )
    if before["status"] == "removed":
        raise Refused(
            "TASK_TRANSITION_INVALID",
            f"task {before['id']} was removed; define a new task instead",
            {"task_id": before["id"], "from": "removed", "to": "revised"},
        )
    if before["change_id"] is not None:
        changes.writable(conn, before["change_id"])
    check_expected_revision(data.get("expected_revision"), before["revision"], before["id"])
    old_body = {
        name: before["contract"][name] for name in _BODY_FIELDS if name in before["contract"]
    }
    body = _normalised_body(
        check(TASK_BODY, merge_patch.apply(old_body, data["patch"]), "/patch"), "/patch"
    )
    contract = _contract(before["id"], before["change_id"], before["parent_id"], body)
    digest = canon.digest(contract)
    if digest == before["contract_digest"]:
        note = diagnostic(
            "TASK_UNCHANGED", "info", f"task {before['id']} already has this contract"
        )
        return unchanged("task_contract.revise", {"task": view(before)}, [note])
    after = {
        **before,
        "contract": contract,
        "contract_digest": digest,
        "revision": before["revision"] + 1,
    }
    changed = sorted(
        name
        for name in set(contract) | set(before["contract"])
        if contract.get(name) != before["contract"].get(name)
    )

    def commit(tx: sqlite3.Connection) -> Outcome:
        moved = tx.execute(
            "UPDATE delivery_tasks SET contract = ?, contract_digest = ?, revision = ?,"
            " updated_at = ? WHERE id = ? AND revision = ? AND status = ?",
            (
                canon.canonical_text(contract),
                digest,
                after["revision"],
                clock.now(),
                before["id"],
                before["revision"],
                before["status"],
            ),
        ).rowcount
        if not moved:
            raise Stale(before["id"])
        reset = tx.execute(
            "UPDATE delivery_circuits SET consecutive_failures = 0, open = 0, updated_at = ?"
            " WHERE task_id = ? AND (consecutive_failures > 0 OR open = 1)",
            (clock.now(), before["id"]),
        ).rowcount
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.task_revised",
            subject=before["id"],
            payload={
                "id": before["id"],
                "revision": after["revision"],
                "contract_digest": digest,
                "changed": changed,
                "circuit_reset": bool(reset),
            },
        )
        return Outcome({"task": view(after)}, seq)

    return Plan("task_contract.revise", commit, (), _contract_gaps(conn, after))


def remove(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    before = load(conn, data["id"])
    if before["change_id"] is not None:
        changes.writable(conn, before["change_id"])
    require_transition(before, "removed")
    after = {**before, "status": "removed"}

    def commit(tx: sqlite3.Connection) -> Outcome:
        _set_status(tx, before, "removed", removed_reason=data["reason"])
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.task_removed",
            subject=before["id"],
            payload={"id": before["id"], "reason": data["reason"]},
        )
        if before["parent_id"] is not None:
            seq = settle_parent(tx, before["parent_id"]) or seq
        return Outcome({"task": view(after)}, seq)

    return Plan("task_contract.remove", commit, (), [])


def settle_parent(conn: sqlite3.Connection, parent_id: str) -> int | None:
    """Complete an expanded parent whose remaining children are all completed; returns
    the journal seq when it did. Runs inside the caller's write transaction."""
    parent = find(conn, parent_id)
    if parent is None or parent["status"] != "expanded":
        return None
    statuses = [
        row[0]
        for row in conn.execute(
            "SELECT status FROM delivery_tasks WHERE parent_id = ? AND status != 'removed'",
            (parent_id,),
        )
    ]
    if not statuses or any(status != "completed" for status in statuses):
        return None
    _set_status(conn, parent, "completed")
    return journal.append(
        conn,
        actor="system",
        kind="delivery.task_completed",
        subject=parent_id,
        payload={"id": parent_id, "by": "children"},
    )


# --- pieces -------------------------------------------------------------------------------


def _parent(conn: sqlite3.Connection, task_id: str, parent_id: str, change_id: str | None) -> Row:
    if parent_id == task_id:
        raise InvalidInput(
            "VALIDATION_ERROR",
            "/parent_id: a task cannot be its own parent",
            {"pointer": "/parent_id", "problem": "SELF_REFERENCE"},
        )
    parent = load(conn, parent_id)
    if change_id is not None and parent["change_id"] != change_id:
        raise InvalidInput(
            "SCOPE_MISMATCH",
            f"task {parent_id} belongs to change {parent['change_id']}, not {change_id}",
            {"parent_id": parent_id, "change_id": change_id, "parent_change": parent["change_id"]},
        )
    if parent["status"] != "expanded":
        require_transition(parent, "expanded")
    return parent


def _normalised_body(body: dict[str, Any], pointer: str = "") -> dict[str, Any]:
    """Declared files as safe relative paths, sorted and de-duplicated."""
    files = body.get("files_modified")
    if files is not None:
        body = {
            **body,
            "files_modified": sorted(
                {
                    layout.relative(path, f"{pointer}/files_modified/{index}")
                    for index, path in enumerate(files)
                }
            ),
        }
    return body


def _contract(
    task_id: str, change_id: str | None, parent_id: str | None, body: dict[str, Any]
) -> dict[str, Any]:
    contract = {
        "id": task_id,
        "deps": [],
        "files_modified": [],
        "acceptance": [],
        **body,
    }
    if change_id is not None:
        contract["change_id"] = change_id
    if parent_id is not None:
        contract["parent_id"] = parent_id
    return contract


def _contract_gaps(conn: sqlite3.Connection, row: Row) -> list[Diagnostic]:
    found = []
    for dep in row["contract"]["deps"]:
        known = conn.execute(
            "SELECT 1 FROM delivery_tasks WHERE id = ? AND status != 'removed'", (dep,)
        ).fetchone()
        if known is None or dep == row["id"]:
            found.append(
                diagnostic(
                    "TASK_DEP_UNKNOWN",
                    "warning",
                    f"task {row['id']} depends on {dep}, which is not a defined task",
                    dep,
                )
            )
    if not row["contract"]["files_modified"]:
        found.append(
            diagnostic(
                "TASK_FILES_UNDECLARED",
                "warning",
                f"task {row['id']} declares no files; plan waves will not run it beside others",
                row["id"],
            )
        )
    return found


def _set_status(
    conn: sqlite3.Connection, task: Row, status: str, *, removed_reason: str | None = None
) -> None:
    moved = conn.execute(
        "UPDATE delivery_tasks SET status = ?, removed_reason = coalesce(?, removed_reason),"
        " updated_at = ? WHERE id = ? AND status = ? AND revision = ?",
        (status, removed_reason, clock.now(), task["id"], task["status"], task["revision"]),
    ).rowcount
    if not moved:
        raise Stale(task["id"])


def _require_unchanged(conn: sqlite3.Connection, task: Row) -> None:
    current = find(conn, task["id"])
    if current is None or (current["status"], current["revision"]) != (
        task["status"],
        task["revision"],
    ):
        raise Stale(task["id"])
