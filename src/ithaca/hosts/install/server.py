"""The MCP server entry Ithaca registers with a host: its name and the command it runs.

The name prefixes every tool the agent sees (``mcp__<name>__…``), so it is held to what a
tool name may contain. The command is the ``ithaca`` on ``PATH``, never a path of this
machine: the entry is committed with the project and must work on a teammate's clone.
"""

from __future__ import annotations

import re
from typing import Any

from ithaca.kernel import invalid_field

SERVER_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_server_name(server_name: str) -> None:
    """Refuse a name that cannot prefix tool names."""
    if not SERVER_NAME_PATTERN.fullmatch(server_name):
        raise invalid_field(
            "/serverName",
            "INVALID_SERVER_NAME",
            f"server name {server_name!r} must be 1-64 letters, digits, '_' or '-'",
        )


def mcp_entry() -> dict[str, Any]:
    """``{"command", "args"}`` starting Ithaca's MCP server: the ``ithaca`` on ``PATH``, so
    the committed entry works on every machine that has Ithaca installed."""
    return {"command": "ithaca", "args": ["mcp"]}


def same_server(current: Any, entry: dict[str, Any]) -> bool:
    """Whether ``current`` starts the same server as ``entry`` (other keys are the user's)."""
    return (
        isinstance(current, dict)
        and current.get("command") == entry["command"]
        and current.get("args", []) == entry["args"]
    )
