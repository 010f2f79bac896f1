"""What a Ulysses answer says beyond the session it shows: the outcome's message, the
diagnostics ``reflect`` and ``complete`` notice, and the error a tampered final validator
still owes its caller.

The session view is ``views``; these are the words the service adds once a transition is
committed, so the agent hears what the new state means for its next call.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.errors import Corrupt
from ithaca.ulysses.diagnostics import Diagnostics, diagnostic
from ithaca.ulysses.session import State, forbidden_key, is_tamper

THIN_SUMMARY_CHARS = 40


def reflect_diagnostics(
    command: dict[str, Any], reflect_base: dict[str, Any], digest: str | None
) -> Diagnostics:
    """What ``reflect`` notices: files changed while reflection was due, and a
    falsification that only restates its hypothesis."""
    diagnostics = []
    before = reflect_base["worktree_digest"]
    if None not in (before, digest) and before != digest:
        diagnostics.append(
            diagnostic(
                "worktree_changed_during_reflect",
                "files changed since the session entered REFLECT; reflection is meant to be"
                " read-only",
            )
        )
    if _restates(command["hypothesis"], command["falsification"]):
        diagnostics.append(
            diagnostic(
                "falsification_restates_hypothesis",
                "the falsification repeats the hypothesis; name an observation that would prove"
                " it wrong",
            )
        )
    return diagnostics


def _restates(hypothesis: str, falsification: str) -> bool:
    """Whether one text contains the other once case, width and spacing are ignored."""
    first, second = forbidden_key(hypothesis), forbidden_key(falsification)
    return first in second or second in first


def final_tampered(after: State, validation: dict[str, Any] | None) -> Corrupt:
    """Row 23: the tamper transition is committed, and the caller still hears an error."""
    return Corrupt(
        "VALIDATOR_TAMPERED",
        "the final validator's snapshot check failed, so nothing ran; the session is in"
        " REFLECT and cannot end resolved (complete as environment_compromised, or init with"
        " supersede)",
        {"session_id": after["session_id"], "phase": after["phase"], "validation": validation},
    )


def summary_diagnostics(summary: str) -> Diagnostics:
    if len(summary.strip()) >= THIN_SUMMARY_CHARS:
        return []
    return [
        diagnostic(
            "thin_summary",
            f"the summary is under {THIN_SUMMARY_CHARS} characters; a lesson should say what"
            " to do differently next time",
        )
    ]


def outcome_message(role: str, validation: dict[str, Any], after: State) -> str:
    if is_tamper(validation):
        return (
            f"The {role} validator's snapshot check failed ({validation['cause']}); nothing ran."
            " Both moves are forbidden. Reflect before planning again."
        )
    if validation["pass"]:
        return f"Expected: the {role} validator passed. Plan the next step, or complete."
    if after["phase"] == "RECOVERY":
        return "Unexpected: the primary validator failed. Take the recovery action, then report."
    return (
        "Unexpected: the recovery validator failed too. Both moves are forbidden; reflect with"
        " a falsifiable hypothesis before planning again."
    )
