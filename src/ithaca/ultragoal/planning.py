"""Planning and the story set: ``set``, the story operations and ``run-story-validator``.

``set --phase planning`` starts a fresh pursuit or re-plans the current one; every
planning transition clears the objective lane (verdict, story verdicts, completion
evidence) and the review lane (artifact, dismissals, resolution, unconsumed nonces), so
nothing approved under an old plan survives into a new one. ``set --phase pursuing`` is
the structural half of the Entry Gate: a falsifiable objective, stories, all confirmed,
and a scope frozen from then on. While pursuing, a confirmed story is fenced: the agent
may add stories and change unconfirmed ones, never rewrite what the user approved.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ithaca.kernel import ids
from ithaca.kernel.errors import Conflict, Refused, invalid_field
from ithaca.ultragoal import (
    evidence,
    hostcap,
    progress,
    records,
    review_diff,
    stories,
    story_validators,
    views,
)
from ithaca.ultragoal.contract import SLOTS
from ithaca.ultragoal.operation import (
    Context,
    Row,
    clean_text,
    not_retired,
    require_phase,
    story_by_id,
)
from ithaca.validators import bindings

NON_GOAL_LINE = re.compile(r"^-\s+\S.*\|\s*decider:\s*\S.*$")
WORKING = frozenset({"planning", "pursuing"})
PLANNING = frozenset({"planning"})
TEXT_SLOTS = ("blocked_stop", "plan_path", "resume_summary")


# --- set --------------------------------------------------------------------------------


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


# --- stories ----------------------------------------------------------------------------


def set_stories(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    if command.get("single"):
        if "stories" in command:
            raise invalid_field("/stories", "NOT_WITH_SINGLE", "give stories or single, not both")
        return _set_single(ctx)
    if "stories" not in command:
        raise invalid_field("/stories", "REQUIRED", "set-stories needs stories (or single)")
    value = command["stories"]
    _planning_precheck(ctx, require_outcome=True)
    if isinstance(value, list) and not value:
        raise Refused("STORIES_EMPTY", "set-stories needs at least one story")
    parsed = stories.parse_list(value, "/stories")
    built = story_validators.build(ctx.read(), parsed, ctx.config["validators"])

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PLANNING, "PHASE_NOT_PLANNING")
        _require_outcome(row)
        session_id = row["session_id"]
        tx.execute("DELETE FROM ultragoal_story WHERE session_id = ?", (session_id,))
        tx.execute("DELETE FROM ultragoal_validator_run WHERE session_id = ?", (session_id,))
        stored = story_validators.bind(tx, ctx.blobs, session_id, built)
        seq = records.next_seq(tx)
        for position, story in enumerate(parsed):
            records.save_story(
                tx, session_id, _new_story(story, position, seq, stored.get(story["id"]))
            )
        ctx.commit(
            tx,
            row,
            "stories_set",
            {"ids": [s["id"] for s in parsed], "bindings": story_validators.event_entries(stored)},
        )
        story_validators.attach(tx, stored, seq)
        return _stories_answer(tx, row)

    return ctx.write(apply)


def _set_single(ctx: Context) -> dict[str, Any]:
    strict = bool(ctx.settings["strict_approval"])

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PLANNING, "PHASE_NOT_PLANNING")
        _require_outcome(row)
        if not row["verification_surface"].strip():
            raise Refused(
                "VERIFICATION_SURFACE_REQUIRED",
                "set-stories --single derives its story from the verification surface; set it",
            )
        if records.stories(tx, row["session_id"]):
            raise Refused("STORIES_EXIST", "set-stories --single only starts an empty story set")
        seq = records.next_seq(tx)
        story = _new_story(
            {
                "id": "S1",
                "story": row["outcome"],
                "acceptance_criteria": [row["verification_surface"]],
                "verification_surface": row["verification_surface"],
            },
            0,
            seq,
            None,
        )
        if not strict:
            story.update(status="confirmed", confirmed_relayed=True, ever_confirmed=True)
        records.save_story(tx, row["session_id"], story)
        ctx.commit(
            tx, row, "stories_set", {"ids": ["S1"], "single": True, "auto_confirmed": not strict}
        )
        return _stories_answer(tx, row)

    return ctx.write(apply)


def reorder_stories(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    order = command["order"]

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PLANNING, "PHASE_NOT_PLANNING")
        current = [story["id"] for story in records.stories(tx, row["session_id"])]
        missing = [story_id for story_id in current if story_id not in order]
        extra = sorted({story_id for story_id in order if story_id not in current})
        duplicate = sorted({story_id for story_id in order if order.count(story_id) > 1})
        if missing or extra or duplicate:
            raise Refused(
                "ORDER_NOT_PERMUTATION",
                "--order must list every story id exactly once",
                {"missing": missing, "extra": extra, "duplicate": duplicate},
            )
        for position, story_id in enumerate(order):
            tx.execute(
                "UPDATE ultragoal_story SET position = ? WHERE session_id = ? AND id = ?",
                (position, row["session_id"], story_id),
            )
        ctx.commit(tx, row, "stories_reordered", {"order": order})
        return _stories_answer(tx, row)

    return ctx.write(apply)


def confirm_stories(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    """``confirm-story <id>`` (``command['id']``) or ``confirm-all-stories``."""
    one = command.get("id")

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, WORKING, "PHASE_NOT_PLANNING")
        all_stories = records.stories(tx, row["session_id"])
        if one is not None:
            chosen = story_by_id(all_stories, one)
            not_retired(chosen)
            targets = [chosen] if chosen["status"] == "unconfirmed" else []
        else:
            targets = [story for story in all_stories if story["status"] == "unconfirmed"]
        _confirm_authority(ctx, row)
        relayed = ctx.actor != "user"
        for story in targets:
            story.update(status="confirmed", confirmed_relayed=relayed, ever_confirmed=True)
            records.save_story(tx, row["session_id"], story)
        if targets:
            ctx.commit(tx, row, "stories_confirmed", {"ids": [s["id"] for s in targets]})
        return {**_stories_answer(tx, row), "confirmed": [s["id"] for s in targets]}

    return ctx.write(apply)


def _confirm_authority(ctx: Context, row: Row) -> None:
    """The agent relays the user's approval only while planning, and only when the
    project does not require the user's own confirmation."""
    if ctx.actor == "user":
        return
    if ctx.settings["strict_approval"] or row["phase"] != "planning":
        why = "strict approval is on" if ctx.settings["strict_approval"] else "pursuit has begun"
        raise Refused(
            "AUTHORITY_USER_ONLY",
            f"only the user may confirm stories here ({why}): present"
            f" `ithaca ultragoal {ctx.operation.replace('_', '-')}` for them to run",
            {"operation": ctx.operation},
        )


def add_story(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    steering = _steering(command)
    parsed = stories.parse_story(command["story"], "/story")
    _planning_precheck(ctx, require_outcome=True, phases=WORKING)
    built = story_validators.build(ctx.read(), [parsed], ctx.config["validators"])

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, WORKING, "PHASE_NOT_PLANNING")
        _require_outcome(row)
        all_stories = records.stories(tx, row["session_id"])
        if any(story["id"] == parsed["id"] for story in all_stories):
            raise stories.duplicate(parsed["id"])
        stored = story_validators.bind(tx, ctx.blobs, row["session_id"], built)
        seq = records.next_seq(tx)
        position = 1 + max((story["position"] for story in all_stories), default=-1)
        story = _new_story(parsed, position, seq, stored.get(parsed["id"]))
        story.update(steering)
        records.save_story(tx, row["session_id"], story)
        ctx.commit(
            tx,
            row,
            "story_added",
            {"id": parsed["id"], "bindings": story_validators.event_entries(stored)},
        )
        story_validators.attach(tx, stored, seq)
        return _stories_answer(tx, row)

    return ctx.write(apply)


def revise_story(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    steering = _steering(command)
    story_id = command["id"]
    patch = stories.parse_patch(command["patch"], "/patch")
    _planning_precheck(ctx, phases=WORKING)
    reference = patch.get("validator")
    built = story_validators.build(
        ctx.read(), [{"id": story_id, "validator": reference}], ctx.config["validators"]
    )

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, WORKING, "PHASE_NOT_PLANNING")
        session_id = row["session_id"]
        all_stories = records.stories(tx, session_id)
        story = _fenced(row, story_by_id(all_stories, story_id))
        new_id = patch.get("id", story_id)
        if new_id != story_id and any(other["id"] == new_id for other in all_stories):
            raise stories.duplicate(new_id)
        tx.execute(
            "DELETE FROM ultragoal_story_verdict WHERE session_id = ? AND story_id = ?",
            (session_id, story_id),
        )
        if new_id != story_id:
            _rename(tx, session_id, story_id, new_id)
        seq = records.next_seq(tx)
        stored = story_validators.bind(
            tx, ctx.blobs, session_id, {new_id: built[story_id]} if story_id in built else {}
        )
        story.update({key: value for key, value in patch.items() if key != "validator"})
        if "validator" in patch:
            story["validator"] = stored.get(new_id)
        story.update(steering)
        story.update(status="unconfirmed", confirmed_relayed=False, changed_seq=seq)
        records.save_story(tx, session_id, story)
        ctx.commit(
            tx,
            row,
            "story_revised",
            {"id": story_id, "new_id": new_id, "bindings": story_validators.event_entries(stored)},
        )
        story_validators.attach(tx, stored, seq)
        return _stories_answer(tx, row)

    return ctx.write(apply)


def retire_story(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    steering = _steering(command)
    story_id = command["id"]

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, WORKING, "PHASE_NOT_PLANNING")
        story = _fenced(row, story_by_id(records.stories(tx, row["session_id"]), story_id))
        story.update(steering)
        story["status"] = "retired"
        records.save_story(tx, row["session_id"], story)
        ctx.commit(tx, row, "story_retired", {"id": story_id})
        return _stories_answer(tx, row)

    return ctx.write(apply)


def split_story(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    steering = _steering(command)
    story_id = command["id"]
    value = command["replacements"]
    if isinstance(value, list) and len(value) < 2:
        raise Refused("SPLIT_TOO_FEW", "a split needs at least two replacement stories")
    children = stories.parse_list(value, "/replacements")
    _planning_precheck(ctx, phases=WORKING)
    built = story_validators.build(ctx.read(), children, ctx.config["validators"])

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, WORKING, "PHASE_NOT_PLANNING")
        session_id = row["session_id"]
        all_stories = records.stories(tx, session_id)
        parent = _fenced(row, story_by_id(all_stories, story_id))
        taken = {story["id"] for story in all_stories}
        for child in children:
            if child["id"] in taken:
                raise stories.duplicate(child["id"])
        stored = story_validators.bind(tx, ctx.blobs, session_id, built)
        seq = records.next_seq(tx)
        parent.update(steering)
        parent.update(status="retired", split_into=[child["id"] for child in children])
        ordered: list[Row] = []
        for story in all_stories:
            ordered.append(parent if story["id"] == story_id else story)
            if story["id"] == story_id:
                for child in children:
                    made = _new_story(child, 0, seq, stored.get(child["id"]))
                    made.update(steering, split_from=story_id)
                    ordered.append(made)
        for position, story in enumerate(ordered):
            story["position"] = position
            records.save_story(tx, session_id, story)
        ctx.commit(
            tx,
            row,
            "story_split",
            {
                "id": story_id,
                "into": [child["id"] for child in children],
                "bindings": story_validators.event_entries(stored),
            },
        )
        story_validators.attach(tx, stored, seq)
        return _stories_answer(tx, row)

    return ctx.write(apply)


def run_story_validator(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    story_id = command["id"]
    conn = ctx.read()
    row = records.load(conn, ctx.session_id)
    if row is not None:
        require_phase(row, WORKING, "PHASE_NOT_PLANNING")
    story = story_by_id([] if row is None else records.stories(conn, ctx.session_id), story_id)
    not_retired(story)
    if not story.get("validator"):
        raise Refused(
            "STORY_NO_VALIDATOR", f"story {story_id} binds no validator", {"id": story_id}
        )
    binding_id = story["validator"]["binding_id"]
    result = bindings.run(
        conn,
        ctx.blobs,
        binding_id,
        command.get("observed"),
        ctx.config["validators"],
        project_root=ctx.project.root,
    )

    def apply(tx: sqlite3.Connection, current: Row) -> dict[str, Any]:
        require_phase(current, WORKING, "PHASE_NOT_PLANNING")
        now_story = story_by_id(records.stories(tx, ctx.session_id), story_id)
        if (
            now_story["status"] == "retired"
            or (now_story.get("validator") or {}).get("binding_id") != binding_id
            or now_story["changed_seq"] != story["changed_seq"]
        ):
            raise Conflict(
                "CONFLICT",
                f"story {story_id} changed while its validator ran; run it again",
                {"reason": "story_changed", "id": story_id},
            )
        seq = records.next_seq(tx)
        run = {
            "run_id": _run_id(),
            "pass": result["pass"] is True,
            "reason": result["reason"],
            "snapshot_sha256": result["snapshotHash"],
            "observed_sha256": result["observedDigest"],
            "at": ctx.now,
        }
        if result["cause"] is not None:
            run["cause"] = result["cause"]
        tx.execute(
            "INSERT INTO ultragoal_validator_run (run_id, session_id, story_id, binding_id,"
            " evidence_digest, pass, reason, cause, snapshot_sha256, observed_sha256, at, seq)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run["run_id"],
                ctx.session_id,
                story_id,
                binding_id,
                result["evidenceDigest"],
                1 if run["pass"] else 0,
                run["reason"],
                result["cause"],
                run["snapshot_sha256"],
                run["observed_sha256"],
                ctx.now,
                seq,
            ),
        )
        bindings.record_run(tx, binding_id, result)
        ctx.commit(
            tx,
            current,
            "validator_ran",
            {
                "id": story_id,
                "run_id": run["run_id"],
                "pass": run["pass"],
                "evidenceDigest": result["evidenceDigest"],
            },
        )
        return {**run, "diagnostics": result.get("diagnostics", [])}

    return ctx.write(apply)


# --- helpers ----------------------------------------------------------------------------


def _planning_precheck(
    ctx: Context, *, require_outcome: bool = False, phases: frozenset[str] = PLANNING
) -> None:
    """The phase checks, on a plain read, before slow work (snapshots) is done; the
    transaction checks again."""
    row = records.load(ctx.read(), ctx.session_id)
    if row is None:
        if require_outcome:
            _require_outcome(None)
        return
    require_phase(row, phases, "PHASE_NOT_PLANNING")
    if require_outcome:
        _require_outcome(row)


def _require_outcome(row: Row | None) -> None:
    if row is None or not row["outcome"].strip():
        raise Refused("OUTCOME_REQUIRED", "set the outcome (set --phase planning --outcome ...)")


def _steering(command: dict[str, Any]) -> dict[str, str]:
    blank = [key for key in ("evidence", "rationale") if not command.get(key, "").strip()]
    if blank:
        raise Refused(
            "STEERING_REASON_REQUIRED",
            "changing the story set needs --evidence and --rationale",
            {"missing": blank},
        )
    return {
        "steering_evidence": command["evidence"],
        "steering_rationale": command["rationale"],
    }


def _fenced(row: Row, story: Row) -> Row:
    not_retired(story)
    if story["status"] == "confirmed" and row["phase"] == "pursuing":
        raise Refused(
            "STORY_CONFIRMED_FENCE",
            f"story {story['id']} was approved; while pursuing it changes only by re-planning",
            {"id": story["id"]},
        )
    return story


def _rename(tx: sqlite3.Connection, session_id: str, old: str, new: str) -> None:
    tx.execute(
        "UPDATE ultragoal_story SET id = ? WHERE session_id = ? AND id = ?", (new, session_id, old)
    )
    tx.execute(
        "UPDATE ultragoal_validator_run SET story_id = ? WHERE session_id = ? AND story_id = ?",
        (new, session_id, old),
    )
    tx.execute(
        "UPDATE ultragoal_story SET split_from = ? WHERE session_id = ? AND split_from = ?",
        (new, session_id, old),
    )
    for story in records.stories(tx, session_id):
        if story["split_into"] and old in story["split_into"]:
            story["split_into"] = [new if item == old else item for item in story["split_into"]]
            records.save_story(tx, session_id, story)


def _new_story(
    parsed: dict[str, Any], position: int, seq: int, validator: dict[str, Any] | None
) -> Row:
    return {
        "id": parsed["id"],
        "position": position,
        "story": parsed["story"],
        "acceptance_criteria": parsed["acceptance_criteria"],
        "verification_surface": parsed["verification_surface"],
        "status": "unconfirmed",
        "steering_evidence": None,
        "steering_rationale": None,
        "split_from": None,
        "split_into": None,
        "validator": validator,
        "changed_seq": seq,
        "confirmed_relayed": False,
        "ever_confirmed": False,
    }


def _stories_answer(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
    return {
        "session_id": row["session_id"],
        "phase": row["phase"],
        "stories": [views.story(entry) for entry in records.stories(tx, row["session_id"])],
    }


def _run_id() -> str:
    return ids.new("ugrun")


def _diagnostic(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "severity": "warning", "message": message}
