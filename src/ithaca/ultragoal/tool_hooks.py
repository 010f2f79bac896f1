"""Ultragoal's PreToolUse side effects (docs/ultragoal.md, "Operations" and "In Claude
Code"): the agent's own ``Skill`` call seeds a pursuit, and starting the reviewer subagent
claims one review dispatch and replaces the reviewer's input with Ithaca's brief, whose
last line carries the nonce. The dispatcher runs these only once the combined answer is
not a deny, inside its one write transaction. Standard library and kernel only.
"""

from __future__ import annotations

from ithaca.kernel.gates import GateContext, Opinion
from ithaca.ultragoal import brief, lifecycle, prompts, records
from ithaca.ultragoal.authority import is_reviewer

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

    from ithaca.kernel.call import Call

NAME = "ultragoal"
# Tools that start a subagent, and the input field naming its type: Claude Code's Task and
# Agent, Codex's spawn_agent (``collaborationspawn_agent`` in its hooks under multi_agent_v2,
# Codex 0.169: the tool's namespace joined to its name).
DELEGATE_TOOLS = {
    "Task": "subagent_type",
    "Agent": "subagent_type",
    "spawn_agent": "agent_type",
    "collaborationspawn_agent": "agent_type",
}


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    conn = ctx.conn
    if ctx.project is None or conn is None or ctx.session_id is None or call is None:
        return None
    if final.effect in ("deny", "block"):
        return None
    return _tool(conn, call, ctx)


def _tool(conn: sqlite3.Connection, call: Call, ctx: GateContext) -> Opinion | None:
    if _is_skill_invocation(call):
        from ithaca.ultragoal.session_hooks import seed

        seed(conn, ctx, user_typed=False)
        return None
    field = DELEGATE_TOOLS.get(call.tool)
    reviewer = ctx.config["ultragoal"]["reviewer_agent_type"]
    if field is not None and is_reviewer(call.tool_input.get(field), reviewer):
        return _claim(conn, call, ctx, field)
    return None


def _is_skill_invocation(call: Call) -> bool:
    skill = call.tool_input.get("skill")
    return (
        call.tool == "Skill"
        and isinstance(skill, str)
        and (skill == "ultragoal" or skill.endswith(":ultragoal"))
    )


def _claim(conn: sqlite3.Connection, call: Call, ctx: GateContext, field: str) -> Opinion:
    """Claim one review dispatch and start the reviewer on Ithaca's brief in place of the
    agent's prompt (``brief``), its nonce on the last line; any refusal or failure denies
    the dispatch."""
    session_id = str(ctx.session_id)
    row, stories = None, []
    conn.execute("SAVEPOINT ultragoal_claim")
    try:
        claim = lifecycle.claim_review_dispatch(conn, session_id, now=ctx.now, nonce_in_prompt=True)
        row, stories = records.load(conn, session_id), records.stories(conn, session_id)
        conn.execute("RELEASE ultragoal_claim")
    except Exception:  # noqa: BLE001 - a failed claim denies the dispatch
        conn.execute("ROLLBACK TO ultragoal_claim")
        conn.execute("RELEASE ultragoal_claim")
        claim = {"allowed": False, "reason": "failure", "used": 0, "cap": 0}
        claim["code"] = lifecycle.CLAIM_CODES["failure"]
    if not claim["allowed"] or row is None:
        return Opinion("deny", claim["code"], prompts.claim_refused(claim), gate=NAME)
    reviewer = str(call.tool_input[field])
    text = brief.render(
        row,
        stories,
        session_id=session_id,
        nonce=claim["nonce"],
        reviewer=reviewer,
        note=brief.agent_note(call.tool_input, field),
    )
    rewritten = brief.reviewer_input(call.tool_input, field, reviewer, text, claim["dispatch_no"])
    return Opinion("allow", updated_input=rewritten, gate=NAME)
