"""The MCP server entry Ithaca registers with a host: its name and the command it runs.

The name prefixes every tool the agent sees (``mcp__<name>__…``), so it is held to what a
tool name may contain. The command is an absolute path, found once at install time, so the
host starts the same Ithaca whatever ``PATH`` its sessions happen to have.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from ithaca.kernel.errors import invalid_field

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
    """``{"command", "args"}`` starting Ithaca's MCP server: the ``ithaca`` console script
    beside this interpreter (else on ``PATH``), else this interpreter with ``-m ithaca``."""
    script = _console_script("ithaca")
    if script is None:
        return {"command": os.path.abspath(sys.executable), "args": ["-m", "ithaca", "mcp"]}
    return {"command": script, "args": ["mcp"]}


def same_server(current: Any, entry: dict[str, Any]) -> bool:
    """Whether ``current`` starts the same server as ``entry`` (other keys are the user's)."""
    return (
        isinstance(current, dict)
        and current.get("command") == entry["command"]
        and current.get("args", []) == entry["args"]
    )


def _console_script(name: str) -> str | None:
    """The absolute path of an installed console script, preferring this interpreter's."""
    beside = Path(os.path.abspath(sys.executable)).with_name(name)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    import shutil  # imported here: shutil pulls in compression modules at import time

    found = shutil.which(name)
    return os.path.abspath(found) if found else None
