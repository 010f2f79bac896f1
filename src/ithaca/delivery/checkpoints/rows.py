"""The rows of ``delivery_checkpoints``: read with their digest verified, written by id.

Each row's ``digest`` covers everything it claims and is re-verified whenever a row is
read, so a row edited behind Ithaca's back is ``CHECKPOINT_DIGEST_MISMATCH``; its id is
``cp-`` and the first 16 hex digits of that digest. Writes happen inside a unit's T2 and
first check that the row they replace is still the one the plan was prepared on.
"""

from __future__ import annotations

import json
from typing import Any

from ithaca.delivery.units.plans import Stale
from ithaca.kernel import canon, clock
from ithaca.kernel.errors import Corrupt

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

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
    if row["digest"] is None or row_digest(row) != row["digest"]:
        raise Corrupt(
            "CHECKPOINT_DIGEST_MISMATCH",
            f"checkpoint {row['id']} no longer matches its digest; it was changed outside"
            " Ithaca: run `ithaca doctor`",
            {"id": row["id"], "expected": row["digest"], "actual": row_digest(row)},
        )
    return row


def view(row: Row) -> dict[str, Any]:
    """A row as the tool's answer shows it."""
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


def row_digest(row: Row) -> str:
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


def require_current(tx: sqlite3.Connection, like: Row, status: str, expected: Row | None) -> None:
    """``Stale`` unless the (stage, scope) row in ``status`` is still the one prepared on."""
    found = tx.execute(
        "SELECT id, digest FROM delivery_checkpoints WHERE stage = ? AND scope_type = ?"
        " AND ifnull(scope_id, '') = ? AND status = ?",
        (like["stage"], like["scope_type"], like["scope_id"] or "", status),
    ).fetchone()
    want = None if expected is None else (expected["id"], expected["digest"])
    if (None if found is None else tuple(found)) != want:
        raise Stale(f"{like['stage']} checkpoint")


def write(tx: sqlite3.Connection, row: Row, replacing: str | None) -> None:
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


def drop_draft(tx: sqlite3.Connection, current: Row, reason: str) -> None:
    """Mark the draft ``current`` abandoned; ``Stale`` (``reason``) if it changed meanwhile."""
    moved = tx.execute(
        "UPDATE delivery_checkpoints SET status = 'abandoned', updated_at = ?"
        " WHERE id = ? AND status = 'draft' AND digest = ?",
        (clock.now(), current["id"], current["digest"]),
    ).rowcount
    if not moved:
        raise Stale(reason)
