"""Gate 9: the Codex goal cross-check (docs/ultragoal.md, "The nine completion gates").

When the agent registered a story's objective with Codex's ``create_goal`` and recorded
the same string as ``codex_goal_objective``, completion also needs a fresh ``get_goal``
snapshot showing that objective, marked complete. The snapshot arrives as inline JSON,
a file path, or standard input; it is read before the completing transaction, and any
reading problem is a gate failure reported with the others, never an early exit.
"""

from __future__ import annotations

import json
import os
from typing import Any

OBJECTIVE_PATHS = (("goal", "objective"), ("goal", "goal"), ("goal", "description"), ("objective",))


class Snapshot:
    """A supplied snapshot: its parsed value, or why it could not be read."""

    __slots__ = ("value", "problem")

    def __init__(self, value: Any = None, problem: str | None = None):
        self.value = value
        self.problem = problem


def load(supplied: Any, base_dir: str) -> Snapshot | None:
    """The snapshot from an object, or from text that is JSON or else a file path."""
    if supplied is None:
        return None
    if not isinstance(supplied, str):
        return Snapshot(supplied)
    try:
        return Snapshot(json.loads(supplied))
    except ValueError:
        pass
    try:
        with open(os.path.join(base_dir, supplied), encoding="utf-8") as handle:
            return Snapshot(json.loads(handle.read()))
    except (OSError, ValueError) as exc:
        return Snapshot(problem=f"neither JSON nor a readable JSON file ({exc})")


def check(objective: str, snapshot: Snapshot | None) -> tuple[str, str] | None:
    """``(code, message)`` when the gate fails, None when it passes or is not armed."""
    if not objective.strip():
        return None
    if snapshot is None:
        return (
            "CODEX_GOAL_SNAPSHOT_MISSING",
            "a Codex goal is armed: pass --codex-goal-json with a fresh get_goal snapshot",
        )
    if snapshot.problem is not None:
        return "CODEX_GOAL_SNAPSHOT_UNPARSEABLE", snapshot.problem
    found = _objective(snapshot.value)
    if not isinstance(found, str):
        return "CODEX_GOAL_SNAPSHOT_UNPARSEABLE", "the snapshot names no objective string"
    if _collapse(found) != _collapse(objective):
        return "CODEX_GOAL_MISMATCH", "the live Codex goal is not the recorded objective"
    if _status(snapshot.value) != "complete":
        return "CODEX_GOAL_NOT_COMPLETE", "the Codex goal is not marked complete"
    return None


def _objective(value: Any) -> Any:
    for path in OBJECTIVE_PATHS:
        found = _lookup(value, path)
        if found is not _MISSING:
            return found
    return None


def _status(value: Any) -> Any:
    found = _lookup(value, ("goal", "status"))
    return _lookup(value, ("status",)) if found is _MISSING else found


_MISSING = object()


def _lookup(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def _collapse(text: str) -> str:
    return " ".join(text.split())
