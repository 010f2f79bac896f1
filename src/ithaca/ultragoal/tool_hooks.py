"""Ultragoal's PreToolUse side effects (docs/ultragoal.md, "Operations" and "In Claude
Code"): the agent's own ``Skill`` call seeds a pursuit; starting the reviewer subagent, in
any spelling the host resolves to it, claims one review dispatch and replaces the
reviewer's input with Ithaca's brief; and the reviewer subagent's own ``submit_review``
(the MCP tool, or ``ithaca ultragoal submit-review`` with the artifact on its line) mints
the one-use pass that the submission needs. The dispatcher runs these only once the
combined answer is not a deny, inside its one write transaction. Standard library and
kernel only.
"""

from __future__ import annotations

from ithaca.kernel import canon
from ithaca.kernel.gates import GateContext, Opinion
from ithaca.ultragoal import brief, lifecycle, prompts, records, reviewer_definition

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

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
    given = call.tool_input.get(field) if field is not None else None
    if field is not None and reviewer_definition.resolves_to_reviewer(given, reviewer):
        return _claim(conn, call, ctx, field)
    artifact = submitted_artifact(call, ctx)
    if artifact is not None and reviewer_definition.is_reviewer_caller(ctx):
        _mint_pass(conn, ctx, artifact[0])
    return None


def submitted_artifact(call: Call, ctx: GateContext) -> tuple[Any] | None:
    """The artifact a ``submit_review`` call submits, as a one-tuple (the artifact may be
    any JSON, ``null`` included), or None for any other call. On a shell line only an
    artifact written on the line itself (``--data '<json>'``) can be seen: standard input
    or text that is not JSON gives None."""
    server = ctx.config["protocols"]["mcp_server_name"]
    if call.tool == f"mcp__{server}__ultragoal":
        if call.tool_input.get("operation") == "submit_review" and "artifact" in call.tool_input:
            return (call.tool_input["artifact"],)
        return None
    for argv in shell_submissions(call):
        from ithaca.ultragoal.authority import option_value

        text = option_value(argv, "--data")
        if text is None or text == "-":
            return None
        from ithaca.kernel import lightjson

        try:
            return (lightjson.loads(text),)
        except ValueError:
            return None
    return None


def shell_submissions(call: Call) -> list[tuple[str, ...]]:
    """The ``ithaca ultragoal submit-review`` commands of a shell line."""
    if not call.ithaca_commands:
        return []
    from ithaca.kernel.authority import command_words

    found = []
    for argv in call.ithaca_commands:
        words = command_words(argv)
        if words[:1] == ["ultragoal"] and len(words) > 1 and words[1] == "submit-review":
            found.append(argv)
    return found


def _mint_pass(conn: sqlite3.Connection, ctx: GateContext, artifact: Any) -> None:
    """The pass for the reviewer's submission, in the hook's transaction; a failure here
    leaves the submission without one, and the service refuses it."""
    conn.execute("SAVEPOINT ultragoal_pass")
    try:
        lifecycle.mint_review_pass(
            conn,
            str(ctx.session_id),
            artifact_sha256=canon.digest(artifact),
            host=ctx.host,
            agent_id=str(ctx.payload["agent_id"]),
            agent_type=str(ctx.payload["agent_type"]),
            now=ctx.now,
        )
        conn.execute("RELEASE ultragoal_pass")
    except Exception:  # noqa: BLE001 - no pass: the submission is refused, never accepted
        conn.execute("ROLLBACK TO ultragoal_pass")
        conn.execute("RELEASE ultragoal_pass")


def _is_skill_invocation(call: Call) -> bool:
    skill = call.tool_input.get("skill")
    return (
        call.tool == "Skill"
        and isinstance(skill, str)
        and (skill == "ultragoal" or skill.endswith(":ultragoal"))
    )


def _claim(conn: sqlite3.Connection, call: Call, ctx: GateContext, field: str) -> Opinion:
    """Claim one review dispatch and start the reviewer, under its canonical name, on
    Ithaca's brief in place of the agent's prompt (``brief``); any refusal or failure, or
    a reviewer definition that is not the one Ithaca installed, denies the dispatch."""
    session_id = str(ctx.session_id)
    given = str(call.tool_input[field])
    reviewer = reviewer_definition.canonical(given, ctx.config["ultragoal"]["reviewer_agent_type"])
    wrong = reviewer_definition.problem(ctx, reviewer)
    if wrong is not None:
        return Opinion("deny", wrong[0], wrong[1], gate=NAME)
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
    assert ctx.project is not None
    text = brief.render(
        row,
        stories,
        session_id=session_id,
        dispatch_no=claim["dispatch_no"],
        reviewer=reviewer,
        note=brief.agent_note(call.tool_input, field),
        instructions=brief.changed_instructions(ctx.project.root, row.get("review_base")),
    )
    rewritten = brief.reviewer_input(call.tool_input, field, reviewer, text, claim["dispatch_no"])
    return Opinion("allow", updated_input=rewritten, gate=NAME)
