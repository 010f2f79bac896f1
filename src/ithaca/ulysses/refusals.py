"""The Ulysses rules: which command a session refuses, and why.

``check`` is the whole of it: the session a command needs, the phase it may come in and
its prerequisites (a fresh move, a final validator bound in time, a checkpoint that can be
restored). It reads only the state and the command, so the service can ask it on a short
read before any slow work, and ``machine.transition`` asks it again before it computes
anything: a refusal changes nothing and yields no event.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.errors import NotFound, Refused
from ithaca.ulysses.session import State, forbidden_key, has_outcome, is_active

# The user's own way to bind late or replace: the ``replace_final_validator`` operation,
# which only the CLI offers, behind the terminal check (``kernel.authority``).
USER_BINDS_FINAL = (
    "`ithaca ulysses bind-final-validator NOTEBOOK CELL --replace` in their own terminal"
)


def check(state: State | None, command: dict[str, Any]) -> None:
    """Raise the refusal ``command`` meets in ``state`` (session, phase, prerequisites);
    everything a command needs from outside comes later, with the facts."""
    operation = command["operation"]
    if operation == "init":
        if is_active(state) and not command.get("supersede"):
            assert state is not None
            raise Refused(
                "SESSION_ACTIVE",
                f"session {state['session_id']} is active; complete it, or init with"
                " supersede: true to abandon it",
                {"session_id": state["session_id"]},
            )
    elif operation == "rollback":  # the user's, on any session of theirs
        if state is None:
            raise _no_active_session()
        restorable_checkpoint(state, command["label"])
    elif operation != "status":
        if not is_active(state):
            raise _no_active_session()
        assert state is not None
        phase_check = _PHASE_CHECKS.get(operation)
        if phase_check is not None:
            phase_check(state, command)


def restorable_checkpoint(state: State, label: str) -> dict[str, Any]:
    """The checkpoint ``label`` of ``state``, provided it holds a snapshot to restore."""
    for point in state["checkpoints"]:
        if point["label"] == label:
            if point["restorable"] is False:
                raise Refused(
                    "CHECKPOINT_NOT_RESTORABLE",
                    f"checkpoint {label} holds no snapshot to restore",
                    {"label": label, "session_id": state["session_id"]},
                )
            return dict(point)
    raise NotFound(
        "CHECKPOINT_NOT_FOUND",
        f"session {state['session_id']} has no checkpoint {label!r}",
        {"label": label, "labels": [point["label"] for point in state["checkpoints"]]},
    )


def _check_resume(state: State, command: dict[str, Any]) -> None:
    wanted = command.get("session_id")
    if wanted is not None and wanted != state["session_id"]:
        raise Refused(
            "SESSION_NOT_ACTIVE",
            f"session {wanted} is not the active session {state['session_id']}",
            {"session_id": wanted, "active": state["session_id"]},
        )


def _check_plan(state: State, command: dict[str, Any]) -> None:
    phase = state["phase"]
    if phase == "REFLECT":
        raise _reflect_required("plan")
    if phase in ("PRIMARY", "RECOVERY"):
        step = state["active_step"]
        raise Refused(
            "STEP_ACTIVE",
            f"step {step['step_id']} is still open; report its outcome first",
            {"step_id": step["step_id"], "phase": phase},
        )
    _check_forbidden(state, command)


def _check_outcome(state: State, command: dict[str, Any]) -> None:
    if state["phase"] == "REFLECT":
        raise _reflect_required("outcome")
    if state["phase"] == "IDLE":
        raise Refused("NO_ACTIVE_STEP", "no step is open; plan one first", {"phase": "IDLE"})


def _check_reflect(state: State, command: dict[str, Any]) -> None:
    phase = state["phase"]
    if phase == "RECOVERY":
        raise Refused(
            "RECOVERY_OUTCOME_PENDING",
            "the recovery step is still open; report its outcome first",
            {"step_id": state["active_step"]["step_id"]},
        )
    if phase != "REFLECT":
        raise Refused(
            "REFLECT_NOT_REQUIRED",
            f"reflection is due only after a recovery failed (phase {phase})",
            {"phase": phase},
        )


def _check_bind_final(state: State, command: dict[str, Any]) -> None:
    """The agent binds the final validator once, before the first outcome, so that it is
    fixed before any fix and cannot be fitted to one; binding it later, or replacing it, is
    the user's."""
    bound = state["finalValidator"]
    if bound is not None:
        raise Refused(
            "FINAL_VALIDATOR_ALREADY_BOUND",
            f"a final validator is already bound to this session; replacing it is the user's"
            f" ({USER_BINDS_FINAL})",
            {"finalValidator": bound},
        )
    if has_outcome(state):
        raise Refused(
            "FINAL_VALIDATOR_LATE",
            "the final validator is bound before the first outcome, so that it is fixed"
            f" before any fix; binding one now is the user's ({USER_BINDS_FINAL})",
            {},
        )


def _check_complete(state: State, command: dict[str, Any]) -> None:
    if command["terminalState"] != "resolved":
        return
    if state["phase"] == "REFLECT":
        raise _reflect_required("complete as resolved")
    if state["finalValidator"] is None:
        raise Refused(
            "FINAL_VALIDATOR_REQUIRED",
            "resolved needs a final validator; bind one with bind_final_validator",
            {},
        )


_PHASE_CHECKS = {
    "resume": _check_resume,
    "plan": _check_plan,
    "outcome": _check_outcome,
    "reflect": _check_reflect,
    "bind_final_validator": _check_bind_final,
    "replace_final_validator": lambda state, command: None,  # the user's, at any point
    "complete": _check_complete,
}


def _check_forbidden(state: State, command: dict[str, Any]) -> None:
    # Keys are taken again from the texts: entries stored under an older key still hold.
    known = {forbidden_key(entry["text"]): entry for entry in state["forbidden_moves"]}
    for field in ("primary", "recovery"):
        key = forbidden_key(command[field])
        entry = known.get(key)
        if entry is not None:
            raise Refused(
                "FORBIDDEN_MOVE",
                f"{field} repeats a move that {entry['reason']} in step {entry['step_id']}:"
                f" {entry['text']!r}",
                {
                    "field": field,
                    "move": command[field],
                    "key": key,
                    "origin_step": entry["step_id"],
                    "reason": entry["reason"],
                },
            )


def _no_active_session() -> Refused:
    return Refused("NO_ACTIVE_SESSION", "no Ulysses session is active; init one first", {})


def _reflect_required(action: str) -> Refused:
    return Refused(
        "REFLECT_REQUIRED",
        f"cannot {action} now: reflect first (a falsifiable hypothesis and what would disprove it)",
        {"phase": "REFLECT", "required_action": "reflect"},
    )
