"""The Ulysses protocol inside host hooks (docs/ulysses.md, "Hooks").

Reflection is binding only if the agent cannot keep editing while it is due, so on
PreToolUse this gate denies mutating calls in REFLECT and, unless the project opts out,
before a plan is recorded (IDLE); PRIMARY and RECOVERY are the agent's to act in. It also
keeps subagents from driving the protocol: only the coordinator calls ``ulysses``. On
SessionStart it reminds a fresh or compacted agent that a session is active.

The gate reads the kernel's ``gate_state`` row that every phase-changing Ulysses
transaction writes, with SQLite's ``json_extract`` so that no JSON parser is imported,
and never writes. It imports only the standard library and the kernel.
"""

from __future__ import annotations

from ithaca.kernel import gates
from ithaca.kernel.gates import ABSTAIN, GateContext, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

    from ithaca.kernel.call import Call

EVENTS = ("SessionStart", "PreToolUse")
NAME = "ulysses"

# Phase -> (S, the operation the protocol waits for).
PHASES = {
    "IDLE": (0, "plan"),
    "PRIMARY": (1, "outcome"),
    "RECOVERY": (2, "outcome"),
    "REFLECT": (2, "reflect"),
}
# What a subagent may still ask the protocol: reading its state.
SUBAGENT_OPERATIONS = frozenset({"status", "resume"})

REFLECT_REQUIRED = (
    "Ulysses: reflection required (S=2, no active step). Inspect read-only, then call "
    "ulysses reflect with a hypothesis and its falsification."
)
PLAN_REQUIRED = "Ulysses: record a plan (primary, recovery, validators) before changing anything."
SUBAGENT_NOT_COORDINATOR = (
    "Ulysses: only the coordinating agent drives the protocol. Return your evidence to it; "
    "a subagent may call ulysses status or resume only."
)
STATE_UNREADABLE = (
    "Ulysses: the state database could not be read, so mutating calls are blocked; "
    "run `ithaca doctor`."
)


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if ctx.project is None:
        return ABSTAIN
    if ctx.event == "SessionStart":
        return _breadcrumb(ctx)
    if call is None:
        return ABSTAIN
    settings = ctx.config["ulysses"]
    operation = protocol_operation(call, ctx.config["protocols"]["mcp_server_name"])
    if operation is not None:
        if operation not in SUBAGENT_OPERATIONS and is_subagent(ctx.payload, settings):
            return Opinion("deny", "SUBAGENT_NOT_COORDINATOR", SUBAGENT_NOT_COORDINATOR)
        return ABSTAIN
    if not is_mutating(call, settings):
        return ABSTAIN
    try:
        state = read_state(ctx.conn)
    except Exception:  # noqa: BLE001 - any failure to read state blocks mutation only
        return Opinion("deny", "STATE_UNREADABLE", STATE_UNREADABLE)
    if state is None:
        return ABSTAIN
    phase = state[1]
    if phase == "REFLECT":
        return Opinion("deny", "REFLECT_REQUIRED", REFLECT_REQUIRED)
    if phase == "IDLE" and settings["require_plan_for_mutation"]:
        return Opinion("deny", "PLAN_REQUIRED", PLAN_REQUIRED)
    return ABSTAIN


def read_state(conn: sqlite3.Connection | None) -> tuple[str, str] | None:
    """``(session_id, phase)`` of the active session, or None when there is none."""
    if conn is None:
        return None
    row = gates.state_fields(conn, "ulysses", "project", ("session_id", "phase"))
    if row is None:
        return None
    if row[1] not in PHASES or not isinstance(row[0], str):
        raise ValueError(f"unexpected ulysses gate record {row!r}")
    return row[0], row[1]


def protocol_operation(call: Call, server_name: str) -> str | None:
    """The Ulysses operation this call asks for (MCP tool or ``ithaca ulysses``), else None."""
    if call.tool == f"mcp__{server_name}__ulysses":
        operation = call.tool_input.get("operation")
        return operation if isinstance(operation, str) else ""
    if not call.ithaca_commands:
        return None
    from ithaca.kernel.authority import command_words

    for argv in call.ithaca_commands:
        words = command_words(argv)
        if words and words[0] == "ulysses":
            return words[1] if len(words) > 1 else ""
    return None


def is_subagent(payload: dict[str, Any], settings: dict[str, Any]) -> bool:
    """Claude Code marks a subagent's calls with ``agent_id`` (and its ``agent_type``)."""
    agent_id = payload.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id:
        return False
    return payload.get("agent_type") not in settings["coordinator_agent_types"]


def is_mutating(call: Call, settings: dict[str, Any]) -> bool:
    """Mutating as docs/ulysses.md, "Hooks" defines it: edits always, shell unless read-only,
    listed tools, nothing else."""
    if call.tool in settings["mutating_tools"]:
        return True
    if call.tool_class == "edit":
        return True
    return call.tool_class == "shell" and call.mutating


def is_active(conn: sqlite3.Connection | None, scope: str | None) -> bool:
    """State predicate ``ulysses.active``."""
    return read_state(conn) is not None


def is_step_active(conn: sqlite3.Connection | None, scope: str | None) -> bool:
    """State predicate ``ulysses.step_active``: a planned step awaits its outcome."""
    state = read_state(conn)
    return state is not None and state[1] in ("PRIMARY", "RECOVERY")


def _breadcrumb(ctx: GateContext) -> Opinion:
    try:
        state = read_state(ctx.conn)
    except Exception:  # noqa: BLE001 - a reminder is never worth failing a session start
        return ABSTAIN
    if state is None:
        return ABSTAIN
    session_id, phase = state
    level, action = PHASES[phase]
    return Opinion(
        "allow",
        context=(
            f"Ithaca: Ulysses session {session_id} is active (phase {phase}, S={level}; "
            f"next: {action}). Call the ulysses tool with operation resume to reload its "
            "trace before acting."
        ),
    )
