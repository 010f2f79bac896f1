"""The end-of-turn critic: a turn that changed the project ends only after it verified.

A protocol with a ``require_verification`` constraint (the base ``verify-before-done``)
says that a turn which changed the project ends only once a verification ran green after
its last change. The critic follows the turn through the hooks and answers at Stop:

- PreToolUse: the first mutating call of a turn marks it changed and records the working
  tree as it was (``kernel.worktree``); a later mutating call marks it unverified again.
- PostToolUse: where the host reports a command's outcome (Claude Code 2.1.332 sends
  PostToolUse for a Bash command only when it exited 0), a verification command
  (``verification``) that ran to the end records the tree it passed on.
- Stop: the turn may end when it changed nothing, when the tree is the one a verification
  passed on, or when the agent ends honestly with a line ``UNVERIFIED: <why>`` (the
  ``completion-report`` protocol's form), which is shown to the user as unverified. Where
  the host does not report outcomes (Codex 0.169 sends the output text alone), the critic
  runs the first verification command itself, as a probe in the validator sandbox. Else
  it blocks with the exact command to run, at most ``verification.max_blocks`` times a
  turn (and below Claude Code's own cap); then the turn ends, journaled as unverified.

The verdict is ``critic_verdict``, loaded only for a Stop after a change. Each verdict is
journaled (``critic.verdict``), so ``ithaca log`` shows why a turn could
or could not end. Subagents share their parent's session, so their changes count toward
its turn. ``[verification] require = false`` in the project's configuration, which the
agent cannot write, switches the critic off; ``ithaca status`` says so.
"""

from __future__ import annotations

from ithaca.kernel import gates, journal, lightjson
from ithaca.kernel.gates import ABSTAIN, GateContext, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ithaca.kernel.call import Call

EVENTS = ("PreToolUse", "PostToolUse", "Stop")
NAME = "critic"
PART = "critic"
CONSTRAINT = "require_verification"
# Hosts whose PostToolUse for a shell command means it exited 0.
OUTCOME_HOSTS = ("claude",)
DECLARATION = "UNVERIFIED:"
SHELL_TOOLS = ("Bash",)

_SESSION = "SELECT current_event_id FROM protocol_sessions WHERE host_session_id = ?"


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if not _on(ctx):
        return ABSTAIN
    if ctx.event == "PreToolUse":
        _note_change(call, ctx)
    elif ctx.event == "PostToolUse":
        _note_verification(ctx)
    elif ctx.event == "Stop":
        event_id, state = _turn(ctx)
        if event_id is None or not state["changed"]:
            return ABSTAIN
        from ithaca.protocols import critic_verdict  # only a Stop after a change needs it

        return critic_verdict.verdict(ctx, event_id, state)
    return ABSTAIN


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    planned = ctx.scratch.get(NAME)
    if planned is None or ctx.conn is None:
        return None
    if ctx.event == "PreToolUse" and final.effect in ("deny", "block"):
        return None  # the call does not run
    state, kind, payload = planned
    seq = journal.append(ctx.conn, actor="hook", kind=kind, subject=ctx.session_id, payload=payload)
    gates.save_state(ctx.conn, PART, ctx.session_id, lightjson.dumps(state), seq)
    return None


# --- following the turn -----------------------------------------------------------------


def _note_change(call: Call | None, ctx: GateContext) -> None:
    if call is None or not call.mutating or call.tool_class == "ithaca":
        return
    event_id, state = _turn(ctx)
    if event_id is None or (state["changed"] and state["dirty"]):
        return
    constraint = _constraint(ctx)
    if constraint is None:
        return
    first = not state["changed"]
    state["constraint"] = constraint
    state["verdict"] = None
    if first:
        from ithaca.kernel import worktree

        assert ctx.project is not None
        state.update(changed=True, turn_tree=worktree.fingerprint(ctx.project.root))
    state["dirty"] = True
    payload = {"event": event_id, "first": first, "tool": call.tool}
    ctx.scratch[NAME] = (state, "critic.changed", payload)


def _note_verification(ctx: GateContext) -> None:
    if ctx.host not in OUTCOME_HOSTS or ctx.payload.get("tool_name") not in SHELL_TOOLS:
        return
    given = ctx.payload.get("tool_input")
    response = ctx.payload.get("tool_response")
    if not isinstance(given, dict) or given.get("run_in_background"):
        return
    if isinstance(response, dict) and response.get("interrupted"):
        return
    event_id, state = _turn(ctx)
    if event_id is None or not state["changed"]:
        return
    patterns = commands(ctx, state)
    from ithaca.protocols.verification import is_verification

    if ctx.classify is None or not patterns or not is_verification(ctx.classify(), patterns):
        return
    assert ctx.project is not None
    from ithaca.kernel import worktree

    state.update(dirty=False, blocks=0, green_tree=worktree.fingerprint(ctx.project.root))
    ctx.scratch[NAME] = (state, "critic.verified", {"event": event_id, "measured": "host"})


# --- what the critic reads ---------------------------------------------------------------


def _on(ctx: GateContext) -> bool:
    return bool(
        ctx.conn is not None
        and ctx.project is not None
        and ctx.session_id
        and ctx.config["verification"]["require"]
    )


def _turn(ctx: GateContext) -> tuple[str | None, dict[str, Any]]:
    """The session's current event (its turn) and the critic's state for that turn."""
    assert ctx.conn is not None
    session = ctx.conn.execute(_SESSION, (ctx.session_id,)).fetchone()
    event_id = session[0] if session else None
    text = gates.state_text(ctx.conn, PART, ctx.session_id)
    state = lightjson.loads(text) if text is not None else {}
    if state.get("event") != event_id:  # a new turn: only the last green tree carries over
        state = {
            "event": event_id,
            "changed": False,
            "dirty": False,
            "turn_tree": None,
            "green_tree": state.get("green_tree"),
            "blocks": 0,
        }
    return event_id, state


def _constraint(ctx: GateContext) -> dict[str, Any] | None:
    """The first ``require_verification`` constraint of the bundle the protocols gate
    matched for this call, or None. The turn's state keeps it for PostToolUse and Stop."""
    assert ctx.conn is not None
    ids = ctx.scratch.get("protocols", {}).get("matched") or []
    found: dict[str, Any] | None = None
    if ids:
        from ithaca.protocols import records

        seeds = records.seed_records(ctx.conn)
        stored = records.read_many(ctx.conn, list(ids))
        for protocol_id in ids:
            record = stored.get(protocol_id)
            if record is None or not record["enabled"]:
                continue
            for constraint in records.effective_constraints(record, seeds):
                if constraint.get("kind") != CONSTRAINT:
                    continue
                if found is None or (constraint.get("commands") and not found.get("commands")):
                    found = constraint  # one that names its commands outranks a bare one
    return found


def commands(ctx: GateContext, state: dict[str, Any]) -> list[str]:
    """The verification commands that count for this turn, in order."""
    from ithaca.protocols.verification import commands

    assert ctx.project is not None
    constraint = state.get("constraint") or {}
    configured = ctx.config["verification"]["commands"]
    return commands(ctx.project.root, configured, constraint.get("commands", ()))
