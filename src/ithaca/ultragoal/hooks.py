"""Ultragoal inside host hooks (reference §6): the Stop gate, seeding, re-injection, the
review-dispatch claim and the reviewer-only operations.

While a session's pursuit is ``pursuing`` the agent may not simply stop: the Stop gate
blocks and hands the objective and the current story back, unless the agent yields to
the user (``<awaiting-user/>``), background work is still running, or the no-progress
budget runs out, in which case the pursuit is paused (``budget_limited``) and blocked
once more to say so. Progress is observed (commits, story statuses, evidence, validator
passes), never claimed. Every failure leans toward "keep pursuing": an error evaluating a
pursuing session blocks (up to ``stop_error_block_max`` times in a row) and nothing on
any path here can write ``complete``.

Decide is read-only; every write happens in ``commit`` inside the dispatcher's one write
transaction, which re-reads the row and re-evaluates with the fingerprint decide took
(recomputing it when the row changed in between). The module imports only the standard
library, the kernel and the stdlib-only ultragoal helpers, never the service.
"""

from __future__ import annotations

import os

from ithaca.kernel.gates import ABSTAIN, GateContext, Opinion
from ithaca.ultragoal import hostcap, lifecycle, marker, progress, prompts, records
from ithaca.ultragoal.ttl import elapsed_s

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

    from ithaca.kernel.call import Call

EVENTS = ("SessionStart", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse", "Stop")
NAME = "ultragoal"

YIELD_TAG = "<awaiting-user/>"
ERROR_FOLDER = os.path.join("ultragoal", "stop-errors")
REINJECT_SOURCES = frozenset({"resume", "compact", "clear"})
BACKGROUND_RUNNING = frozenset({"running", "pending"})
CODEX_WAIT_LIMIT = 20  # Codex Stops granted to background work before it counts
# Tools that start a subagent, and the input field naming its type: Claude Code's Task and
# Agent, Codex's spawn_agent.
DELEGATE_TOOLS = {"Task": "subagent_type", "Agent": "subagent_type", "spawn_agent": "agent_type"}

# --- entry points -------------------------------------------------------------------------


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if ctx.project is None or ctx.session_id is None:
        return ABSTAIN
    if ctx.event == "Stop":
        return _stop_decide(ctx)
    return ABSTAIN


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    """The writes of the hook call: Stop bookkeeping, seed, GC, re-injection, claim."""
    conn, session_id = ctx.conn, ctx.session_id
    if ctx.project is None or conn is None or session_id is None:
        return None
    if ctx.event == "Stop":
        return _stop_commit(conn, ctx)
    if final.effect in ("deny", "block"):
        return None
    if ctx.event == "SessionStart":
        return _session_start(conn, ctx)
    if ctx.event in ("UserPromptSubmit", "UserPromptExpansion"):
        return _prompt(conn, ctx)
    if ctx.event == "PreToolUse" and call is not None:
        return _tool(conn, call, ctx)
    return None


# --- Stop (§6.2, §6.6) --------------------------------------------------------------------


def _stop_decide(ctx: GateContext) -> Opinion:
    try:
        if ctx.conn is None:
            return ABSTAIN
        view = lifecycle.stop_view(ctx.conn, str(ctx.session_id))
        if view is None:
            return ABSTAIN
        root = _root(ctx)
        seen = progress.fingerprint(ctx.conn, root, str(ctx.session_id))
        moved = progress.progress(view["row"], seen, root)
        ctx.scratch[NAME] = {"version": view["row"]["version"], "seen": seen, "moved": moved}
        return judge(view, seen, moved, ctx)[0]
    except Exception as exc:  # noqa: BLE001 - §6.6: any failure takes the error path
        ctx.scratch[NAME] = {"failed": True}  # the commit then leaves the answer as it is
        return _stop_error(ctx, exc)


def _stop_commit(conn: sqlite3.Connection, ctx: GateContext) -> Opinion | None:
    """Re-evaluate under the write lock and store the outcome; say so when it differs."""
    decided = ctx.scratch.get(NAME)
    if decided is not None and decided.get("failed"):
        return None
    before = ctx.scratch.get("_gates", [])
    ours = next((op for op in before if op.gate == NAME), None)
    conn.execute("SAVEPOINT ultragoal_stop")
    try:
        session_id = str(ctx.session_id)
        view = lifecycle.stop_view(conn, session_id)
        if view is None:
            opinion = ABSTAIN
        else:
            root = _root(ctx)
            if decided is not None and decided["version"] == view["row"]["version"]:
                seen, moved = decided["seen"], decided["moved"]
            else:
                seen = progress.fingerprint(conn, root, session_id)
                moved = progress.progress(view["row"], seen, root)
            opinion, store = judge(view, seen, moved, ctx)
            store(conn)
        conn.execute("RELEASE ultragoal_stop")
    except Exception as exc:  # noqa: BLE001 - §6.6: undo our writes, take the error path
        conn.execute("ROLLBACK TO ultragoal_stop")
        conn.execute("RELEASE ultragoal_stop")
        opinion = _stop_error(ctx, exc)
        return None if _same(opinion, ours) else opinion
    _clear_errors(ctx)
    if opinion.effect == "abstain" or _same(opinion, ours):
        return None
    return opinion


def judge(
    view: dict[str, Any], seen: dict[str, Any], moved: list[str], ctx: GateContext
) -> tuple[Opinion, Any]:
    """The Stop decision for one row (reference §6.2 steps 2–10) and a function that
    stores it on a connection inside the write transaction (on a copy of the row)."""
    row = dict(view["row"])
    now = ctx.now
    session_id = row["session_id"]
    if view["pristine"]:
        return ABSTAIN, _nothing
    if row["phase"] != "pursuing" or not row["active"]:
        return Opinion("allow", gate=NAME), _heartbeat(session_id, now)
    payload: dict[str, Any] = ctx.payload
    if payload.get("stop_hook_active") is True:
        row["host_capped"] = False
    else:
        row["stop_blocks_consecutive"] = 0
    if row["turn_started_at"]:
        row["wall_used_s"] = float(row["wall_used_s"] or 0) + elapsed_s(row["turn_started_at"], now)

    def allow(kind: str, note: dict[str, Any]) -> tuple[Opinion, Any]:
        row["turn_started_at"] = None
        return Opinion("allow", gate=NAME), _transition(row, kind, note, now)

    running = _background_count(payload)
    if running and ctx.host != "codex":
        return allow("stop", {"decision": "allow", "cause": "background"})  # its wake re-fires
    waits = int(row["background_waits"] or 0)
    if running and waits < CODEX_WAIT_LIMIT:
        row["background_waits"] = waits + 1
        row["stop_blocks_consecutive"] = int(row["stop_blocks_consecutive"]) + 1
        row["turn_started_at"] = now
        note = {"decision": "block", "cause": "background", "waits": waits + 1}
        waiting = Opinion("block", "ULTRAGOAL_WAITING", prompts.WAIT, gate=NAME)
        return waiting, _transition(row, "stop", note, now)
    if not running:
        row["background_waits"] = 0
    message = payload.get("last_assistant_message")
    if isinstance(message, str) and YIELD_TAG in message:
        row["stop_blocks_consecutive"] = 0
        return allow("yield", {"decision": "allow", "cause": "awaiting_user"})

    limit_kind = None
    max_wall = row["max_wall_minutes"]
    if max_wall is not None and row["wall_used_s"] >= 60 * max_wall:
        limit_kind = "wall_clock"
    elif moved:
        row["iteration"] = 0
        row["progress_touched_at"] = now
    else:
        row["iteration"] = min(int(row["iteration"]) + 1, int(row["max_iterations"]))
        if row["iteration"] >= row["max_iterations"]:
            limit_kind = "iterations"
    progress.remember(row, seen)

    row["stop_blocks_consecutive"] = int(row["stop_blocks_consecutive"]) + 1
    if limit_kind is None:
        row["turn_started_at"] = now
        reason = prompts.continuation(row, view["current_story"])
    else:
        row["turn_started_at"] = None
        reason = prompts.limit(limit_kind)
    kind = "stop"
    cap = hostcap.stop_cap(ctx.project.root if ctx.project else "", os.environ)
    if ctx.host == "claude" and cap != 0 and row["stop_blocks_consecutive"] > cap:
        row["host_capped"] = True
        kind = "host_capped"
        reason = f"{reason}\n\n{prompts.HOST_CAP_NOTE}"
    opinion = Opinion("block", "ULTRAGOAL_PURSUING", reason, gate=NAME)
    note = {"decision": "block", "progress": moved, "iteration": row["iteration"]}
    if limit_kind is not None:
        return opinion, _limit(row, limit_kind, ctx)
    return opinion, _transition(row, kind, note, now)


def _background_count(payload: dict[str, Any]) -> int:
    """Background work still running: Claude Code lists it in ``background_tasks``. Codex
    sends no such list and offers no probe of its child threads, so there it counts 0
    unless an adapter supplies the same list (a documented degraded surface)."""
    tasks = payload.get("background_tasks")
    if not isinstance(tasks, list):
        return 0
    return sum(
        1 for task in tasks if isinstance(task, dict) and task.get("status") in BACKGROUND_RUNNING
    )


def _nothing(conn: sqlite3.Connection) -> None:
    return None


def _heartbeat(session_id: str, now: str) -> Any:
    def store(conn: sqlite3.Connection) -> None:
        conn.execute(
            "UPDATE ultragoal_pursuit SET last_touched_at = ? WHERE session_id = ?",
            (now, session_id),
        )

    return store


def _transition(row: dict[str, Any], kind: str, note: dict[str, Any], now: str) -> Any:
    def store(conn: sqlite3.Connection) -> None:
        records.commit(conn, row, actor="hook", kind=kind, payload=note, now=now)

    return store


def _limit(row: dict[str, Any], kind: str, ctx: GateContext) -> Any:
    def store(conn: sqlite3.Connection) -> None:
        lifecycle.limit_budget(conn, row, kind=kind, actor="system", now=ctx.now)
        if ctx.project is not None:
            marker.sync(ctx.project.runtime, row["session_id"], False)

    return store


def _stop_error(ctx: GateContext, exc: Exception) -> Opinion:
    """§6.6: count the failure; block while the session is known to be pursuing and the
    count is within ``stop_error_block_max``, else allow with a loud system message."""
    code = str(getattr(exc, "code", type(exc).__name__))
    session_id = str(ctx.session_id)
    count = 1
    pursuing = False
    if ctx.project is not None:
        runtime = ctx.project.runtime
        try:
            count = _count_error(runtime, session_id)
        except OSError:
            pass
        pursuing = marker.exists(runtime, session_id) or _read_as_pursuing(ctx)
    if pursuing and count <= int(ctx.config["ultragoal"]["stop_error_block_max"]):
        return Opinion("block", code, prompts.error_block(code), gate=NAME)
    return Opinion("allow", code, system_message=prompts.error_allow(count, code), gate=NAME)


def _read_as_pursuing(ctx: GateContext) -> bool:
    try:
        found = ctx.conn.execute(  # type: ignore[union-attr]
            "SELECT phase FROM ultragoal_pursuit WHERE session_id = ?", (ctx.session_id,)
        ).fetchone()
    except Exception:  # noqa: BLE001 - the marker is the fallback when this fails too
        return False
    return found is not None and found[0] == "pursuing"


def _count_error(runtime: str, session_id: str) -> int:
    folder = os.path.join(runtime, ERROR_FOLDER)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, session_id)
    try:
        with open(path, encoding="utf-8") as handle:
            count = int(handle.read().strip() or 0) + 1
    except (OSError, ValueError):
        count = 1
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"{count}\n")
    return count


def _clear_errors(ctx: GateContext) -> None:
    if ctx.project is None:
        return
    try:
        os.remove(os.path.join(ctx.project.runtime, ERROR_FOLDER, str(ctx.session_id)))
    except OSError:
        pass


def _same(opinion: Opinion, other: Opinion | None) -> bool:
    return other is not None and (opinion.effect, opinion.reason) == (other.effect, other.reason)


def _root(ctx: GateContext) -> str:
    return ctx.project.root if ctx.project is not None else ""


# --- SessionStart and UserPromptSubmit (§6.1, §6.4, §6.5) ---------------------------------


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
        seeded = _seed(conn, ctx, user_typed=True)
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


def _seed(conn: sqlite3.Connection, ctx: GateContext, *, user_typed: bool) -> str | None:
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
    """§6.4: hand a capped or resumed pursuit its objective and current story again."""
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


# --- PreToolUse (§5.5 claim, §6.1 seed, §6.3 reviewer-only) --------------------------------


def _tool(conn: sqlite3.Connection, call: Call, ctx: GateContext) -> Opinion | None:
    if _is_skill_invocation(call):
        _seed(conn, ctx, user_typed=False)
        return None
    field = DELEGATE_TOOLS.get(call.tool)
    reviewer = ctx.config["ultragoal"]["reviewer_agent_type"]
    if field is not None and call.tool_input.get(field) == reviewer:
        return _claim(conn, call, ctx)
    return None


def _is_skill_invocation(call: Call) -> bool:
    skill = call.tool_input.get("skill")
    return (
        call.tool == "Skill"
        and isinstance(skill, str)
        and (skill == "ultragoal" or skill.endswith(":ultragoal"))
    )


def _claim(conn: sqlite3.Connection, call: Call, ctx: GateContext) -> Opinion:
    """Claim one review dispatch and hand its nonce to the reviewer in its prompt (on
    Codex, which cannot rewrite the call, through ``review-ticket``); any refusal or
    failure denies the dispatch (§5.5)."""
    session_id = str(ctx.session_id)
    in_prompt = ctx.host != "codex"
    conn.execute("SAVEPOINT ultragoal_claim")
    try:
        claim = lifecycle.claim_review_dispatch(
            conn, session_id, now=ctx.now, nonce_in_prompt=in_prompt
        )
        conn.execute("RELEASE ultragoal_claim")
    except Exception:  # noqa: BLE001 - a failed claim denies the dispatch
        conn.execute("ROLLBACK TO ultragoal_claim")
        conn.execute("RELEASE ultragoal_claim")
        claim = {"allowed": False, "reason": "failure", "used": 0, "cap": 0}
        claim["code"] = lifecycle.CLAIM_CODES["failure"]
    if not claim["allowed"]:
        return Opinion("deny", claim["code"], prompts.claim_refused(claim), gate=NAME)
    if not in_prompt:
        return Opinion("allow", gate=NAME)
    prompt = call.tool_input.get("prompt")
    ticket = f"ULTRAGOAL_REVIEW session={session_id} nonce={claim['nonce']}"
    text = f"{prompt}\n\n{ticket}" if isinstance(prompt, str) and prompt else ticket
    return Opinion("allow", updated_input={**call.tool_input, "prompt": text}, gate=NAME)
