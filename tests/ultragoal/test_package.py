"""The package's shape: the MCP schema covers exactly the agent's operations, and the
modules hooks use stay light."""

from __future__ import annotations

import subprocess
import sys

from ithaca.ultragoal import authority, inputs
from ithaca.ultragoal.tool import ULTRAGOAL_DESCRIPTION, ULTRAGOAL_SCHEMA

HOOK_MODULES = (
    "ithaca.ultragoal",
    "ithaca.ultragoal.lifecycle",
    "ithaca.ultragoal.records",
    "ithaca.ultragoal.progress",
    "ithaca.ultragoal.reducer",
    "ithaca.ultragoal.contract",
    "ithaca.ultragoal.sessions",
    "ithaca.ultragoal.marker",
    "ithaca.ultragoal.hostcap",
    "ithaca.ultragoal.authority",
    "ithaca.ultragoal.prompts",
    "ithaca.ultragoal.stop_gate",
    "ithaca.ultragoal.session_hooks",
    "ithaca.ultragoal.tool_hooks",
)
HEAVY = ("pydantic", "mcp", "click", "rich", "ithaca.validators.runner", "json", "re")


def test_the_schema_lists_every_agent_operation_and_no_lever() -> None:
    operations = ULTRAGOAL_SCHEMA["properties"]["operation"]["enum"]
    assert set(operations) == set(inputs.AGENT_OPERATIONS)
    assert not set(operations) & (authority.USER_OPERATIONS | authority.HOOK_OPERATIONS)
    assert ULTRAGOAL_SCHEMA["additionalProperties"] is False
    assert "request_complete" in ULTRAGOAL_DESCRIPTION


def test_the_schema_describes_every_field_an_agent_operation_takes() -> None:
    described = set(ULTRAGOAL_SCHEMA["properties"])
    for operation in inputs.AGENT_OPERATIONS:
        assert set(inputs.OPERATIONS[operation]) <= described, operation


def test_hook_modules_import_only_the_standard_library_and_the_kernel() -> None:
    code = (
        "import sys\n"
        f"for name in {HOOK_MODULES!r}:\n"
        "    __import__(name)\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
