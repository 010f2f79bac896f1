"""Delivery's MCP tools: each is the ``DeliveryService`` method of the same name.

They go without titles: all seven must fit in 6 KiB of tools/list (delivery reference
§3.2). Each method checks its own request (``ithaca.delivery.contract``).
"""

from __future__ import annotations

from ithaca.delivery.archive import ARCHIVE_DESCRIPTION, ARCHIVE_SCHEMA
from ithaca.delivery.checkpoints.request import CHECKPOINT_DESCRIPTION, CHECKPOINT_SCHEMA
from ithaca.delivery.context.tool import CONTEXT_DESCRIPTION, CONTEXT_SCHEMA
from ithaca.delivery.doctor.tool import DOCTOR_DESCRIPTION, DOCTOR_SCHEMA
from ithaca.delivery.records.tool import RECORD_DESCRIPTION, RECORD_SCHEMA
from ithaca.delivery.sessions.tool import SESSION_DESCRIPTION, SESSION_SCHEMA
from ithaca.delivery.sync.tool import SYNC_DESCRIPTION, SYNC_SCHEMA
from ithaca.kernel.tools import ToolSpec

TOOLS = tuple(
    ToolSpec(name, None, description, schema, read_only, service="delivery", method=name)
    for name, description, schema, read_only in (
        ("context", CONTEXT_DESCRIPTION, CONTEXT_SCHEMA, True),
        ("record", RECORD_DESCRIPTION, RECORD_SCHEMA, False),
        ("checkpoint", CHECKPOINT_DESCRIPTION, CHECKPOINT_SCHEMA, False),
        ("archive", ARCHIVE_DESCRIPTION, ARCHIVE_SCHEMA, False),
        ("sync", SYNC_DESCRIPTION, SYNC_SCHEMA, False),
        ("session", SESSION_DESCRIPTION, SESSION_SCHEMA, False),
        ("doctor", DOCTOR_DESCRIPTION, DOCTOR_SCHEMA, False),
    )
)
