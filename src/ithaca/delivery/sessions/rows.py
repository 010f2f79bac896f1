"""Reading and writing session, packet and circuit rows, and the write allowances a
session holds.

Every session service (admission, acquire, heartbeat, close, task outcomes, run-plan)
reads rows through here, so a row always means the same thing. A running session allows
its agent two places (DESIGN, kernel contract 3): its worktree and its output folder,
both in the work folder ``.ithaca-work/`` (a session from before the work folder: its
worktree and its output file under ``.ithaca/.runtime/``, which the kernel guard would
otherwise deny). The allowances are rows of the kernel's ``write_allowances`` owned by
``delivery:<sid>``, written and removed in the same transaction as the session's
status; they count only for a hook call the session acts for (``ithaca.delivery.gate``).
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery import rows
from ithaca.kernel import allowances, clock, journal
from ithaca.kernel.errors import Conflict, NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

CIRCUIT_THRESHOLD = 3
COLUMNS = (
    "id",
    "task_id",
    "status",
    "runtime",
    "host_session_id",
    "owner_pid",
    "owner_start",
    "plan_run_id",
    "worktree_path",
    "branch",
    "base_head",
    "packet_id",
    "lease_epoch",
    "lease_ttl_s",
    "lease_expires_at",
    "heartbeat_at",
    "taken_over_from",
    "close_reason",
)
PACKET_COLUMNS = (
    "id",
    "digest",
    "session_id",
    "task_id",
    "status",
    "output_path",
    "contract_digest",
    "envelope_digest",
)
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM delivery_sessions"


def find(conn: sqlite3.Connection, session_id: str) -> Row | None:
    return rows.loaded(
        conn.execute(f"{_SELECT} WHERE id = ?", (session_id,)).fetchone(), COLUMNS, ()
    )


def load(conn: sqlite3.Connection, session_id: str) -> Row:
    found = find(conn, session_id)
    if found is None:
        raise NotFound(
            "SESSION_NOT_FOUND", f"no execution session {session_id}", {"session_id": session_id}
        )
    return found


def running_for_task(conn: sqlite3.Connection, task_id: str) -> Row | None:
    row = conn.execute(f"{_SELECT} WHERE task_id = ? AND status = 'running'", (task_id,))
    return rows.loaded(row.fetchone(), COLUMNS, ())


def insert(conn: sqlite3.Connection, row: Row) -> None:
    now = clock.now()
    conn.execute(
        f"INSERT INTO delivery_sessions ({', '.join(COLUMNS)}, created_at, updated_at)"
        f" VALUES ({', '.join('?' * (len(COLUMNS) + 2))})",
        (*rows.stored(row, COLUMNS, ()), now, now),
    )


def unchanged_since(conn: sqlite3.Connection, row: Row) -> bool:
    """Whether the session is still running at the lease epoch ``row`` was read at."""
    current = find(conn, row["id"])
    return (
        current is not None
        and current["status"] == "running"
        and current["lease_epoch"] == row["lease_epoch"]
    )


def end(conn: sqlite3.Connection, row: Row, status: str, reason: str) -> None:
    """Close a running session: status, reason, its assigned packet and allowances."""
    now = clock.now()
    conn.execute(
        "UPDATE delivery_sessions SET status = ?, close_reason = ?, closed_at = ?,"
        " updated_at = ? WHERE id = ? AND status = 'running'",
        (status, reason, now, now, row["id"]),
    )
    packet_status = "consumed" if status == "completed" else "abandoned"
    conn.execute(
        "UPDATE delivery_packets SET status = ?, updated_at = ?"
        " WHERE session_id = ? AND status = 'assigned'",
        (packet_status, now, row["id"]),
    )
    revoke_writes(conn, row["id"])


def view(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "task_id": row["task_id"],
        "status": row["status"],
        "runtime": row["runtime"],
        "host_session_id": row["host_session_id"],
        "plan_run_id": row["plan_run_id"],
        "worktree": row["worktree_path"],
        "branch": row["branch"],
        "base_head": row["base_head"],
        "packet_id": row["packet_id"],
        "lease_epoch": row["lease_epoch"],
        "lease_expires_at": row["lease_expires_at"],
        "heartbeat_at": row["heartbeat_at"],
    }


def lease_lost(row: Row) -> Conflict:
    """The error an old owner's write gets once its session is no longer running."""
    return Conflict(
        "LEASE_LOST",
        f"session {row['id']} is {row['status']}; it no longer holds task {row['task_id']}"
        " (ask `session admission` what to do)",
        {"session_id": row["id"], "status": row["status"], "task_id": row["task_id"]},
    )


# --- packets ---------------------------------------------------------------------------


def packet(conn: sqlite3.Connection, packet_id: str | None) -> Row | None:
    if packet_id is None:
        return None
    found = conn.execute(
        f"SELECT {', '.join(PACKET_COLUMNS)} FROM delivery_packets WHERE id = ?", (packet_id,)
    ).fetchone()
    return rows.loaded(found, PACKET_COLUMNS, ())


def assign_packet(conn: sqlite3.Connection, packet: dict[str, Any], task_id: str) -> None:
    """Store ``packet`` as its session's assigned packet (a packet seen before, abandoned
    by a contract change that was later reverted, is assigned again)."""
    now = clock.now()
    conn.execute(
        "INSERT INTO delivery_packets (id, digest, session_id, task_id, status, output_path,"
        " contract_digest, envelope_digest, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, 'assigned', ?, ?, ?, ?, ?)"
        " ON CONFLICT (digest) DO UPDATE SET status = 'assigned', updated_at = excluded.updated_at",
        (
            packet["id"],
            packet["digest"],
            packet["session_id"],
            task_id,
            packet["output"]["path"],
            packet["task"]["contract_digest"],
            packet["context_envelope"]["digest"],
            now,
            now,
        ),
    )


# --- write allowances ------------------------------------------------------------------


def allow_writes(conn: sqlite3.Connection, session_id: str, paths: list[str]) -> None:
    allowances.grant(conn, owner(session_id), paths, clock.now())


def revoke_writes(conn: sqlite3.Connection, session_id: str) -> None:
    allowances.revoke(conn, owner(session_id))


def owner(session_id: str) -> str:
    return f"delivery:{session_id}"


# --- the circuit breaker ---------------------------------------------------------------


def circuit(conn: sqlite3.Connection, task_id: str) -> dict[str, Any]:
    found = conn.execute(
        "SELECT consecutive_failures, open FROM delivery_circuits WHERE task_id = ?", (task_id,)
    ).fetchone()
    if found is None:
        return {"consecutive_failures": 0, "open": False}
    return {"consecutive_failures": found[0], "open": bool(found[1])}


def count_failure(conn: sqlite3.Connection, task_id: str, actor: str) -> int | None:
    """One more consecutive failure; opens the circuit at the threshold. Returns the
    journal seq when it opened."""
    failures = circuit(conn, task_id)["consecutive_failures"] + 1
    opened = failures >= CIRCUIT_THRESHOLD
    conn.execute(
        "INSERT INTO delivery_circuits (task_id, consecutive_failures, open, updated_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (task_id) DO UPDATE SET"
        " consecutive_failures = excluded.consecutive_failures, open = excluded.open,"
        " updated_at = excluded.updated_at",
        (task_id, failures, int(opened), clock.now()),
    )
    if not opened:
        return None
    return journal.append(
        conn,
        actor=actor,
        kind="delivery.circuit_opened",
        subject=task_id,
        payload={"task_id": task_id, "consecutive_failures": failures},
    )


def reset_circuit(conn: sqlite3.Connection, task_id: str) -> bool:
    """Close the circuit and clear the count; whether there was anything to reset."""
    return bool(
        conn.execute(
            "UPDATE delivery_circuits SET consecutive_failures = 0, open = 0, updated_at = ?"
            " WHERE task_id = ? AND (consecutive_failures > 0 OR open = 1)",
            (clock.now(), task_id),
        ).rowcount
    )
