"""Delivery: durable delivery state for changes, tasks and their evidence (reference:
delivery).

``service.DeliveryService`` is the one path for the CLI, the MCP tools and Python. Its
rooms: ``records`` (the ``record`` tool and its kinds), ``checkpoints``, ``context`` (the
Context Envelope), ``ledger`` (the team ledger file, its merge and its Git driver),
``sync`` (inspect, import, publish, migrate, rehash), ``sessions`` (admission, leases,
worktrees, Worker Packets), ``run_plan``, ``units`` (recoverable tracked-file writes) and
``doctor``. Hook code imports ``gate`` from this package, so the face below loads each
name only on first use (PEP 562).
"""

from __future__ import annotations

from ithaca.kernel import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.delivery.checkpoints.request import STAGES as CHECKPOINT_STAGES
    from ithaca.delivery.context.sections import STAGES as CONTEXT_STAGES
    from ithaca.delivery.contract import validation_error
    from ithaca.delivery.imports.tool import FORMATS as IMPORT_FORMATS
    from ithaca.delivery.ledger.driver import main as run_merge_driver
    from ithaca.delivery.records.catalogue import example as record_example
    from ithaca.delivery.records.catalogue import fields_text as record_fields
    from ithaca.delivery.run_plan.progress import ATTRIBUTE as PROGRESS_ATTRIBUTE
    from ithaca.delivery.run_plan.progress import LOGGER as PROGRESS_LOGGER
    from ithaca.delivery.service import DeliveryService
    from ithaca.delivery.sessions.close import REASONS as CLOSE_REASONS
    from ithaca.delivery.sessions.env import SESSION_VARIABLE

_FACE = {
    "DeliveryService": "ithaca.delivery.service:DeliveryService",
    "validation_error": "ithaca.delivery.contract:validation_error",
    "run_merge_driver": "ithaca.delivery.ledger.driver:main",
    "CLOSE_REASONS": "ithaca.delivery.sessions.close:REASONS",
    "SESSION_VARIABLE": "ithaca.delivery.sessions.env:SESSION_VARIABLE",
    "CHECKPOINT_STAGES": "ithaca.delivery.checkpoints.request:STAGES",
    "CONTEXT_STAGES": "ithaca.delivery.context.sections:STAGES",
    "IMPORT_FORMATS": "ithaca.delivery.imports.tool:FORMATS",
    "record_fields": "ithaca.delivery.records.catalogue:fields_text",
    "record_example": "ithaca.delivery.records.catalogue:example",
    "PROGRESS_LOGGER": "ithaca.delivery.run_plan.progress:LOGGER",
    "PROGRESS_ATTRIBUTE": "ithaca.delivery.run_plan.progress:ATTRIBUTE",
}
__all__ = [
    "DeliveryService",
    "validation_error",
    "run_merge_driver",
    "CLOSE_REASONS",
    "SESSION_VARIABLE",
    "CHECKPOINT_STAGES",
    "CONTEXT_STAGES",
    "IMPORT_FORMATS",
    "record_fields",
    "record_example",
    "PROGRESS_LOGGER",
    "PROGRESS_ATTRIBUTE",
]
__getattr__ = lazy(__name__, _FACE)


# --- The manifest: what this part brings to the kernel's registries --------------------
# What Delivery brings: its tables, its gate, its doctor, its tools and commands.
# Plain data naming "module:attribute" targets (``ithaca.PARTS``).

MIGRATIONS = (
    (6, "delivery.initial", "ithaca.delivery.tables:DELIVERY_V1"),
    (8, "delivery.ledger", "ithaca.delivery.ledger.tables:LEDGER_V1"),
    (9, "delivery.sessions", "ithaca.delivery.sessions.tables:DELIVERY_SESSIONS_V1"),
)
GATES = (
    ("ithaca.delivery.gate", ("SessionStart", "PreCompact", "PreToolUse", "PostToolUse", "Stop")),
)
DOCTOR_CHECKS = ("ithaca.delivery.doctor.checks:check",)
DOCTOR_REPAIRS = ("ithaca.delivery.doctor.repairs:repair",)
DOCTOR_REBUILDS = ("ithaca.delivery.doctor.rebuilds:rebuild",)
MCP_TOOLS = ("ithaca.delivery.tools:TOOLS",)
CLI_COMMANDS = {
    "context": "ithaca.cli.commands.context:command",
    "record": "ithaca.cli.commands.record:command",
    "checkpoint": "ithaca.cli.commands.checkpoint:command",
    "archive": "ithaca.cli.commands.archive:command",
    "sync": "ithaca.cli.commands.sync:group",
    "session": "ithaca.cli.commands.session:group",
    "run-plan": "ithaca.cli.commands.run_plan:command",
    "import": "ithaca.cli.commands.import_:command",
}
