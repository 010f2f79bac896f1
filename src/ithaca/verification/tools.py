"""The ``verify`` MCP tool: the one way an agent gets a verification that counts.

The server hands the arguments to ``VerificationService.tool``. The tool runs nothing
the agent chose: the runner is the project's (``runners``), the environment Ithaca's.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import BOOLEAN, STRING, ToolSpec, result_schema

VERIFY_DESCRIPTION = (
    "Ithaca runs the project's tests itself, on the project as it is now (a run of the "
    "same content is reused). Call it after your last change, before you stop: a turn "
    "that changed the project ends verified only on such a run."
)

VERIFY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"fresh": BOOLEAN},
    "additionalProperties": False,
}

# status, counts, verifies_turn, problems (what keeps it from verifying the turn), …
VERIFY_OUTPUT = result_schema(status=STRING, verifies_turn=BOOLEAN)

TOOLS = (
    ToolSpec(
        "verify",
        "Verify the project (Ithaca runs its tests)",
        VERIFY_DESCRIPTION,
        VERIFY_SCHEMA,
        VERIFY_OUTPUT,
        # Each run is journaled (verify.run); a reuse changes nothing.
        read_only=False,
        destructive=False,
        idempotent=True,
        service="verification",
        method="tool",
        takes_session=True,
    ),
)
