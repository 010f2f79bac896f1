"""Ledger records back into rows: the write half of an import
(docs/delivery.md, "The team ledger: sync").

``ledger.projection`` makes a body from rows; this module is its inverse for the records
a merge takes from theirs, and keeps every local-only field as it is (``completion_commit``,
circuits, removal reasons, creation times). ``ithaca.delivery.ledger.intake`` first
checks the taken records on a read snapshot; ``apply_taken`` then writes all rows inside
the caller's one transaction, tasks in one batch, and registers the files that verified.

Removing a task marks it ``removed`` (rows of sessions and circuits keep pointing at it);
other removed records are deleted, or, for checkpoints, superseded. A checkpoint that
names a predecessor this checkout never saw gets that predecessor as a superseded row
known by id alone, so the chain holds without inventing its content.
"""

from __future__ import annotations

import sqlite3
from operator import itemgetter

from ithaca.delivery.ledger.format import LEDGER_PATH, Record, canonical_part, text_digest
from ithaca.delivery.ledger.intake import BASELINE_FIELDS, Prepared, checkpoint_values
from ithaca.delivery.ledger.projection import CHECKPOINT_COLUMNS
from ithaca.delivery.units import registry
from ithaca.kernel import canon, clock
from ithaca.kernel.errors import Corrupt

REMOVED_REASON = "removed in the team ledger"
_BASELINE_JSON = ("scope", "specs", "evidence", "gaps", "unknowns", "classification", "approval")


def apply_taken(conn: sqlite3.Connection, prepared: Prepared) -> None:
    """Write the taken records (inside the caller's transaction)."""
    by_type: dict[str, list[tuple[str, Record | None]]] = {}
    # In key order (the merge's already), so rows join each index at its end: a tenth faster.
    for (kind, name), found in sorted(prepared.taken.items(), key=itemgetter(0)):
        by_type.setdefault(kind, []).append((name, found))
    now = clock.now()
    try:
        for kind in ("baseline", "change", "decision", "checkpoint", "task"):
            if kind in by_type:
                _APPLY[kind](conn, by_type[kind], now)
        for path, digest, kind, scope_type, scope_id in prepared.registrations:
            registry.register(conn, path, digest, kind, scope_type, scope_id)
    except sqlite3.IntegrityError as exc:
        raise _unfit(f"a record does not fit this project's state: {exc}") from exc
    dangling = conn.execute("PRAGMA foreign_key_check").fetchall()
    if dangling:
        table, _rowid, parent, _ = dangling[0]
        raise _unfit(f"a {table} row names a {parent} row the ledger does not hold")


def _unfit(message: str) -> Corrupt:
    return Corrupt("LEDGER_UNPARSEABLE", f"{LEDGER_PATH}: {message}", {"path": LEDGER_PATH})


# --- rows ---------------------------------------------------------------------------------

# Task rows go in many to an INSERT: ``delivery_tasks``' CHECK constraints test
# ``status IN (...)`` lists, and SQLite builds a lookup table for such a list once per
# statement run, so 10,000 one-row runs spent more time there than on the rows. 99 rows
# of 10 parameters stay within the 999 parameters any SQLite build accepts.
_ROWS_PER_INSERT = 99
_TASK_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)"
_TASK_UPSERT = (
    "INSERT INTO delivery_tasks (id, change_id, parent_id, status, published_status,"
    " contract, contract_digest, outcome, revision, created_at, updated_at)"
    " VALUES {} ON CONFLICT (id) DO UPDATE SET"
    " change_id = excluded.change_id, parent_id = excluded.parent_id,"
    " status = excluded.status, published_status = excluded.published_status,"
    " revision = delivery_tasks.revision"
    " + (delivery_tasks.contract_digest != excluded.contract_digest),"
    " contract = excluded.contract, contract_digest = excluded.contract_digest,"
    " outcome = excluded.outcome, updated_at = excluded.updated_at"
)


def _apply_tasks(
    conn: sqlite3.Connection, items: list[tuple[str, Record | None]], now: str
) -> None:
    upserts = []
    removals = []
    for name, found in items:
        if found is None:
            removals.append((REMOVED_REASON, now, name))
            continue
        body = found.body
        status = body["status"]
        contract_text = _contract_text(found)
        outcome = body.get("outcome")
        upserts.append(
            (
                name,
                body.get("change_id"),
                body.get("parent_id"),
                status,
                status,
                contract_text,
                text_digest(contract_text),
                None if outcome is None else canonical_part(found, outcome),
                now,
                now,
            )
        )
    for start in range(0, len(upserts), _ROWS_PER_INSERT):
        chunk = upserts[start : start + _ROWS_PER_INSERT]
        marks = ", ".join([_TASK_ROW] * len(chunk))
        conn.execute(_TASK_UPSERT.format(marks), [value for row in chunk for value in row])
    conn.executemany(
        "UPDATE delivery_tasks SET status = 'removed', removed_reason = ?, updated_at = ?"
        " WHERE id = ? AND status != 'removed'",
        removals,
    )


def _contract_text(found: Record) -> str:
    """A task body's canonical text without its status and outcome: the contract's.

    Cut from the body's own canonical text when each member's text occurs once (a
    member's unescaped quotes cannot occur inside a string, and the top-level member is
    there, so a single occurrence is it); encoded afresh otherwise."""
    text = found.text
    members = [f'"status":"{found.body["status"]}"']  # a published status: plain ASCII
    if "outcome" in found.body:
        members.append('"outcome":' + canonical_part(found, found.body["outcome"]))
    for member in members:
        at = text.find(member)
        if at < 0 or text.find(member, at + 1) >= 0:
            contract = {k: v for k, v in found.body.items() if k not in ("status", "outcome")}
            return canonical_part(found, contract)
        end = at + len(member)
        if text[at - 1] == ",":
            at -= 1
        elif text[end] == ",":
            end += 1
        text = text[:at] + text[end:]
    return text


def _apply_changes(
    conn: sqlite3.Connection, items: list[tuple[str, Record | None]], now: str
) -> None:
    for name, found in items:
        if found is None:
            conn.execute("DELETE FROM delivery_changes WHERE id = ?", (name,))
            continue
        body = found.body
        conn.execute(
            "INSERT INTO delivery_changes (id, kind, status, title, contract, classification,"
            " research_disposition, diagnosis, debug_session_id, path, revision, cancel_reason,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, status = excluded.status,"
            " title = excluded.title, contract = excluded.contract,"
            " classification = excluded.classification,"
            " research_disposition = excluded.research_disposition,"
            " diagnosis = excluded.diagnosis, debug_session_id = excluded.debug_session_id,"
            " path = excluded.path, revision = excluded.revision,"
            " cancel_reason = excluded.cancel_reason, updated_at = excluded.updated_at",
            (
                name,
                body["kind"],
                body["status"],
                body["title"],
                canon.canonical_text(body["contract"]),
                canon.canonical_text(body["classification"]),
                body.get("research_disposition"),
                None if body.get("diagnosis") is None else canon.canonical_text(body["diagnosis"]),
                body.get("debug_session_id"),
                body["path"],
                body["revision"],
                body.get("cancel_reason"),
                now,
                now,
            ),
        )


def _apply_decisions(
    conn: sqlite3.Connection, items: list[tuple[str, Record | None]], now: str
) -> None:
    for name, found in items:
        if found is None:
            conn.execute("DELETE FROM delivery_decisions WHERE id = ?", (name,))
            continue
        body = found.body
        conn.execute(
            "INSERT INTO delivery_decisions (id, scope_type, scope_id, path, digest, status,"
            " supersedes_id, question, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET scope_type = excluded.scope_type,"
            " scope_id = excluded.scope_id, path = excluded.path, digest = excluded.digest,"
            " status = excluded.status, supersedes_id = excluded.supersedes_id,"
            " question = excluded.question",
            (
                name,
                body["scope"]["type"],
                body["scope"].get("id"),
                body["path"],
                body["digest"],
                body["status"],
                body.get("supersedes"),
                body["question"],
                now,
            ),
        )


def _apply_checkpoints(
    conn: sqlite3.Connection, items: list[tuple[str, Record | None]], now: str
) -> None:
    for name, found in items:
        where = tuple(name.split(":", 2))
        current = conn.execute(
            "SELECT id FROM delivery_checkpoints WHERE stage = ? AND scope_type = ?"
            " AND ifnull(scope_id, '') = ? AND status = 'accepted'",
            where,
        ).fetchone()
        new_id = None if found is None else found.body["id"]
        if current is not None and current[0] != new_id:
            conn.execute(
                "UPDATE delivery_checkpoints SET status = 'superseded', updated_at = ?"
                " WHERE id = ?",
                (now, current[0]),
            )
        if found is None:
            continue
        body = found.body
        if body["supersedes_id"] is not None:
            conn.execute(
                "INSERT OR IGNORE INTO delivery_checkpoints (id, stage, scope_type, scope_id,"
                " revision, status, payload, evidence, diagnostics, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, 'superseded', '{}', '[]', '[]', ?, ?)",
                (
                    body["supersedes_id"],
                    body["stage"],
                    body["scope_type"],
                    body["scope_id"],
                    max(body["revision"] - 1, 1),
                    now,
                    now,
                ),
            )
        conn.execute("DELETE FROM delivery_checkpoints WHERE id = ?", (new_id,))
        conn.execute(
            f"INSERT INTO delivery_checkpoints ({', '.join(CHECKPOINT_COLUMNS)}, created_at,"
            f" updated_at) VALUES ({', '.join('?' * (len(CHECKPOINT_COLUMNS) + 2))})",
            (*checkpoint_values(body), now, now),
        )


def _apply_baseline(
    conn: sqlite3.Connection, items: list[tuple[str, Record | None]], now: str
) -> None:
    """The accepted and the open baseline become theirs; rows they replace are
    superseded (history stays), never deleted."""
    for _name, found in items:
        keep = (
            [] if found is None else [row["id"] for row in found.body.values() if row is not None]
        )
        marks = ", ".join("?" * len(keep)) or "NULL"
        conn.execute(
            "UPDATE delivery_baselines SET status = 'superseded', updated_at = ?"
            f" WHERE status IN ('accepted', 'draft', 'adopting') AND id NOT IN ({marks})",
            (now, *keep),
        )
        if found is None:
            continue
        for row in (found.body["accepted"], found.body["open"]):
            if row is None:
                continue
            values = [
                canon.canonical_text(row[name])
                if name in _BASELINE_JSON and row[name] is not None
                else row[name]
                for name in BASELINE_FIELDS
            ]
            conn.execute(
                f"INSERT INTO delivery_baselines ({', '.join(BASELINE_FIELDS)}, created_at,"
                f" updated_at) VALUES ({', '.join('?' * (len(BASELINE_FIELDS) + 2))})"
                " ON CONFLICT (id) DO UPDATE SET "
                + ", ".join(f"{name} = excluded.{name}" for name in BASELINE_FIELDS[1:])
                + ", updated_at = excluded.updated_at",
                (*values, now, now),
            )


_APPLY = {
    "task": _apply_tasks,
    "change": _apply_changes,
    "decision": _apply_decisions,
    "checkpoint": _apply_checkpoints,
    "baseline": _apply_baseline,
}
