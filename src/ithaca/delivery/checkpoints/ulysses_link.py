"""What an incident's diagnosis shows of a linked Ulysses debugging session.

Delivery reads the session through the Ulysses face, never changes it: the machine state,
reduced to what the diagnosis blocks print: hypotheses with their falsification,
checkpoints and step results, and the terminal status. Times are left out on purpose:
the diagnosis is a digested body, and digested bodies hold no wall-clock time.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.errors import Corrupt, NotFound
from ithaca.ulysses import load_session

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


def read_session(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    """The diagnosis view of Ulysses session ``session_id``, or None if there is none."""
    try:
        state = load_session(conn, session_id)
    except NotFound:
        return None
    except Corrupt as exc:
        raise Corrupt(
            "STATE_UNREADABLE",
            f"Ulysses session {session_id} is not readable JSON; run `ithaca doctor`",
            {"session_id": session_id},
        ) from exc
    steps = list(state.get("steps") or [])
    if state.get("active_step"):
        steps.append({**state["active_step"], "result": "open"})
    return {
        "session_id": session_id,
        "status": state.get("status"),
        "summary": state.get("summary"),
        "hypotheses": [
            {
                "seq": item.get("seq"),
                "hypothesis": item.get("hypothesis", ""),
                "falsification": item.get("falsification", ""),
            }
            for item in state.get("hypotheses") or []
        ],
        "checkpoints": [
            {"label": point.get("label"), "git_head": point.get("git_head")}
            for point in state.get("checkpoints") or []
        ],
        "steps": [
            {
                "step_id": step.get("step_id"),
                "primary": step.get("primary", ""),
                "recovery": step.get("recovery", ""),
                "result": step.get("result"),
            }
            for step in steps
        ],
    }
