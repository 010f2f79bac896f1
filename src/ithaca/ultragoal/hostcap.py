"""Claude Code's cap on consecutive Stop blocks, as this project has it configured.

Claude Code honours a limited number of consecutive Stop-hook blocks and then ends the
turn anyway. A pursuit whose iteration budget needs more blocks than that would be cut
short without the gate knowing, so the service warns when entering pursuit and the Stop
gate marks the pursuit ``host_capped`` when it crosses the cap. The cap is read from the
environment, else from the project's ``.claude/settings*.json``, else the host default.
"""

from __future__ import annotations

import os

from ithaca.kernel import lightjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

VARIABLE = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
DEFAULT_CAP = 8
SETTINGS_FILES = ("settings.local.json", "settings.json")


def stop_cap(project_root: str, env: Mapping[str, str]) -> int:
    """The cap in force; 0 means the host never overrides a block."""
    value = whole_number(env.get(VARIABLE))
    if value is not None:
        return value
    for name in SETTINGS_FILES:
        try:
            with open(os.path.join(project_root, ".claude", name), encoding="utf-8") as handle:
                settings = lightjson.loads(handle.read())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        configured = settings.get("env") if isinstance(settings, dict) else None
        if isinstance(configured, dict):
            value = whole_number(configured.get(VARIABLE))
            if value is not None:
                return value
    return DEFAULT_CAP


def below_budget(max_iterations: int, cap: int) -> bool:
    """Whether a whole no-progress run (``max_iterations`` blocks, a wait and an error
    block) needs more consecutive blocks than the host allows."""
    return cap != 0 and max_iterations + 2 > cap


def whole_number(value: object) -> int | None:
    """A cap as Claude Code reads it: a whole number, usually written as a string; None
    for anything else (a negative number, a boolean, other text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None
