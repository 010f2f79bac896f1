"""Who is calling: the host session of one ``tools/call``, from the hook's call ticket.

The PreToolUse hook leaves a ticket for every Ithaca MCP call it lets through
(``ithaca.kernel.mcp_calls``); here the server claims it and fills ``session`` in for the
tools that take one. A call from a coding host that finds no ticket was never seen by the
hooks, so it is refused with ``HOOKS_NOT_RUNNING`` and journaled, which ``ithaca status``
reports. Clients that are not coding hosts (scripts, tests, the demo's own client) name
their session themselves, as the CLI does.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel import Refused, Store, clock, journal, mcp_calls

# MCP client names of the coding hosts Ithaca installs hooks into, and each host's name.
HOOKED_CLIENTS = {"claude-code": "claude", "codex-mcp-client": "codex"}
CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo"


def client_name(meta: Any, initialize_params: Any) -> str | None:
    """The calling client's name: from the request's ``_meta`` (the MCP revision that sends
    it with every request), else from the ``initialize`` handshake."""
    info = meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, dict) else None
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        return str(info["name"])
    found = getattr(getattr(initialize_params, "client_info", None), "name", None)
    return found if isinstance(found, str) else None


def bind_session(
    store: Store,
    tool: str,
    arguments: dict[str, Any],
    *,
    meta: Any,
    client: str | None,
    takes_session: bool,
) -> dict[str, Any]:
    """``arguments`` with the caller's session filled in (for tools that take one).

    Refuses ``HOOKS_NOT_RUNNING`` for a host's call no hook saw, and ``SESSION_MISMATCH``
    when the arguments name another session than the ticket's.
    """
    now = clock.now()
    tool_use_id = mcp_calls.tool_use_id_of(meta)
    with store.write() as conn:
        found = mcp_calls.claim(
            conn, tool=tool, arguments=arguments, tool_use_id=tool_use_id, now=now
        )
        host = HOOKED_CLIENTS.get(client or "")
        if found is None and host is not None:
            journal.append(
                conn,
                actor="system",
                kind=mcp_calls.UNHOOKED_EVENT,
                subject=tool,
                payload={"host": host, "client": client, "tool": tool},
                at=now,
            )
    if found is None:
        if host is not None:
            raise Refused("HOOKS_NOT_RUNNING", _unhooked_message(host), {"host": host})
        return arguments
    _, session_id, _ = found
    supplied = arguments.get("session")
    if supplied is not None and supplied != session_id:
        raise Refused(
            "SESSION_MISMATCH",
            f"this call names session {supplied!r} but runs in session {session_id!r}",
            {"session": session_id},
        )
    return {**arguments, "session": session_id} if takes_session else arguments


def _unhooked_message(host: str) -> str:
    fix = f"ask the user to run `ithaca install --doctor {host}` in a terminal"
    if host == "codex":
        fix += " and to trust the project and its hooks (`ithaca install codex` records both)"
    return (
        f"Ithaca refused this call on purpose: its {host} hooks did not see it, so nothing"
        " Ithaca enforces is running in this session and it cannot tell who is calling."
        f" Stop mutating work and {fix}."
    )
