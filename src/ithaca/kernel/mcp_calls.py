"""Call tickets: how Ithaca's MCP server learns which host session is calling, and that the
hooks saw the call.

An MCP server cannot tell its callers apart, and the agent may not name its own session.
So the PreToolUse hook, which the host hands the session id, leaves a ticket for each of
Ithaca's own MCP calls it lets through: the host's tool-use id where the host gives one,
the tool, a digest of the arguments and the session. The server claims the ticket when
the call arrives: by the tool-use id the host puts in the request's ``_meta`` (Claude
Code's ``claudecode/toolUseId``, Codex's ``callId``), else by tool and argument digest.
The hook never rewrites the call and never answers ``allow`` for it, so the user's own
permission rules still decide whether the call runs at all.

A call from a host that arrives without a ticket means the hooks are not running (not
installed, not trusted, or broken): the server refuses it with ``HOOKS_NOT_RUNNING``
rather than act for a session it cannot verify.

Light on purpose: the hook path imports it.
"""

from __future__ import annotations

from ithaca.kernel import canon, clock, ids

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

# How long a ticket waits for its call: a permission prompt may stand between the hook and
# the call, so this is generous; an unclaimed ticket is no use to anyone after it.
TICKET_TTL_S = 3600
# The ``_meta`` keys hosts put a call's tool-use id under.
TOOL_USE_META_KEYS = ("claudecode/toolUseId", "callId")
# The journal event of an MCP call that no hook saw (the server refuses it).
UNHOOKED_EVENT = "mcp.call_unhooked"
SCHEMA = """
CREATE TABLE mcp_call_tickets (
  ticket TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  host_session_id TEXT NOT NULL,
  agent_id TEXT,
  tool TEXT NOT NULL,
  arguments_digest TEXT NOT NULL,
  created_at TEXT NOT NULL,
  claimed_at TEXT
);
CREATE INDEX mcp_call_tickets_digest ON mcp_call_tickets(tool, arguments_digest, created_at);
"""


def arguments_digest(arguments: dict[str, Any]) -> str:
    """The digest a ticket and its call are matched by: the arguments without ``session``
    (which the agent may leave out and the server fills in)."""
    return canon.digest({key: value for key, value in arguments.items() if key != "session"})


def issue(
    conn: sqlite3.Connection,
    *,
    host: str,
    session_id: str,
    agent_id: str | None,
    tool: str,
    arguments: dict[str, Any],
    tool_use_id: str | None,
    now: str,
) -> str:
    """Leave a ticket for one call (inside the hook's write transaction); its key."""
    ticket = tool_use_id if isinstance(tool_use_id, str) and tool_use_id else ids.new("tkt")
    prune(conn, now)
    conn.execute(
        "INSERT OR REPLACE INTO mcp_call_tickets (ticket, host, host_session_id, agent_id,"
        " tool, arguments_digest, created_at, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
        (ticket, host, session_id, agent_id, tool, arguments_digest(arguments), now),
    )
    return ticket


def claim(
    conn: sqlite3.Connection,
    *,
    tool: str,
    arguments: dict[str, Any],
    tool_use_id: str | None,
    now: str,
) -> tuple[str, str, str | None] | None:
    """Claim the ticket of a call once: ``(host, session id, agent id)``, or None.

    By tool-use id when the host sent one (the ticket must be for this tool and these
    arguments), else the oldest unclaimed ticket of this tool with these arguments.
    """
    digest = arguments_digest(arguments)
    if tool_use_id:
        rows = conn.execute(
            "SELECT ticket, host, host_session_id, agent_id, created_at FROM mcp_call_tickets"
            " WHERE ticket = ? AND tool = ? AND arguments_digest = ? AND claimed_at IS NULL",
            (tool_use_id, tool, digest),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT ticket, host, host_session_id, agent_id, created_at FROM mcp_call_tickets"
            " WHERE tool = ? AND arguments_digest = ? AND claimed_at IS NULL"
            " ORDER BY created_at, ticket",
            (tool, digest),
        ).fetchall()
    for ticket, host, session_id, agent_id, created_at in rows:
        if clock.epoch_s(now) - clock.epoch_s(created_at) > TICKET_TTL_S:
            continue
        conn.execute("UPDATE mcp_call_tickets SET claimed_at = ? WHERE ticket = ?", (now, ticket))
        return str(host), str(session_id), agent_id
    return None


def prune(conn: sqlite3.Connection, now: str) -> None:
    """Drop tickets claimed or expired (kept for a day, so a late call can be explained)."""
    cutoff = clock.format_ms(int((clock.epoch_s(now) - 86400) * 1000))
    conn.execute("DELETE FROM mcp_call_tickets WHERE created_at < ?", (cutoff,))


def unhooked_calls(conn: sqlite3.Connection) -> list[dict[str, str]]:
    """Per host, the latest MCP call no hook saw, if none of that host's hooks has run since
    (the server refuses such calls with HOOKS_NOT_RUNNING)."""
    latest = conn.execute(
        "SELECT json_extract(payload, '$.host'), max(at) FROM journal WHERE kind = ? GROUP BY 1",
        (UNHOOKED_EVENT,),
    ).fetchall()
    found = []
    for host, at in latest:
        seen = conn.execute(
            "SELECT max(last_seen_at) FROM host_sessions WHERE host = ?", (host,)
        ).fetchone()[0]
        if seen is None or seen < at:
            found.append({"host": str(host), "at": str(at)})
    return found


def tool_use_id_of(meta: Any) -> str | None:
    """The host's tool-use id from a ``tools/call`` request's ``_meta``, if it sent one."""
    if not isinstance(meta, dict):
        return None
    for key in TOOL_USE_META_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value:
            return value
    return None
