"""Session leases: how long a session holds its task, and renewing that hold
(docs/delivery.md, "Execution: session and Worker Packets").

A running session holds its task until ``lease_expires_at``; a heartbeat moves that to at
least now + the session's TTL (default 30 minutes) and never backwards. The original lost
an interactive session's lease silently after 30 minutes because nothing renewed it:
here every tool use renews it through the PostToolUse and Stop hooks, at most once a
minute, and an explicit ``session heartbeat`` renews it from a worker or a runner.

An expired lease is not renewed: another caller may already have been told to take the
task over. The hook and the service share ``renew`` (one UPDATE whose conditions are the
rules), and this module imports only the kernel's light modules, because the hook runs it
on every tool call. Times are RFC 3339 UTC text with milliseconds, which compares as time;
``now_ms`` is the one clock every lease decision reads.
"""

from __future__ import annotations

import time

from ithaca.kernel.clock import format_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

DEFAULT_TTL_S = 1800
# A hook skips the heartbeat when the last one is younger than this.
HOOK_QUIET_S = 60
# Naming a session whose last heartbeat is older than this resumes it (admission rule 3).
STALE_HEARTBEAT_S = 120

# now + the row's TTL, in the stored format; SQLite reads the trailing "Z" as UTC.
_RENEWED = "strftime('%Y-%m-%dT%H:%M:%fZ', :now, '+' || lease_ttl_s || ' seconds')"
_RENEW = (
    "UPDATE delivery_sessions SET heartbeat_at = :now, updated_at = :now,"
    f" lease_expires_at = max(lease_expires_at, {_RENEWED})"
    " WHERE id = :id AND status = 'running' AND lease_expires_at > :now"
    " AND heartbeat_at <= :quiet_before"
)


def ttl_s(config: dict[str, Any]) -> int:
    """The lease TTL new sessions get: ``[delivery] lease_ttl_s`` (30 minutes by default)."""
    return int(config["delivery"]["lease_ttl_s"])


def now_ms() -> int:
    """Milliseconds since the epoch: the clock leases are judged by."""
    return time.time_ns() // 1_000_000


def stamp(epoch_ms: int, plus_s: float = 0) -> str:
    """The stored form of ``epoch_ms`` moved by ``plus_s`` seconds."""
    return format_ms(epoch_ms + int(plus_s * 1000))


def expired(lease_expires_at: str, at_ms: int) -> bool:
    return lease_expires_at <= stamp(at_ms)


def heartbeat_older_than(heartbeat_at: str, seconds: float, at_ms: int) -> bool:
    return heartbeat_at < stamp(at_ms, -seconds)


def renew(
    conn: sqlite3.Connection, session_id: str, at_ms: int, *, quiet_s: float = 0
) -> str | None:
    """Heartbeat a running session whose lease has not expired and whose last heartbeat
    is at least ``quiet_s`` old; returns the new expiry, None when nothing was renewed.
    The caller holds the write transaction."""
    now = stamp(at_ms)
    moved = conn.execute(
        _RENEW, {"now": now, "id": session_id, "quiet_before": stamp(at_ms, -quiet_s)}
    ).rowcount
    if not moved:
        return None
    row = conn.execute(
        "SELECT lease_expires_at FROM delivery_sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return str(row[0])
