"""Ultragoal: objective pursuit over confirmed stories that never false-completes.

One pursuit per host session: an objective in the Seven Slots, stories approved in bulk
and pursued one at a time, one independent code review over the whole diff, and
``request-complete`` as the only way to ``complete``. ``service`` is the one path for the
CLI, the MCP tool and the Python API; ``lifecycle``, ``records``, ``progress``,
``reducer`` and ``contract`` are what hooks use in-process, importing only the standard
library and the kernel. The service (and the validators engine behind it) is loaded only
when asked for (PEP 562), so importing a hook module stays cheap.
"""

from __future__ import annotations

from ithaca.kernel import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.ultragoal import hostcap
    from ithaca.ultragoal.reducer import CLASSES
    from ithaca.ultragoal.service import UltragoalService

_FACE = {
    "UltragoalService": "ithaca.ultragoal.service:UltragoalService",
    "CLASSES": "ithaca.ultragoal.reducer:CLASSES",
    "hostcap": "ithaca.ultragoal.hostcap",
}
__all__ = [
    "UltragoalService",
    "CLASSES",
    "hostcap",
]
__getattr__ = lazy(__name__, _FACE)


# --- The manifest: what this part brings to the kernel's registries --------------------
# What Ultragoal brings: its tables, its gate and states, its tool and commands.
# Plain data naming "module:attribute" targets (``ithaca.PARTS``).

MIGRATIONS = (
    (7, "ultragoal.initial", "ithaca.ultragoal.tables:ULTRAGOAL_V1"),
    (12, "ultragoal.review_base", "ithaca.ultragoal.tables:ULTRAGOAL_REVIEW_BASE"),
    (15, "ultragoal.review_pass", "ithaca.ultragoal.tables:ULTRAGOAL_REVIEW_PASS"),
)
GATES = (
    (
        "ithaca.ultragoal.gate",
        ("SessionStart", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse", "Stop"),
    ),
)
STATES = {
    "ultragoal.active": "ithaca.ultragoal.gate:is_active",
    "ultragoal.pursuing": "ithaca.ultragoal.gate:is_pursuing",
}
MCP_TOOLS = ("ithaca.ultragoal.tool:TOOLS",)
CLI_COMMANDS = {"ultragoal": "ithaca.cli.commands.ultragoal:group"}
