"""Protocols: mandatory rules stored outside the model, selected for each admitted
prompt, returned as a bundle and enforced by the hooks (reference ``protocols.md``).

``service.ProtocolsService`` is the one path for the CLI, the MCP tools and Python, the
user's tooling (explain, lint, fixtures, the seed report) included.
The hook imports ``gate`` and ``critic`` through this package, so the face loads each
name only on first use (PEP 562).
"""

from __future__ import annotations

from ithaca.kernel import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.protocols.service import ADMIT_CONNECTORS, ProtocolsService
    from ithaca.protocols.validate import MESSAGE_KINDS

_FACE = {
    "ProtocolsService": "ithaca.protocols.service:ProtocolsService",
    "ADMIT_CONNECTORS": "ithaca.protocols.service:ADMIT_CONNECTORS",
    "MESSAGE_KINDS": "ithaca.protocols.validate:MESSAGE_KINDS",
}
__all__ = [
    "ProtocolsService",
    "ADMIT_CONNECTORS",
    "MESSAGE_KINDS",
]
__getattr__ = lazy(__name__, _FACE)


# --- The manifest: what this part brings to the kernel's registries --------------------
# What Protocols brings: its tables, the turn's gate and critic, and its tools.
# Plain data naming "module:attribute" targets (``ithaca.PARTS``).

MIGRATIONS = ((2, "protocols.initial", "ithaca.protocols.tables:PROTOCOLS_V1"),)
GATES = (
    ("ithaca.protocols.gate", ("UserPromptSubmit", "PreToolUse")),
    # After the bundle's gate: the critic judges a turn the bundle already admitted.
    ("ithaca.protocols.critic", ("PreToolUse", "Stop")),
)
DOCTOR_CHECKS = ("ithaca.protocols.health:check",)
MCP_TOOLS = ("ithaca.protocols.tools:TOOLS",)
CLI_COMMANDS = {"protocols": "ithaca.cli.commands.protocols:group"}
