"""Ulysses: surprise-gated debugging (docs/ulysses.md, "The session" and "Lessons").

Plan a step with a recovery, let a pinned validator judge its outcome, reflect when both
moves fail, and close with a lesson. ``refusals`` and ``machine`` hold the rules,
``service`` applies them to the store, ``gate`` lets host hooks enforce them. The hook
imports ``gate`` through this package, so the service (and the validator engine behind
it) is loaded only when asked for (PEP 562).
"""

from __future__ import annotations

from ithaca.kernel import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.ulysses.inputs import NOTE_KINDS
    from ithaca.ulysses.knowledge import SEARCH_LIMIT_DEFAULT, KnowledgeService
    from ithaca.ulysses.service import UlyssesService
    from ithaca.ulysses.session import TERMINAL_STATES
    from ithaca.ulysses.session_store import load_session

_FACE = {
    "UlyssesService": "ithaca.ulysses.service:UlyssesService",
    "KnowledgeService": "ithaca.ulysses.knowledge:KnowledgeService",
    "SEARCH_LIMIT_DEFAULT": "ithaca.ulysses.knowledge:SEARCH_LIMIT_DEFAULT",
    "NOTE_KINDS": "ithaca.ulysses.inputs:NOTE_KINDS",
    "TERMINAL_STATES": "ithaca.ulysses.session:TERMINAL_STATES",
    "load_session": "ithaca.ulysses.session_store:load_session",
}
__all__ = [
    "UlyssesService",
    "KnowledgeService",
    "SEARCH_LIMIT_DEFAULT",
    "NOTE_KINDS",
    "TERMINAL_STATES",
    "load_session",
]
__getattr__ = lazy(__name__, _FACE)


# --- The manifest: what this part brings to the kernel's registries --------------------
# What Ulysses brings: its tables, its gate and states, lessons and its tools.
# Plain data naming "module:attribute" targets (``ithaca.PARTS``).

MIGRATIONS = (
    (4, "ulysses.initial", "ithaca.ulysses.tables:ULYSSES_V1"),
    (5, "knowledge.initial", "ithaca.ulysses.knowledge_tables:KNOWLEDGE_V1"),
)
GATES = (("ithaca.ulysses.gate", ("SessionStart", "PreToolUse")),)
STATES = {
    "ulysses.active": "ithaca.ulysses.gate:is_active",
    "ulysses.step_active": "ithaca.ulysses.gate:is_step_active",
}
DOCTOR_CHECKS = ("ithaca.ulysses.lesson_recording:check",)
DOCTOR_REPAIRS = ("ithaca.ulysses.lesson_recording:restore_missing_files",)
MCP_TOOLS = ("ithaca.ulysses.tools:TOOLS",)
CLI_COMMANDS = {
    "ulysses": "ithaca.cli.commands.ulysses:group",
    "knowledge": "ithaca.cli.commands.knowledge:group",
}
