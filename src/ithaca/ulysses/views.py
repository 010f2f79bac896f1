"""What the Ulysses operations answer, shaped from a stored session (docs/ulysses.md,
"The session").

The stored state carries what the service needs to act (binding ids, the closed steps,
the evidence list); an answer shows the agent what it needs to decide the next call. Kept
apart from the service so the MCP tool, the CLI and ``resume`` answer the same shapes.
"""

from __future__ import annotations

from typing import Any

from ithaca.ulysses.session import REQUIRED_ACTION

VALIDATOR_FIELDS = ("notebookId", "cellId", "cellVersion", "snapshotHash", "language", "mode")
LESSON_STEP_FIELDS = ("step_id", "primary", "recovery", "irreversible", "result", "hypothesis_seq")


def validator(binding: dict[str, Any] | None) -> dict[str, Any] | None:
    """A bound validator as an answer shows it (its binding id stays internal)."""
    if binding is None:
        return None
    return {key: binding[key] for key in VALIDATOR_FIELDS}


def step(active: dict[str, Any] | None) -> dict[str, Any] | None:
    if active is None:
        return None
    return {
        **active,
        "primaryValidator": validator(active["primaryValidator"]),
        "recoveryValidator": validator(active["recoveryValidator"]),
    }


def common(state: dict[str, Any], diagnostics: list[dict[str, Any]]) -> dict[str, Any]:
    """The fields every answer carries about the session it touched."""
    answer: dict[str, Any] = {"session_id": state["session_id"]}
    if state["status"] == "active":
        answer.update(
            S=state["S"], phase=state["phase"], required_action=REQUIRED_ACTION[state["phase"]]
        )
    answer["diagnostics"] = diagnostics
    return answer


def status(state: dict[str, Any], history_event_count: int) -> dict[str, Any]:
    """``status`` of an active session."""
    return {
        "active": True,
        "problem": state["problem"],
        "constraints": state["constraints"],
        "active_step": step(state["active_step"]),
        "forbidden_moves": state["forbidden_moves"],
        "hypotheses": state["hypotheses"],
        "checkpoints": state["checkpoints"],
        "finalValidator": validator(state["finalValidator"]),
        "hypothesis_count": len(state["hypotheses"]),
        "checkpoint_count": len(state["checkpoints"]),
        "history_event_count": history_event_count,
        "created_at": state["created_at"],
    }


def last_session(state: dict[str, Any]) -> dict[str, Any]:
    """The most recently closed session, as ``status`` shows it when none is active."""
    return {
        "session_id": state["session_id"],
        "status": state["status"],
        "problem": state["problem"],
        "summary": state["summary"],
        "created_at": state["created_at"],
        "completed_at": state["completed_at"],
    }


def closed_for_lesson(state: dict[str, Any]) -> dict[str, Any]:
    """A closed session in the shape ``lesson_recording.record_lesson`` takes."""
    return {
        "session_id": state["session_id"],
        "problem": state["problem"],
        "constraints": state["constraints"],
        "terminalState": state["status"],
        "summary": state["summary"],
        "missing": state["missing"],
        "completed_at": state["completed_at"],
        "hypotheses": state["hypotheses"],
        "steps": [{key: item[key] for key in LESSON_STEP_FIELDS} for item in state["steps"]],
        "forbidden_moves": state["forbidden_moves"],
        "checkpoints": state["checkpoints"],
        "evidence": state["evidence"],
    }
