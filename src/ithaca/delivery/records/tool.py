"""The ``record`` tool as MCP publishes it: description and top-level input schema.

The schema is the one the service itself checks the request against (with
``ithaca.delivery.schemas.dialect``), so what ``tools/list`` shows and what the server
accepts cannot drift apart. ``data`` is only "an object" here; its fields depend on the
(kind, action) and are checked server-side (``schemas/record.py``), which keeps the
published schema small: the seven delivery tools share a 6 KiB budget.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.contract import MAX_ENTRIES
from ithaca.delivery.schemas.ids import IDEMPOTENCY_KEY
from ithaca.delivery.schemas.record import KINDS

RECORD_DESCRIPTION = (
    "Record delivery facts: entries [{kind, action, data, idempotency_key}] (≤ 50, in "
    "order; same key replays). baseline initialize|start|observe|revise|accept, "
    "change_contract open|revise|cancel, decision accept|defer, task_contract "
    "define|revise|remove, task_outcome start|complete|block|reopen, artifact bind, event "
    "append."
)

RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entries": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_ENTRIES,
            "items": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": list(KINDS)},
                    "action": {"type": "string"},
                    "data": {"type": "object", "default": {}},
                    "idempotency_key": IDEMPOTENCY_KEY,
                },
                "required": ["kind", "action", "idempotency_key"],
                "additionalProperties": False,
            },
        },
        "session": {"type": "string"},
    },
    "required": ["entries"],
    "additionalProperties": False,
}
