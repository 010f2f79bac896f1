"""The host sessions Ithaca has seen: when each first and last called a hook, and ended.

Every hook call touches its session's row inside the dispatcher's write transaction, so
``ithaca status`` can tell a host whose hooks stopped running from one that is idle.
Standard library only (hook path).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


def not_ended(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """``(host session id, last seen)`` of every session not ended, most recent first."""
    rows = conn.execute(
        "SELECT host_session_id, last_seen_at FROM host_sessions WHERE ended_at IS NULL"
        " ORDER BY last_seen_at DESC, host_session_id"
    ).fetchall()
    return [(str(session_id), str(seen)) for session_id, seen in rows]


def touch(
    conn: sqlite3.Connection, host: str, session_id: str, now: str, *, ended: bool = False
) -> None:
    """Record that ``session_id`` of ``host`` called a hook at ``now`` (and ended, if so)."""
    conn.execute(
        "INSERT INTO host_sessions (host, host_session_id, first_seen_at, last_seen_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT(host, host_session_id) DO UPDATE SET"
        " last_seen_at = excluded.last_seen_at",
        (host, session_id, now, now),
    )
    if ended:
        conn.execute(
            "UPDATE host_sessions SET ended_at = ? WHERE host = ? AND host_session_id = ?",
            (now, host, session_id),
        )
