"""Planning: ``set --phase planning`` and ``set --phase pursuing``.

``set --phase planning`` starts a fresh pursuit or re-plans the current one; every
planning transition clears the objective lane (verdict, story verdicts, completion
evidence) and the review lane (artifact, dismissals, resolution, unconsumed nonces), so
nothing approved under an old plan survives into a new one. ``set --phase pursuing`` is
the structural half of the Entry Gate: a falsifiable objective, stories, all confirmed,
and a scope frozen from then on. The story set itself changes through ``story_set``
(while planning) and ``story_steering`` (while planning or pursuing).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ithaca.kernel.errors import Refused
from ithaca.ultragoal import evidence, hostcap, progress, records, review_diff
from ithaca.ultragoal.contract import SLOTS
from ithaca.ultragoal.operation import Context, Row, clean_text, require_phase

NON_GOAL_LINE = re.compile(r"^-\s+\S.*\|\s*decider:\s*\S.*$")
WORKING = frozenset({"planning", "pursuing"})
PLANNING = frozenset({"planning"})
TEXT_SLOTS = ("blocked_stop", "plan_path", "resume_summary")


def set_phase(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    phase = command["phase"]
    if phase not in ("planning", "pursuing"):
        raise Refused(
            "PHASE_NOT_SETTABLE",
            "set takes --phase planning or pursuing; other phases have their own operations",
            {"phase": phase},
        )
    if "non_goals" in command:
        _check_non_goals(command["non_goals"])
    if "codex_goal_objective" in command and not command["codex_goal_objective"].strip():
        raise Refused(
            "CODEX_GOAL_OBJECTIVE_EMPTY",
            "--codex-goal-objective resolved to blank text; it would disarm the cross-check",
        )
    pairs = None
    if phase == "pursuing" and "completion_evidence" in command:
        pairs = evidence.record(command["completion_evidence"], ctx.roots, "/completion_evidence")
    base = review_diff.base_of(ctx.project.root) if phase == "pursuing" else None

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        if phase == "planning":
            diagnostics = enter_planning(ctx, tx, row, command)
        else:
            diagnostics = enter_pursuing(ctx, tx, row, command, pairs, base)
        return {"session_id": row["session_id"], "phase": row["phase"], "diagnostics": diagnostics}

    return ctx.write(apply)


def enter_planning(
    ctx: Context, tx: sqlite3.Connection, row: Row, command: dict[str, Any]
) -> list[dict[str, Any]]:
    phase = row["phase"]
    paused = phase in records.PAUSED_PHASES
    fresh = records.is_pristine(row) or phase == "complete" or paused
    if paused and not row["fresh_start_authorised"]:
        raise Refused(
            "PURSUIT_PAUSED",
            f"the pursuit is {phase}: the user resumes it (resume-pursuit) or re-invokes"
            " ultragoal to start fresh",
            {"phase": phase},
        )
    demoted: list[str] = []
    if fresh:
        if not ctx.seeded:
            records.delete(tx, row["session_id"])
            row.clear()
            row.update(
                records.pristine(ctx.session_id, ctx.now, ctx.settings["max_iterations_default"])
            )
            records.save(tx, row)
    else:
        _check_budget_raise(ctx, row, command)
        if any(slot in command and command[slot] != row[slot] for slot in SLOTS):
            demoted = _demote_confirmed(tx, row["session_id"])
    _apply_slots(row, command, content=True)
    _clear_lanes(tx, row)
    row.update(phase="planning", active=True, turn_started_at=None, blocked_reason="")
    diagnostics = []
    if "completion_evidence" in command:
        diagnostics.append(
            _diagnostic(
                "completion_evidence_ignored_in_planning",
                "completion evidence is recorded with set --phase pursuing; the list was ignored",
            )
        )
    if "codex_goal_objective" in command:
        diagnostics.append(
            _diagnostic(
                "codex_goal_objective_ignored_in_planning",
                "planning clears the Codex goal objective; arm it with set --phase pursuing",
            )
        )
    ctx.commit(tx, row, "phase_set", {"phase_to": "planning", "fresh": fresh, "demoted": demoted})
    return diagnostics


def enter_pursuing(
    ctx: Context,
    tx: sqlite3.Connection,
    row: Row,
    command: dict[str, Any],
    pairs: list[dict[str, str]] | None,
    base: str | None,
) -> list[dict[str, Any]]:
    """Arm the loop; the first entry records ``base``, the commit the review is checked
    against (``review_diff``)."""
    require_phase(row, WORKING, "PHASE_NOT_PLANNING")
    if not row["outcome"].strip() or not row["verification_surface"].strip():
        raise Refused(
            "OBJECTIVE_NOT_FALSIFIABLE",
            "pursuit needs a non-blank outcome and verification surface (set them while planning)",
        )
    all_stories = records.stories(tx, row["session_id"])
    live = [story for story in all_stories if story["status"] != "retired"]
    if not live:
        raise Refused("NO_STORIES", "pursuit needs at least one story (set-stories)")
    unconfirmed = [story["id"] for story in live if story["status"] != "confirmed"]
    if unconfirmed:
        raise Refused(
            "STORIES_UNCONFIRMED",
            "every story needs the user's approval before pursuit (confirm-all-stories)",
            {"ids": unconfirmed},
        )
    frozen: list[str] = [slot for slot in ("outcome", "verification_surface") if slot in command]
    frozen += [
        slot
        for slot in ("constraints", "boundaries", "non_goals")
        if slot in command and command[slot] != row[slot]
    ]
    if frozen:
        raise Refused(
            "SCOPE_FROZEN",
            "the approved scope cannot change while pursuing; re-plan with set --phase planning",
            {"slots": frozen},
        )
    _check_budget_raise(ctx, row, command)
    _apply_slots(row, command, content=False)
    if pairs is not None:
        row["completion_evidence"] = pairs
        add_evidence(tx, row["session_id"], pairs)
    if "codex_goal_objective" in command:
        row["codex_goal_objective"] = command["codex_goal_objective"]
    entering = row["phase"] == "planning"
    if entering:
        row.update(phase="pursuing", active=True, pursued_once=True, turn_started_at=ctx.now)
        if row["review_base"] is None:
            row["review_base"] = base
        progress.remember(row, progress.fingerprint(tx, ctx.project.root, row["session_id"]))
    ctx.commit(tx, row, "phase_set", {"phase_to": "pursuing", "entered": entering})
    cap = hostcap.stop_cap(ctx.project.root, ctx.env)
    if hostcap.below_budget(row["max_iterations"], cap):
        return [
            _diagnostic(
                "host_stop_cap_below_budget",
                f"Claude Code allows {cap} consecutive Stop blocks, fewer than max_iterations"
                f" + 2 = {row['max_iterations'] + 2}; run `ithaca install claude"
                f" --stop-hook-block-cap {row['max_iterations'] + 2}`",
            )
        ]
    return []


def _check_non_goals(text: str) -> None:
    bad = [line for line in text.splitlines() if line.strip() and not NON_GOAL_LINE.match(line)]
    if bad:
        raise Refused(
            "NON_GOALS_FORMAT",
            "each non-goal line reads '- <non-goal> | decider: <who decides>'",
            {"lines": bad},
        )


def _check_budget_raise(ctx: Context, row: Row, command: dict[str, Any]) -> None:
    """Once pursued, only the user may give the pursuit more budget."""
    if ctx.actor == "user" or not row["pursued_once"]:
        return
    raised = []
    if command.get("max_iterations", 0) > row["max_iterations"]:
        raised.append("max_iterations")
    wall = row["max_wall_minutes"]
    if wall is not None and command.get("max_wall_minutes", 0) > wall:
        raised.append("max_wall_minutes")
    if raised:
        raise Refused(
            "AUTHORITY_USER_ONLY",
            "only the user may raise a pursuit's budget once it has been pursued: present"
            " `ithaca ultragoal set ...` or `resume-pursuit` for them to run",
            {"raised": raised},
        )


def _apply_slots(row: Row, command: dict[str, Any], *, content: bool) -> None:
    for slot in SLOTS if content else ():
        if slot in command:
            row[slot] = command[slot]
    for slot in TEXT_SLOTS:
        if slot in command:
            row[slot] = clean_text(command[slot]) if slot == "resume_summary" else command[slot]
    for slot in ("max_iterations", "max_wall_minutes"):
        if slot in command:
            row[slot] = command[slot]


def _demote_confirmed(tx: sqlite3.Connection, session_id: str) -> list[str]:
    demoted = [
        str(found[0])
        for found in tx.execute(
            "SELECT id FROM ultragoal_story WHERE session_id = ? AND status = 'confirmed'"
            " ORDER BY position",
            (session_id,),
        ).fetchall()
    ]
    tx.execute(
        "UPDATE ultragoal_story SET status = 'unconfirmed', confirmed_relayed = 0"
        " WHERE session_id = ? AND status = 'confirmed'",
        (session_id,),
    )
    return demoted


def _clear_lanes(tx: sqlite3.Connection, row: Row) -> None:
    """What every planning transition resets in both lanes."""
    session_id = row["session_id"]
    row.update(
        objective_verdict="absent",
        completion_evidence=[],
        review_resolution=None,
        codex_goal_objective="",
    )
    for table in ("ultragoal_story_verdict", "ultragoal_dismissal", "ultragoal_review"):
        tx.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
    tx.execute(
        "UPDATE ultragoal_review_dispatch SET void = 1, nonce = NULL"
        " WHERE session_id = ? AND consumed_at IS NULL",
        (session_id,),
    )


def add_evidence(tx: sqlite3.Connection, session_id: str, pairs: list[dict[str, str]]) -> None:
    tx.executemany(
        "INSERT OR IGNORE INTO ultragoal_evidence (session_id, path, sha256) VALUES (?, ?, ?)",
        [(session_id, pair["path"], pair["sha256"]) for pair in pairs],
    )


def _diagnostic(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "severity": "warning", "message": message}
