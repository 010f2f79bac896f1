"""What a Ulysses session is: its phases and statuses, and the questions asked of one.

A session is a JSON-able dict (its state fields, plus the closed ``steps``,
the validator ``evidence`` and the ``reflect_base`` observation taken on entering
REFLECT). ``S``, ``phase`` and ``active_step`` always agree (``PHASE_S``); a closed
session has neither phase nor ``S``. The rules (``refusals``), the transitions
(``machine``), the service and the lesson format all read a session through these names,
so they live apart from any one of them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from ithaca.ulysses.lookalikes import skeleton

PHASE_S = {"IDLE": 0, "PRIMARY": 1, "RECOVERY": 2, "REFLECT": 2}
REQUIRED_ACTION = {
    "IDLE": "plan",
    "PRIMARY": "outcome",
    "RECOVERY": "outcome",
    "REFLECT": "reflect",
}
TERMINAL_STATES = ("resolved", "insufficient_information", "environment_compromised")
STATUSES = ("active", *TERMINAL_STATES, "superseded")
# The reason a validator result carries when the snapshot check failed and nothing ran.
TAMPER_REASON = "snapshot_hash_mismatch"

State = dict[str, Any]

_WHITESPACE = re.compile(r"\s+")


def forbidden_key(text: str) -> str:
    """The comparison key of a move: NFKC, casefolded, folded to its confusable skeleton
    (UTS #39: a look-alike from another script is the same letter), whitespace runs
    collapsed, stripped."""
    folded = skeleton(unicodedata.normalize("NFKC", text).casefold())
    return _WHITESPACE.sub(" ", folded).strip()


def is_tamper(validation: dict[str, Any]) -> bool:
    """Whether a validator result reports a failed snapshot check (nothing ran)."""
    return validation.get("reason") == TAMPER_REASON


def is_active(state: State | None) -> bool:
    return state is not None and state["status"] == "active"


def step_role(state: State) -> str:
    """Which of the open step's validators judges the next outcome."""
    return "primary" if state["phase"] == "PRIMARY" else "recovery"


def has_outcome(state: State) -> bool:
    """Whether a step's validator has judged an outcome in this session."""
    return any(entry["role"] in ("primary", "recovery") for entry in state["evidence"])


def observation_needed(
    state: State, command: dict[str, Any], validation: dict[str, Any]
) -> str | None:
    """Which Git observation the service must take before committing a judged command
    (``outcome`` or ``complete``): ``reflect_base`` when it enters REFLECT, ``checkpoint``
    when an outcome passes, else none."""
    if is_tamper(validation):
        return "reflect_base"
    if command["operation"] == "complete":
        return None
    if validation["pass"]:
        return "checkpoint"
    return "reflect_base" if state["phase"] == "RECOVERY" else None


def next_checkpoint_label(state: State, prefix: str) -> str:
    """``checkpoint_<n>`` or ``pre_rollback_<n>``: one more than the labels already taken."""
    taken = sum(1 for point in state["checkpoints"] if point["label"].startswith(prefix + "_"))
    return f"{prefix}_{taken + 1}"


def irreversible_after(state: State, checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
    """Irreversible steps planned after ``checkpoint`` was taken (a rollback cannot undo
    what they did outside the worktree)."""
    steps = [*state["steps"], *([state["active_step"]] if state["active_step"] else [])]
    return [
        step
        for step in steps
        if step["irreversible"] and step["planned_at"] > (checkpoint["at"] or "")
    ]
