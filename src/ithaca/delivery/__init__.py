"""Durable delivery state: baseline, changes, decisions, tasks, artifacts (reference:
delivery).

``service.DeliveryService`` is the entry point; ``record`` runs the tool of that name
over the actions in ``baseline``, ``changes``, ``decisions``, ``tasks``, ``artifacts``
and ``observations``; ``units`` makes tracked-file writes recoverable; ``tool`` holds
the MCP description and schema. Hook code will import a gate module from this package,
so the service is loaded only when asked for (PEP 562).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.delivery.records.tool import RECORD_DESCRIPTION, RECORD_SCHEMA
    from ithaca.delivery.service import DeliveryService

__all__ = ["DeliveryService", "RECORD_DESCRIPTION", "RECORD_SCHEMA"]


def __getattr__(name: str) -> object:
    if name == "DeliveryService":
        from ithaca.delivery.service import DeliveryService

        return DeliveryService
    if name in ("RECORD_DESCRIPTION", "RECORD_SCHEMA"):
        from ithaca.delivery.records import tool

        return getattr(tool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
