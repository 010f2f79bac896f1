"""Ultragoal at session starts and prompts (docs/ultragoal.md, "In Claude Code").

A prompt the user typed as ``/ultragoal`` (``$ultragoal`` on Codex), or a slash command
the user expanded, seeds the session's pursuit; over an active one it only reminds the
agent that a pursuit exists. A pursuit the host cut short (its Stop-block cap) or a
session resumed or compacted gets its objective and current story handed back. Session
starts also reap idle pursuits and reconcile the pursuing markers. Every write runs in
the dispatcher's one write transaction. Standard library and kernel only.
"""

from __future__ import annotations

from ithaca.kernel.gates import GateContext, Opinion
from ithaca.ultragoal import lifecycle, prompts, records

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

    from ithaca.kernel.call import Call

NAME = "ultragoal"
REINJECT_SOURCES = frozenset({"resume", "compact", "clear"})


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    conn = ctx.conn
    if ctx.project is None or conn is None or ctx.session_id is None:
        return None
    if final.effect in ("deny", "block"):
        return None
    if ctx.event == "SessionStart":
        return _session_start(conn, ctx)
    return _prompt(conn, ctx)


def _session_start(conn: sqlite3.Connection, ctx: GateContext) -> Opinion | None:
    assert ctx.project is not None
    lifecycle.reap(conn, ctx.now)
    lifecycle.reconcile_markers(conn, ctx.project.runtime)
    source = ctx.payload.get("source")
    if source not in REINJECT_SOURCES:
        return None
    return _reinject(conn, ctx, str(source))


def _prompt(conn: sqlite3.Connection, ctx: GateContext) -> Opinion | None:
    session_id = str(ctx.session_id)
    prompt = typed_prompt(ctx.event, ctx.payload)
    contexts = []
    if prompt is not None and is_user_invocation(prompt, ctx.host):
        seeded = seed(conn, ctx, user_typed=True)
        if seeded is not None:
            contexts.append(seeded)
    row = records.load(conn, session_id)
    if row is not None and row["phase"] == "pursuing" and row["active"]:
        reinjected = _reinject(conn, ctx, "prompt")
        if reinjected is not None and reinjected.context:
            contexts.append(reinjected.context)
        else:
            conn.execute(
                "UPDATE ultragoal_pursuit SET turn_started_at = ? WHERE session_id = ?",
                (ctx.now, session_id),
            )
    if not contexts:
        return None
    return Opinion("allow", context="\n\n".join(contexts), gate=NAME)


def typed_prompt(event: str, payload: dict[str, Any]) -> str | None:
    """What the user typed: the prompt itself, or for a slash command the user expanded,
    ``/name args`` (a skill the model invokes arrives as a ``Skill`` tool call instead)."""
    if event == "UserPromptSubmit":
        prompt = payload.get("prompt")
        return prompt if isinstance(prompt, str) else None
    name, args = payload.get("command_name"), payload.get("command_args")
    if payload.get("expansion_type") != "slash_command" or not isinstance(name, str):
        return None
    return f"/{name} {args if isinstance(args, str) else ''}"


def is_user_invocation(prompt: str, host: str = "claude") -> bool:
    """Whether a prompt is a user-typed invocation: ``^\\s*/(\\S+:)?ultragoal\\b``, or
    ``^\\s*\\$ultragoal\\b`` on Codex; matched by hand because hooks do not load ``re``."""
    text = prompt.lstrip()
    sigil = "$" if host == "codex" else "/"
    if not text.startswith(sigil):
        return False
    parts = text[1:].split(None, 1)
    word = parts[0] if parts else ""
    starts = [0] if host == "codex" else [0] + [i + 1 for i, c in enumerate(word) if c == ":" and i]
    for start in starts:
        end = start + len("ultragoal")
        if word.startswith("ultragoal", start) and (
            end == len(word) or not (word[end].isalnum() or word[end] == "_")
        ):
            return True
    return False


def seed(conn: sqlite3.Connection, ctx: GateContext, *, user_typed: bool) -> str | None:
    """Seed the session's pursuit; the context to add when one is already active."""
    result = lifecycle.seed(
        conn,
        str(ctx.session_id),
        now=ctx.now,
        max_iterations=int(ctx.config["ultragoal"]["max_iterations_default"]),
        user_typed=user_typed,
    )
    if result["outcome"] != "active_pursuit_exists":
        return None
    return prompts.active_pursuit_exists(result["phase"], result["objective"])


def _reinject(conn: sqlite3.Connection, ctx: GateContext, cause: str) -> Opinion | None:
    """Hand a capped or resumed pursuit its objective and current story again."""
    view = lifecycle.stop_view(conn, str(ctx.session_id))
    if view is None:
        return None
    row = view["row"]
    if row["phase"] != "pursuing" or not row["active"]:
        return None
    if not row["host_capped"] and cause not in ("compact", "resume"):
        return None
    why = "the host ended the previous turn" if row["host_capped"] else f"session {cause}"
    text = prompts.resumed(why, row, view["current_story"])
    row.update(host_capped=False, stop_blocks_consecutive=0, turn_started_at=ctx.now)
    records.commit(
        conn, row, actor="hook", kind="reinjected", payload={"cause": cause}, now=ctx.now
    )
    return Opinion("allow", context=text, gate=NAME)
