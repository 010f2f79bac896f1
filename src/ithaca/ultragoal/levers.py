"""Budget levers, the blocked report and adoption (docs/ultragoal.md, "Who may do what"
and "Operations").

The budget is what makes the Stop gate bearable, so its levers are not the agent's: only
the system (the Stop gate) or the user pauses a pursuit as ``budget_limited``, and only
the user resumes it. ``set-blocked`` is the agent's because only the agent sees a
blocker; it can only stop the loop, and leaving ``blocked`` takes the user. Adoption moves
another live session's pursuit into this one, on the user's explicit choice relayed by
the agent, and leaves a tombstone so the old session cannot keep writing to it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ithaca.kernel.errors import Refused
from ithaca.ultragoal import lifecycle, marker, progress, records, sessions
from ithaca.ultragoal.operation import Context, Row, clean_text, require_phase, require_user
from ithaca.ultragoal.ttl import LIVE_TTL_S, elapsed_s


def resume_pursuit(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    require_user(ctx, "resume a budget-limited pursuit")

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        if row["phase"] != "budget_limited":
            raise Refused(
                "RESUME_NOT_BUDGET_LIMITED",
                f"resume-pursuit recovers a budget_limited pursuit; this one is {row['phase']}",
                {"phase": row["phase"]},
            )
        if row["budget_kind"] == "wall_clock":
            row["wall_used_s"] = 0.0
        for budget in ("max_iterations", "max_wall_minutes"):
            if budget in command:
                row[budget] = command[budget]
        row.update(
            phase="pursuing",
            active=True,
            iteration=0,
            budget_limit_notified=False,
            budget_kind=None,
            host_capped=False,
            stop_blocks_consecutive=0,
            background_waits=0,
            fresh_start_authorised=False,
            turn_started_at=ctx.now,
        )
        progress.remember(row, progress.fingerprint(tx, ctx.project.root, ctx.session_id))
        ctx.commit(tx, row, "resumed")
        return _answer(row)

    return ctx.write(apply)


def set_budget_limited(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    if ctx.actor != "system":
        require_user(ctx, "pause the pursuit on its budget")
    kind = "user" if ctx.actor == "user" else "iterations"

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, {"pursuing"}, "PHASE_NOT_PURSUING")
        lifecycle.pause_for_budget(row, kind)
        ctx.commit(tx, row, "budget_limited", {"budget_kind": kind})
        return _answer(row)

    return ctx.write(apply)


def set_blocked(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    reason = clean_text(command.get("reason", "")).strip()
    if not reason:
        raise Refused("BLOCKED_REASON_REQUIRED", "set-blocked needs a --reason naming the blocker")

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, {"planning", "pursuing"}, "PHASE_NOT_PURSUING")
        row.update(phase="blocked", active=False, blocked_reason=reason, turn_started_at=None)
        ctx.commit(tx, row, "blocked", {"reason": reason})
        return {**_answer(row), "blocked_reason": reason}

    return ctx.write(apply)


def adopt(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    src = command["src"]
    dst = ctx.session_id
    if src == dst:
        raise Refused("ADOPT_SELF", "a session cannot adopt its own pursuit")
    sessions.check_id(src, "/src")
    src_phase: list[str] = []

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        if row["active"] and not records.is_pristine(row):
            raise Refused(
                "ADOPT_CURRENT_BUSY",
                "this session already pursues an objective; finish or abandon it first",
                {"phase": row["phase"]},
            )
        source = records.load(tx, src)
        if source is None:
            raise Refused("ADOPT_SOURCE_NOT_FOUND", f"session {src} has no pursuit", {"src": src})
        idle = elapsed_s(source["progress_touched_at"] or source["last_touched_at"], ctx.now)
        if not source["active"] or idle > LIVE_TTL_S:
            raise Refused(
                "ADOPT_SOURCE_NOT_LIVE",
                f"session {src}'s pursuit is not active and recently progressing",
                {"src": src, "phase": source["phase"], "idle_seconds": int(idle)},
            )
        if records.is_pristine(source):
            raise Refused("ADOPT_SOURCE_PRISTINE", f"session {src}'s pursuit has not started")
        src_phase.append(source["phase"])
        records.delete(tx, dst)
        tx.execute("UPDATE ultragoal_pursuit SET session_id = ? WHERE session_id = ?", (dst, src))
        records.delete_gate(tx, src)
        tx.execute(
            "INSERT INTO ultragoal_adoption (src_session_id, dst_session_id, at) VALUES (?, ?, ?)"
            " ON CONFLICT (src_session_id) DO UPDATE SET dst_session_id = excluded.dst_session_id,"
            " at = excluded.at",
            (src, dst, ctx.now),
        )
        adopted = records.load(tx, dst)
        assert adopted is not None
        adopted.update(
            progress_touched_at=ctx.now,
            codex_goal_objective="",
            host_capped=False,
            stop_blocks_consecutive=0,
        )
        row.clear()
        row.update(adopted)
        ctx.seeded = False
        ctx.commit(tx, row, "adopted", {"src": src, "dst": dst})
        return _answer(row)

    answer = ctx.write(apply)
    if src_phase == ["pursuing"]:
        marker.sync(ctx.project.runtime, src, False)
    return answer


def _answer(row: Row) -> dict[str, Any]:
    return {
        "session_id": row["session_id"],
        "phase": row["phase"],
        "active": row["active"],
        "iteration": row["iteration"],
        "max_iterations": row["max_iterations"],
        "max_wall_minutes": row["max_wall_minutes"],
        "budget_kind": row["budget_kind"],
    }
