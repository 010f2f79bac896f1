"""Ultragoal's gate: which hook calls concern a pursuit, and the state predicates.

Most tool calls and prompts have nothing to do with Ultragoal, and the hooks run on every
one of them, so this front decides relevance from the call alone (a prompt's: its text and
whether the session pursues a goal) and loads only the logic a call needs: the Stop gate
(``stop_gate``), seeding and re-injection at session starts and prompts
(``session_hooks``), the Skill seed, the review-dispatch claim and the reviewer's
submission pass (``tool_hooks``), and the
Bash guard for Ultragoal's own operations (``authority``). It imports only the
standard library and the kernel.
"""

from __future__ import annotations

from ithaca.kernel import gates
from ithaca.kernel.call import command_text
from ithaca.kernel.gates import ABSTAIN, GateContext, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

    from ithaca.kernel.call import Call

EVENTS = ("SessionStart", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse", "Stop")
# Tools whose calls can seed a pursuit (Skill) or dispatch its reviewer (Task, Agent, and
# Codex's spawn_agent).
RELEVANT_TOOLS = frozenset({"Skill", "Task", "Agent", "spawn_agent", "collaborationspawn_agent"})
# Tools that hand a running agent more words (Codex's multi-agent tools, v1 and v2, and
# Claude Code's SendMessage): refused while a review dispatch is open, whatever agent they
# name (an agent id names the reviewer as well as its task name does), so the reviewer's
# only instructions are Ithaca's brief.
MESSAGE_TOOLS = frozenset(
    {
        "send_message",
        "followup_task",
        "send_input",
        "resume_agent",
        "collaborationsend_message",
        "collaborationfollowup_task",
        "SendMessage",
    }
)
_PURSUING = (
    "SELECT 1 FROM ultragoal_pursuit WHERE session_id = ? AND phase = 'pursuing' AND active = 1"
)
_OPEN_DISPATCH = (
    "SELECT 1 FROM ultragoal_review_dispatch WHERE session_id = ? AND consumed_at IS NULL"
    " AND void = 0 LIMIT 1"
)


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if ctx.event == "Stop":
        from ithaca.ultragoal import stop_gate

        return stop_gate.decide(call, ctx)
    if ctx.event != "PreToolUse" or not _concerns_ultragoal(call, ctx):
        return ABSTAIN
    assert call is not None
    if call.tool in MESSAGE_TOOLS:
        if ctx.conn is None or not ctx.conn.execute(_OPEN_DISPATCH, (ctx.session_id,)).fetchone():
            return ABSTAIN
        return Opinion(
            "deny",
            "REVIEW_BRIEF_SEALED",
            "Ultragoal: a review is under way, and the reviewer works from Ithaca's brief"
            " alone: no agent gets more words from you until its review is submitted. Its"
            " findings reach you through get-review-result.",
            gate="ultragoal",
        )
    if call.tool in RELEVANT_TOOLS or not (ctx.project and ctx.session_id):
        return ABSTAIN  # the seed and the claim happen in commit
    from ithaca.ultragoal import authority  # the Bash guard and the reviewer-only check

    return authority.tool_opinion(call, ctx)


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    if ctx.event == "Stop":
        from ithaca.ultragoal import stop_gate

        return stop_gate.commit(call, final, ctx)
    if ctx.event != "PreToolUse":
        if ctx.event != "SessionStart" and not _prompt_concerns_ultragoal(ctx):
            return None
        from ithaca.ultragoal import session_hooks

        return session_hooks.commit(call, final, ctx)
    if call is None or not (call.tool in RELEVANT_TOOLS or _submits_review(call, ctx)):
        return None  # only a Skill call (seed), the reviewer's start (claim) and the
        # reviewer's submission (its pass) write
    from ithaca.ultragoal import tool_hooks

    return tool_hooks.commit(call, final, ctx)


def is_active(conn: sqlite3.Connection | None, scope: str | None) -> bool:
    """State predicate ``ultragoal.active``: the session's pursuit is planning or pursuing."""
    row = _state(conn, scope)
    return row is not None and bool(row[0])


def is_pursuing(conn: sqlite3.Connection | None, scope: str | None) -> bool:
    """State predicate ``ultragoal.pursuing``."""
    row = _state(conn, scope)
    return row is not None and row[1] == "pursuing"


def _state(conn: sqlite3.Connection | None, scope: str | None) -> tuple[object, object] | None:
    if conn is None or scope is None:
        return None
    row = gates.state_fields(conn, "ultragoal", scope, ("active", "phase"))
    return None if row is None else (row[0], row[1])


def _prompt_concerns_ultragoal(ctx: GateContext) -> bool:
    """Whether a prompt can seed a pursuit (its text names Ultragoal) or must remind the
    session's active one: most prompts do neither, and skip the pursuit's modules."""
    payload = ctx.payload
    typed = (payload.get("prompt"), payload.get("command_name"), payload.get("command_args"))
    if any(isinstance(text, str) and "ultragoal" in text for text in typed):
        return True
    if ctx.conn is None or ctx.session_id is None:
        return False
    return ctx.conn.execute(_PURSUING, (ctx.session_id,)).fetchone() is not None


def _submits_review(call: Call, ctx: GateContext) -> bool:
    """Whether a call submits a review (the MCP tool's submit_review, or the command on a
    shell line), judged cheaply; ``tool_hooks`` reads it properly."""
    if call.tool == f"mcp__{ctx.config['protocols']['mcp_server_name']}__ultragoal":
        return call.tool_input.get("operation") == "submit_review"
    return bool(call.ithaca_commands) and "submit-review" in command_text(call)


def _concerns_ultragoal(call: Call | None, ctx: GateContext) -> bool:
    """Whether a PreToolUse call can touch a pursuit, judged from the call alone."""
    if call is None:
        return False
    if call.tool in RELEVANT_TOOLS:
        return True
    if call.tool in MESSAGE_TOOLS:
        return True
    if call.tool == f"mcp__{ctx.config['protocols']['mcp_server_name']}__ultragoal":
        return True
    if call.unparseable and "ultragoal" in command_text(call):
        return True
    if not call.ithaca_commands:
        return False
    from ithaca.kernel.authority import command_words

    return any(command_words(argv)[:1] == ["ultragoal"] for argv in call.ithaca_commands)
