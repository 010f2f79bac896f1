"""The ``ulysses`` and ``knowledge`` MCP tools' published schemas and descriptions.

Each tool takes an ``operation`` and that operation's fields and hands the raw arguments to
its service's ``dispatch``, which checks them strictly (unknown fields, wrong types,
limits) and answers with coded errors. The schemas describe every field an operation may
take, so a client can show them. Operation and field names are the seed's, so its skill
text works unchanged.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import ANY_JSON, SESSION_PROPERTY, ToolSpec

_TEXT = {"type": "string"}
_TEXT_LIST = {"type": "array", "items": {"type": "string"}}
_CELL_REF = {
    "type": "object",
    "properties": {"notebookId": _TEXT, "cellId": _TEXT},
    "required": ["notebookId", "cellId"],
    "additionalProperties": False,
}

ULYSSES_DESCRIPTION = (
    "Ulysses: surprise-gated debugging where a validator, not you, decides each outcome. "
    "init {problem, constraints?} opens a session (and returns related lessons). "
    "plan {primary, recovery, irreversible?, primaryValidator: {notebookId, cellId}, "
    "recoveryValidator: {...}} records the next step with both validators frozen; do not "
    "act before it is recorded. outcome {observed, details?} runs the bound validator on "
    "what you observed: pass returns to S=0 with a checkpoint, a failed primary moves to "
    "the recovery step, a failed recovery forbids both moves and requires reflect. "
    "reflect {hypothesis, falsification} records a falsifiable hypothesis (required at S=2 "
    "with no active step; mutating tools are blocked until then). bind_final_validator "
    "{notebookId, cellId, observed?} pins the cell that gates complete(resolved), once and "
    "before the first outcome; it must fail on the problem as it stands (a probe cell "
    "measures it, a judge cell is run on observed). note {thought, "
    "kind?, data?} adds to the trace. status and resume {session_id?} read the state; "
    "treat their answer as the only truth. complete {terminalState: resolved | "
    "insufficient_information | environment_compromised, summary, observed (resolved), "
    "missing (insufficient_information)} ends the session and records a lesson."
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
        "problem": {"type": "string", "description": "What is wrong (init)."},
        "constraints": {**_TEXT_LIST, "description": "Limits the work must respect (init)."},
        "supersede": {"type": "boolean", "description": "Replace the active session (init)."},
        "primary": {"type": "string", "description": "The step you will take (plan)."},
        "recovery": {"type": "string", "description": "What you do if it fails (plan)."},
        "irreversible": {"type": "boolean", "description": "The step cannot be undone (plan)."},
        "primaryValidator": _CELL_REF,
        "recoveryValidator": _CELL_REF,
        "observed": {
            **ANY_JSON,
            "description": "What you observed (outcome, complete), or the problem as it"
            " stands (bind_final_validator).",
        },
        "details": {"type": "string", "description": "Notes on what happened (outcome)."},
        "notebookId": _TEXT,
        "cellId": _TEXT,
        "hypothesis": {"type": "string", "description": "A falsifiable hypothesis (reflect)."},
        "falsification": {"type": "string", "description": "What would disprove it (reflect)."},
        "thought": {"type": "string", "description": "The note (note)."},
        "kind": {
            "type": "string",
            "enum": ["context", "observation", "evidence", "decision", "question"],
        },
        "data": {**ANY_JSON, "description": "Data attached to the note (note)."},
        "session_id": {"type": "string", "description": "The session to resume (resume)."},
        "terminalState": {
            "type": "string",
            "enum": ["resolved", "insufficient_information", "environment_compromised"],
        },
        "summary": {"type": "string", "description": "The transferable lesson (complete)."},
        "missing": {**_TEXT_LIST, "description": "What information is missing (complete)."},
        "session": SESSION_PROPERTY,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

KNOWLEDGE_DESCRIPTION = (
    "Lessons earlier debugging sessions left behind. operation=search {query, limit?} "
    "finds lessons by words (1–20 results, default 5); operation=get {id} returns one "
    "lesson's record and Markdown. Search before planning a fix for a problem that looks "
    "familiar."
)

KNOWLEDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": ["search", "get"]},
        "query": {"type": "string", "description": "Words to look for (search)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        "id": {"type": "string", "description": "The lesson id (get)."},
        "session": SESSION_PROPERTY,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

# (tool, IthacaProject service attribute, title, description, schema)
TOOLS = (
    ToolSpec(
        "ulysses",
        "Ulysses debugging protocol",
        ULYSSES_DESCRIPTION,
        ULYSSES_SCHEMA,
        read_only=False,
        service="ulysses",
        method="dispatch",
    ),
    ToolSpec(
        "knowledge",
        "Lessons from earlier debugging",
        KNOWLEDGE_DESCRIPTION,
        KNOWLEDGE_SCHEMA,
        read_only=True,
        service="knowledge",
        method="dispatch",
    ),
)
