"""The ``ulysses`` and ``knowledge`` MCP tools' published schemas and descriptions.

Each tool takes an ``operation`` and that operation's fields and hands the raw arguments to
its service's ``dispatch``, which checks them strictly (unknown fields, wrong types,
limits) and answers with coded errors. The schemas describe every field an operation may
take, so a client can show them. Operation and field names are the seed's, so its skill
text works unchanged.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import (
    ANY_JSON,
    ARRAY,
    OBJECT,
    STRING,
    ToolSpec,
    result_schema,
)

_TEXT_LIST = {"type": "array", "items": STRING}

ULYSSES_DESCRIPTION = (
    "Surprise-gated debugging: a validator, not you, decides each outcome (the ulysses "
    "skill has the method): init, plan before you act, outcome {observed}, reflect after "
    "a failed recovery, status and resume (the only truth), complete."
)

ULYSSES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {
            "type": "string",
            "enum": [
                "init",
                "plan",
                "outcome",
                "bind_final_validator",
                "reflect",
                "note",
                "status",
                "resume",
                "complete",
            ],
        },
        "problem": STRING,
        "constraints": _TEXT_LIST,
        "supersede": {"type": "boolean"},
        "primary": STRING,
        "recovery": STRING,
        "irreversible": {"type": "boolean"},
        "primaryValidator": OBJECT,
        "recoveryValidator": OBJECT,
        "observed": ANY_JSON,
        "details": STRING,
        "notebookId": STRING,
        "cellId": STRING,
        "hypothesis": STRING,
        "falsification": STRING,
        "thought": STRING,
        "kind": {
            "type": "string",
            "enum": ["context", "observation", "evidence", "decision", "question"],
        },
        "data": ANY_JSON,
        "session_id": STRING,
        "terminalState": {
            "type": "string",
            "enum": ["resolved", "insufficient_information", "environment_compromised"],
        },
        "summary": STRING,
        "missing": _TEXT_LIST,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

# Every answer names the session; most carry its state (S, phase, required_action).
ULYSSES_OUTPUT = result_schema(session_id=STRING, required_action=STRING)

KNOWLEDGE_DESCRIPTION = (
    "Lessons of earlier debugging sessions: search {query, limit?}, get {id}. Search "
    "before planning a fix for a problem that looks familiar."
)

KNOWLEDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": ["search", "get"]},
        "query": STRING,
        "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        "id": STRING,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

# search: results; get: id, record, markdown.
KNOWLEDGE_OUTPUT = result_schema(results=ARRAY)

TOOLS = (
    ToolSpec(
        "ulysses",
        "Ulysses debugging",
        ULYSSES_DESCRIPTION,
        ULYSSES_SCHEMA,
        ULYSSES_OUTPUT,
        # Every move is a journaled step of the state machine: nothing is taken back or
        # lost, and a repeated outcome is a second outcome.
        read_only=False,
        destructive=False,
        idempotent=False,
        service="ulysses",
        method="dispatch",
        takes_session=True,
    ),
    ToolSpec(
        "knowledge",
        "Debugging lessons",
        KNOWLEDGE_DESCRIPTION,
        KNOWLEDGE_SCHEMA,
        KNOWLEDGE_OUTPUT,
        read_only=True,
        destructive=False,
        idempotent=True,
        service="knowledge",
        method="dispatch",
        takes_session=True,
    ),
)
