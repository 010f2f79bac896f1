"""The end-of-turn critic: a turn that changed the project ends only once Ithaca verified it.

A protocol with a ``require_verification`` constraint (the base ``verify-before-done``)
says that a turn which changed the project ends only once a verification passed on the
project as it then is. Nothing the agent ran or printed counts: the verification is a
run Ithaca made itself (``ithaca.verification``), found by the content digest of the
project. The critic follows the turn through the hooks:

- PreToolUse: the first mutating call of a turn captures what the turn began with
  (``verification.turn``): the project's content digest, the test runner's configuration
  (its bytes kept as blobs) and the last run before the turn, whose passing tests the
  turn must keep.
- Stop: the turn may end when the project's content is what it began with; when a run
  of the project as it is now passed (the agent's ``verify`` tool call, or a run the
  critic starts itself when the last one took less time than the host lets the hook
  live) and kept the turn's tests and runner configuration; or when the agent ends
  honestly with a line ``UNVERIFIED: <why>``, shown to the user as unverified. Else it
  blocks with what to do, at most ``verification.max_blocks`` times a turn (and below
  Claude Code's own cap); then the turn ends, journaled as unverified.

The verdict is ``critic_verdict``, loaded only for a Stop after a change. Each verdict is
journaled (``critic.verdict``), so ``ithaca log`` shows why a turn could or could not
end. Subagents share their parent's session, so their changes count toward its turn.
``[verification] require = false`` in the project's configuration, which the agent
cannot write, switches the critic off; ``ithaca status`` says so.
"""

from __future__ import annotations

from ithaca.kernel import gates, journal, lightjson
from ithaca.kernel.gates import ABSTAIN, GateContext, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ithaca.kernel.call import Call

EVENTS = ("PreToolUse", "Stop")
NAME = "critic"
PART = "critic"
CONSTRAINT = "require_verification"
DECLARATION = "UNVERIFIED:"

_SESSION = "SELECT current_event_id FROM protocol_sessions WHERE host_session_id = ?"


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if not _on(ctx):
        return ABSTAIN
    if ctx.event == "PreToolUse":
        _note_change(call, ctx)
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
    state, kind, payload, keep = planned
    if keep is not None:
        keep(ctx.conn, payload)
    seq = journal.append(ctx.conn, actor="hook", kind=kind, subject=ctx.session_id, payload=payload)
    gates.save_state(ctx.conn, PART, ctx.session_id, lightjson.dumps(state), seq)
    return None


def settings(ctx: GateContext, state: dict[str, Any]) -> dict[str, Any]:
    """The verification settings for this turn (``verification.turn.settings``)."""
    from ithaca.verification import turn

    return turn.settings(ctx.config["verification"], state)


# --- following the turn -----------------------------------------------------------------


def _note_change(call: Call | None, ctx: GateContext) -> None:
    if call is None or not call.mutating or call.tool_class == "ithaca":
        return
    event_id, state = _turn(ctx)
    if event_id is None or state["changed"]:
        return
    constraint = _constraint(ctx)
    if constraint is None:
        return
    from ithaca.verification import start

    assert ctx.project is not None and ctx.conn is not None
    state["constraint"] = constraint
    began, keep = start.capture(ctx.project, ctx.conn, settings(ctx, state))
    state.update(began, changed=True, verdict=None)
    payload = {"event": event_id, "tool": call.tool, "tree": began["turn_digest"]}
    ctx.scratch[NAME] = (state, "critic.changed", payload, keep)


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
    if state.get("event") != event_id:  # a new turn
        state = {"event": event_id, "changed": False, "blocks": 0}
    return event_id, state


def _constraint(ctx: GateContext) -> dict[str, Any] | None:
    """The first ``require_verification`` constraint of the bundle the protocols gate
    matched for this call, or None. The turn's state keeps it for Stop."""
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
