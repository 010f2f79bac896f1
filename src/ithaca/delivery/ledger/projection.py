"""The database's portable projection: the records this checkout would publish
(docs/delivery.md, "The team ledger: sync").

"Ours" in every ledger merge. Only team-visible state is projected: the baseline in
force and the one being adopted, every change with its own documents, every decision,
accepted checkpoints and every task that was not removed. What belongs to this checkout
never leaves it: ``in_progress`` (a task a session runs is published with its last
published status), sessions, leases, pids, host session ids, worktrees, packets,
circuits, ``completion_commit``, telemetry and idempotency rows. No record cap.

A record's ``body`` is built from the row alone, so the same rows give the same digest
in every checkout; ``ledger.apply`` turns a body back into rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ithaca.delivery.checkpoints import rows as checkpoints
from ithaca.delivery.ledger import canonical as ledger_json
from ithaca.delivery.ledger.format import Key, Record, record
from ithaca.delivery.records import baseline

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

# The kinds of registered files that belong to a change record: its own documents.
# Decision files travel with their decision records; artifacts are checkout evidence.
CHANGE_DOCUMENT_KINDS = ("intent", "diagnosis", "plan", "archive")
CHECKPOINT_COLUMNS = checkpoints.COLUMNS  # the column order ``checkpoints.verified`` reads
CHECKPOINT_BODY = tuple(name for name in CHECKPOINT_COLUMNS if name != "status")


@dataclass(frozen=True)
class Ours:
    """The projected records, and the tasks a session runs here (frozen to imports)."""

    records: dict[Key, Record]
    running: frozenset[Key]


def project(conn: sqlite3.Connection) -> Ours:
    """Every portable record, read from one snapshot the caller holds."""
    records: dict[Key, Record] = {}
    for found in (
        *_baseline(conn),
        *_changes(conn),
        *_decisions(conn),
        *_checkpoints(conn),
    ):
        records[found.key] = found
    tasks, running = _tasks(conn)
    for found in tasks:
        records[found.key] = found
    return Ours(records, running)


def task_body(
    contract: dict[str, Any], status: str, published: str | None, outcome: Any
) -> dict[str, Any]:
    """A task's body: its contract, its status as published, its outcome if any. The
    ``contract`` dict itself becomes the body (each is freshly parsed from its row)."""
    body = contract
    body["status"] = (published or "pending") if status == "in_progress" else status
    if outcome is not None:
        body["outcome"] = outcome
    return body


def checkpoint_record_id(stage: str, scope_type: str, scope_id: str | None) -> str:
    return f"{stage}:{scope_type}:{scope_id or ''}"


def _tasks(conn: sqlite3.Connection) -> tuple[list[Record], frozenset[Key]]:
    found = []
    running = set()
    rows = conn.execute(
        "SELECT id, status, published_status, contract, outcome FROM delivery_tasks"
        " WHERE status != 'removed'"
    )
    reader = ledger_json.Reader()
    for task_id, status, published, contract, outcome in rows:
        reader.exact = True
        body = task_body(
            reader.load(contract),
            status,
            published,
            None if outcome is None else reader.load(outcome),
        )
        found.append(record("task", task_id, body, exact=reader.exact))
        if status == "in_progress":
            running.add(("task", task_id))
    return found, frozenset(running)


def _baseline(conn: sqlite3.Connection) -> list[Record]:
    accepted = baseline.accepted_baseline(conn)
    opened = baseline.open_baseline(conn)
    if accepted is None and opened is None:
        return []
    body = {
        "accepted": None if accepted is None else baseline.view(accepted),
        "open": None if opened is None else baseline.view(opened),
    }
    return [record("baseline", "baseline", body)]


def _changes(conn: sqlite3.Connection) -> list[Record]:
    documents: dict[str, list[dict[str, str]]] = {}
    marks = ", ".join("?" * len(CHANGE_DOCUMENT_KINDS))
    for change_id, path, digest, kind in conn.execute(
        f"SELECT scope_id, path, digest, kind FROM delivery_files WHERE scope_type = 'change'"
        f" AND kind IN ({marks}) ORDER BY path",
        CHANGE_DOCUMENT_KINDS,
    ):
        documents.setdefault(change_id, []).append({"path": path, "digest": digest, "kind": kind})
    found = []
    for row in conn.execute(
        "SELECT id, kind, status, title, contract, classification, research_disposition,"
        " diagnosis, debug_session_id, path, revision, cancel_reason FROM delivery_changes"
    ):
        change_id = row[0]
        body: dict[str, Any] = {
            "id": change_id,
            "kind": row[1],
            "status": row[2],
            "title": row[3],
            "contract": json.loads(row[4]),
            "classification": json.loads(row[5]),
            "path": row[9],
            "revision": row[10],
            "files": documents.get(change_id, []),
        }
        optional = {
            "research_disposition": row[6],
            "diagnosis": None if row[7] is None else json.loads(row[7]),
            "debug_session_id": row[8],
            "cancel_reason": row[11],
        }
        body.update({name: value for name, value in optional.items() if value is not None})
        found.append(record("change", change_id, body))
    return found


def _decisions(conn: sqlite3.Connection) -> list[Record]:
    found = []
    for row in conn.execute(
        "SELECT id, scope_type, scope_id, path, digest, status, supersedes_id, question"
        " FROM delivery_decisions"
    ):
        body = {
            "id": row[0],
            "scope": {"type": row[1], "id": row[2]},
            "path": row[3],
            "digest": row[4],
            "status": row[5],
            "supersedes": row[6],
            "question": row[7],
        }
        found.append(record("decision", row[0], body))
    return found


def _checkpoints(conn: sqlite3.Connection) -> list[Record]:
    """Accepted checkpoints, each re-verified against its digest before it is shared."""
    found = []
    for values in conn.execute(
        f"SELECT {', '.join(CHECKPOINT_COLUMNS)} FROM delivery_checkpoints"
        " WHERE status = 'accepted'"
    ):
        row = checkpoints.verified(values)
        body = {name: row[name] for name in CHECKPOINT_BODY}
        record_id = checkpoint_record_id(row["stage"], row["scope_type"], row["scope_id"])
        found.append(record("checkpoint", record_id, body))
    return found
