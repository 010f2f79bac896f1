"""The ``load_protocols`` and ``protocols`` MCP tools' published schemas and descriptions.

``load_protocols`` hands its arguments to ``ProtocolsService.load_protocols``; the
read-only ``protocols`` tool to ``ProtocolsService.read`` (``ithaca.protocols.reading``),
which checks which fields each operation takes. Creating, changing or removing protocols
is the user's, in a terminal, so no tool offers it.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import SESSION_PROPERTY, ToolSpec
from ithaca.protocols.loading import SELECTOR_ARGUMENTS

LOAD_PROTOCOLS_DESCRIPTION = (
    "Load the protocols that bind this turn. Ithaca admits every user prompt as an event "
    'and says so in the prompt\'s context ("Ithaca admitted this prompt as event evt_…"). '
    'Call this tool first, before any other tool, with {"eventId": "<that id>"}, then '
    "follow every rule in the returned bundle for the whole turn. The bundle lists the "
    "protocols in priority order with their rules and the typed constraints Ithaca "
    "enforces on your tool calls; loading it is what lets your mutating tools run. If "
    "loading fails, stop and report the error code: never work without rules. When you "
    "delegate, pass the same event id so the worker loads the same bundle."
)

LOAD_PROTOCOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "eventId": {
            "type": "string",
            "description": "The id Ithaca gave this prompt (evt_ followed by 26 characters).",
        },
        "session": SESSION_PROPERTY,
        **{
            name: {
                "description": (
                    "Ignored: Ithaca selects protocols from the admitted event, never from "
                    "arguments. Accepted so older skill texts keep working, and reported in "
                    "the bundle's diagnostics."
                )
            }
            for name in sorted(SELECTOR_ARGUMENTS)
        },
    },
    "required": ["eventId"],
    "additionalProperties": False,
}

PROTOCOLS_DESCRIPTION = (
    "Read this project's protocols; nothing here changes them. operation=list returns "
    "{protocols: [...]} in priority order, optionally filtered by scope, source, enabled "
    "and tag. operation=get returns one protocol by id, with the constraints that take "
    "effect. operation=explain shows, for an event id, which protocols matched it and why "
    "the others did not, and what load_protocols would return. Creating, changing, "
    "enabling or removing protocols is for the user, in a terminal (ithaca protocols ...)."
)

PROTOCOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {
            "type": "string",
            "enum": ["list", "get", "explain"],
            "description": "What to read.",
        },
        "id": {"type": "string", "description": "The protocol id (get only)."},
        "eventId": {"type": "string", "description": "The event id to explain (explain only)."},
        "scope": {
            "type": "string",
            "enum": ["base", "user"],
            "description": "Only base or only user protocols (list only).",
        },
        "source": {
            "type": "string",
            "enum": ["seed", "sqlite", "file"],
            "description": "Only protocols from this source (list only).",
        },
        "enabled": {
            "type": "boolean",
            "description": "Only enabled (true) or disabled (false) protocols (list only).",
        },
        "tag": {"type": "string", "description": "Only protocols with this tag (list only)."},
        "session": SESSION_PROPERTY,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

TOOLS = (
    ToolSpec(
        "load_protocols",
        "Load this turn's protocols",
        LOAD_PROTOCOLS_DESCRIPTION,
        LOAD_PROTOCOLS_SCHEMA,
        read_only=False,
        service="protocols",
        method="load_protocols",
    ),
    ToolSpec(
        "protocols",
        "Read protocols",
        PROTOCOLS_DESCRIPTION,
        PROTOCOLS_SCHEMA,
        read_only=True,
        service="protocols",
        method="read",
    ),
)
