"""The ``ultragoal`` MCP tool's published schema and description (agent operations only).

The MCP server hands the raw arguments to ``UltragoalService.dispatch``, which checks
them per operation (``inputs``); this schema describes every field so a client can show
them. User-only levers and the hook's dispatch claim are deliberately absent: over MCP
they are refused with the command to present to the user.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import (
    ANY_JSON,
    ARRAY,
    INTEGER,
    OBJECT,
    STRING,
    ToolSpec,
    nullable,
    result_schema,
)
from ithaca.ultragoal.inputs import AGENT_OPERATIONS

ULTRAGOAL_TITLE = "Ultragoal objective pursuit"

ULTRAGOAL_DESCRIPTION = (
    "Pursue one falsifiable objective until evidence, not your word, says it is done (the "
    "ultragoal skill has each operation's fields). get returns {state}: start no other "
    "while state.active and not state.pristine. request_complete is the only way to "
    "complete. For the user's levers, present `ithaca ultragoal <command>`."
)

_TEXTS = {"type": "array", "items": STRING}

ULTRAGOAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": list(AGENT_OPERATIONS)},
        "phase": {"type": "string", "enum": ["planning", "pursuing"]},
        "outcome": STRING,
        "verification_surface": STRING,
        "constraints": STRING,
        "boundaries": STRING,
        "non_goals": STRING,
        "max_iterations": INTEGER,
        "max_wall_minutes": INTEGER,
        "blocked_stop": STRING,
        "plan_path": STRING,
        "resume_summary": STRING,
        "completion_evidence": _TEXTS,
        "codex_goal_objective": STRING,
        "stories": ARRAY,
        "single": {"type": "boolean"},
        "order": _TEXTS,
        "id": STRING,
        "story": OBJECT,
        "patch": {"type": "object"},
        "replacements": ARRAY,
        # Text for the story operations; paths for record_comment_resolution.
        "evidence": {"anyOf": [STRING, _TEXTS]},
        "rationale": STRING,
        "observed": ANY_JSON,
        "verdict": {"type": "string", "enum": ["APPROVE", "REQUEST_CHANGES", "COMMENT", "absent"]},
        "evidence_refs": _TEXTS,
        "verifier": STRING,
        "artifact_sha256": STRING,
        "codex_goal_json": {"anyOf": [OBJECT, STRING]},  # a get_goal snapshot
        "reason": STRING,
        "src": STRING,
        "nonce": STRING,
        "artifact": {"type": "object"},
    },
    "required": ["operation"],
    "additionalProperties": False,
}

# get: state (null before any pursuit); the pursuit's moves: session_id, phase and
# diagnostics; each operation adds its own fields.
ULTRAGOAL_OUTPUT = result_schema(state=nullable(OBJECT))

TOOLS = (
    ToolSpec(
        "ultragoal",
        ULTRAGOAL_TITLE,
        ULTRAGOAL_DESCRIPTION,
        ULTRAGOAL_SCHEMA,
        ULTRAGOAL_OUTPUT,
        # Every move is a journaled step of the pursuit; a retired story stays on record.
        read_only=False,
        destructive=False,
        idempotent=False,
        service="ultragoal",
        method="dispatch",
        takes_session=True,
    ),
)
