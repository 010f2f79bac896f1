"""Delivery's MCP tools: each is the ``DeliveryService`` method of the same name.

Each method checks its own request (``ithaca.delivery.contract``) against the schema of
the module that owns the request; tools/list carries its top level (``outline``: every
field typed, limits and nested fields checked server-side;
see docs/architecture.md, "The MCP surface"). The seven tool objects (titles, hints and
output schemas included) must fit in 6 KiB of tools/list, so the output schemas type only
each tool's main field and ``journal_seq`` (null when nothing was written).

The hints (``ithaca.kernel.tools``): every delivery mutation but ``session heartbeat``
and ``doctor repair`` carries an ``idempotency_key``, and the same key replays the first
answer with no new effect, so ``record``, ``checkpoint``, ``archive`` and ``sync`` are
idempotent. ``archive`` is the one destructive tool: an archived change is closed for
good (later writes into it are ``CHANGE_ARCHIVED``), and the baseline files it updates are
overwritten. Everything else adds a revision, a tombstone or a journaled transition;
``session close`` removes a worktree only when nothing in it would be lost, and ``doctor
repair`` takes a verified backup first.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.archive import ARCHIVE_DESCRIPTION, ARCHIVE_SCHEMA
from ithaca.delivery.checkpoints.request import CHECKPOINT_DESCRIPTION, CHECKPOINT_SCHEMA
from ithaca.delivery.context.tool import CONTEXT_DESCRIPTION, CONTEXT_SCHEMA
from ithaca.delivery.doctor.tool import DOCTOR_DESCRIPTION, DOCTOR_SCHEMA
from ithaca.delivery.records.tool import RECORD_DESCRIPTION, RECORD_SCHEMA
from ithaca.delivery.sessions.tool import SESSION_DESCRIPTION, SESSION_SCHEMA
from ithaca.delivery.sync.tool import SYNC_DESCRIPTION, SYNC_SCHEMA
from ithaca.kernel.tools import (
    ARRAY,
    BOOLEAN,
    OBJECT,
    STRING,
    ToolSpec,
    outline,
    result_schema,
)

# (name, title, description, schema, output, read_only, destructive, idempotent)
_TOOLS: tuple[tuple[str, str, str, dict[str, Any], dict[str, Any], bool, bool, bool], ...] = (
    (
        "context",
        "Delivery context",
        CONTEXT_DESCRIPTION,
        CONTEXT_SCHEMA,
        result_schema(id=STRING),
        True,
        False,
        True,
    ),
    (
        "record",
        "Record delivery facts",
        RECORD_DESCRIPTION,
        RECORD_SCHEMA,
        result_schema(results=ARRAY),
        False,
        False,
        True,
    ),
    (
        "checkpoint",
        "Stage checkpoint",
        CHECKPOINT_DESCRIPTION,
        CHECKPOINT_SCHEMA,
        result_schema(checkpoint=OBJECT),
        False,
        False,
        True,
    ),
    (
        "archive",
        "Archive a change",
        ARCHIVE_DESCRIPTION,
        ARCHIVE_SCHEMA,
        result_schema(archive=OBJECT),
        False,
        True,
        True,
    ),
    (
        "sync",
        "Team ledger sync",
        SYNC_DESCRIPTION,
        SYNC_SCHEMA,
        result_schema(diagnostics=ARRAY),
        False,
        False,
        True,
    ),
    (
        "session",
        "Execution sessions",
        SESSION_DESCRIPTION,
        SESSION_SCHEMA,
        result_schema(session=OBJECT),
        False,
        False,
        False,
    ),
    (
        "doctor",
        "Check or repair state",
        DOCTOR_DESCRIPTION,
        DOCTOR_SCHEMA,
        result_schema(ok=BOOLEAN),
        False,
        False,
        False,
    ),
)

TOOLS = tuple(
    ToolSpec(
        name,
        title,
        description,
        outline(schema),
        output,
        read_only=read_only,
        destructive=destructive,
        idempotent=idempotent,
        service="delivery",
        method=name,
        takes_session="session" in schema["properties"],
    )
    for name, title, description, schema, output, read_only, destructive, idempotent in _TOOLS
)
