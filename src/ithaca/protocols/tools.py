"""The ``load_protocols`` and ``protocols`` MCP tools' published schemas and descriptions.

``load_protocols`` hands its arguments to ``ProtocolsService.load_protocols``; the
read-only ``protocols`` tool to ``ProtocolsService.read`` (``ithaca.protocols.reading``),
which checks which fields each operation takes. Creating, changing or removing protocols
is the user's, in a terminal, so no tool offers it.

The load schema publishes ``eventId`` alone: selectors come from the admitted event. The
service still accepts the seed's selector arguments (``connector``, ``workflow``, …) so
its skill texts keep working, and reports their values ignored
(``SELECTOR_ARGUMENT_IGNORED``); listing them would only invite an agent to send them.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import (
    ARRAY,
    STRING,
    ToolSpec,
    result_schema,
)

LOAD_PROTOCOLS_DESCRIPTION = (
    "Call first, with the eventId the prompt's context names (\"Ithaca admitted this "
    'prompt as event evt_…"), and follow every rule of the returned bundle for the whole '
    "turn; it lets your mutating tools run. If it fails, stop and report the code. Pass "
    "the same id when you delegate."
)

LOAD_PROTOCOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "eventId": STRING,
    },
    "required": ["eventId"],
    "additionalProperties": False,
}

LOAD_PROTOCOLS_OUTPUT = result_schema(protocols=ARRAY)

PROTOCOLS_DESCRIPTION = (
    "Read this project's protocols: list {scope?, source?, enabled?, tag?}, get {id}, "
    "explain {eventId} (what matched and why). Only the user changes them."
)

PROTOCOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": ["list", "get", "explain"]},
        "id": STRING,
        "eventId": STRING,
        "scope": {"type": "string", "enum": ["base", "user"]},
        "source": {"type": "string", "enum": ["seed", "sqlite", "file"]},
        "enabled": {"type": "boolean"},
        "tag": STRING,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

# list: protocols; get: the record (id, rules, …); explain: eventId, records, load, …
PROTOCOLS_OUTPUT = result_schema(protocols=ARRAY, id=STRING)

TOOLS = (
    ToolSpec(
        "load_protocols",
        "Load this turn's protocols",
        LOAD_PROTOCOLS_DESCRIPTION,
        LOAD_PROTOCOLS_SCHEMA,
        LOAD_PROTOCOLS_OUTPUT,
        # Each load is journaled (protocols.bundle_loaded): a repeat adds an event.
        read_only=False,
        destructive=False,
        idempotent=False,
        service="protocols",
        method="load_protocols",
        takes_session=True,
    ),
    ToolSpec(
        "protocols",
        "Read protocols",
        PROTOCOLS_DESCRIPTION,
        PROTOCOLS_SCHEMA,
        PROTOCOLS_OUTPUT,
        read_only=True,
        destructive=False,
        idempotent=True,
        service="protocols",
        method="read",
        takes_session=True,
    ),
)
