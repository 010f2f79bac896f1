"""Ultragoal's Stop gate (docs/ultragoal.md, "In Claude Code"; docs/hooks.md, "Failure
policy"): a pursuing agent may not simply stop.

While a session's pursuit is ``pursuing`` the gate blocks and hands the objective and the
current story back, unless the agent yields to the user (``<awaiting-user/>``), background
work is still running, or the no-progress budget runs out, in which case the pursuit is
paused (``budget_limited``) and blocked once more to say so. Progress is observed
(commits, story statuses, evidence, validator passes), never claimed. Every failure leans
toward "keep pursuing": an error evaluating a pursuing session blocks (up to
``stop_error_block_max`` times in a row), and nothing here can write ``complete``.

``decide`` is read-only; the writes happen in ``commit`` inside the dispatcher's one write
transaction, which re-reads the row and re-evaluates with the fingerprint ``decide`` took
(recomputing it when the row changed in between). Standard library and kernel only.
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

NAME = "ultragoal"
YIELD_TAG = "<awaiting-user/>"
# Codex hands the continuation to the model HTML-escaped, so a model may copy the tag so.
YIELD_TAGS = (YIELD_TAG, "&lt;awaiting-user/&gt;")
ERROR_FOLDER = os.path.join("ultragoal", "stop-errors")
BACKGROUND_RUNNING = frozenset({"running", "pending"})
CODEX_WAIT_LIMIT = 20  # Codex Stops granted to background work before it counts


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if ctx.project is None or ctx.session_id is None:
        return ABSTAIN
    return _stop_decide(ctx)


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    if ctx.project is None or ctx.conn is None or ctx.session_id is None:
        return None
    return _stop_commit(ctx.conn, ctx)


def _stop_decide(ctx: GateContext) -> Opinion:
    try:
        if ctx.conn is None:
            return ABSTAIN
        view = lifecycle.stop_view(ctx.conn, str(ctx.session_id))
        if view is None:
            return ABSTAIN
        root = _root(ctx)
        seen = progress.fingerprint(ctx.conn, root, str(ctx.session_id))
        moved = progress.what_moved(view["row"], seen, root)
        ctx.scratch[NAME] = {"version": view["row"]["version"], "seen": seen, "moved": moved}
        return judge(view, seen, moved, ctx)[0]
    except Exception as exc:  # noqa: BLE001 - any failure takes the error path
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
                moved = progress.what_moved(view["row"], seen, root)
            opinion, store = judge(view, seen, moved, ctx)
            store(conn)
        conn.execute("RELEASE ultragoal_stop")
    except Exception as exc:  # noqa: BLE001 - undo our writes, take the error path
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
    """The Stop decision for one row and a function that stores it on a connection inside
    the write transaction (on a copy of the row)."""
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
    if isinstance(message, str) and any(tag in message for tag in YIELD_TAGS):
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
    """Count the failure; block while the session is known to be pursuing and the
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
    if ctx.conn is None:
        return False
    try:
        found = ctx.conn.execute(
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
