"""The MCP ``doctor`` tool: the kernel's doctor report, after a repair when asked.

The checks, repairs and rebuild are every part's (``ithaca.kernel.doctor`` runs them,
delivery's among them); the tool only chooses between inspecting and repairing first.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.schemas.dialect import check as check_schema
from ithaca.delivery.schemas.ids import IDEMPOTENCY_KEY
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

DOCTOR_DESCRIPTION = (
    "Check the project's state (inspect) or repair it after a verified backup (repair). "
    "Changed files are reported, not fixed."
)
DOCTOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": ["inspect", "repair"], "default": "inspect"},
        "idempotency_key": IDEMPOTENCY_KEY,
    },
    "additionalProperties": False,
}


def doctor(
    project: Project, store: Store, config: dict[str, Any], arguments: Any
) -> dict[str, Any]:
    """The MCP ``doctor`` tool: the kernel's report, after a repair when asked."""
    from ithaca.kernel import doctor as kernel_doctor

    request = check_schema(DOCTOR_SCHEMA, arguments)
    repaired = kernel_doctor.repair(project, store) if request["operation"] == "repair" else {}
    report = kernel_doctor.check(project, store)
    return {**report, "repaired": repaired.get("repaired", []), "backup": repaired.get("backup")}
