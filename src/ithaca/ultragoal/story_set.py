"""The story set while planning: ``set-stories``, ``reorder-stories`` and confirming.

A pursuit is pursued only once the user approved every story, so while planning the agent
lays out the whole set (or derives the one story from the verification surface with
``--single``), orders it and relays the user's approval; with ``strict_approval`` on, or
once pursuit has begun, confirming is the user's. The story helpers every story
operation shares (a new story's row, the answer, the phase precheck) live here too.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ithaca.kernel.errors import Refused, invalid_field
from ithaca.ultragoal import records, stories, story_validators, views
from ithaca.ultragoal.operation import Context, Row, not_retired, require_phase, story_by_id
from ithaca.ultragoal.planning import PLANNING, WORKING


def set_stories(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    if command.get("single"):
        if "stories" in command:
            raise invalid_field("/stories", "NOT_WITH_SINGLE", "give stories or single, not both")
        return _set_single(ctx)
    if "stories" not in command:
        raise invalid_field("/stories", "REQUIRED", "set-stories needs stories (or single)")
    value = command["stories"]
    planning_precheck(ctx, require_outcome=True)
    if isinstance(value, list) and not value:
        raise Refused("STORIES_EMPTY", "set-stories needs at least one story")
    parsed = stories.parse_list(value, "/stories")
    built = story_validators.build(ctx.read(), parsed, ctx.config["validators"])

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PLANNING, "PHASE_NOT_PLANNING")
        check_outcome(row)
        session_id = row["session_id"]
        tx.execute("DELETE FROM ultragoal_story WHERE session_id = ?", (session_id,))
        tx.execute("DELETE FROM ultragoal_validator_run WHERE session_id = ?", (session_id,))
        stored = story_validators.bind(tx, ctx.blobs, session_id, built)
        seq = records.next_seq(tx)
        for position, story in enumerate(parsed):
            records.save_story(
                tx, session_id, new_story(story, position, seq, stored.get(story["id"]))
            )
        ctx.commit(
            tx,
            row,
            "stories_set",
            {"ids": [s["id"] for s in parsed], "bindings": story_validators.event_entries(stored)},
        )
        story_validators.attach(tx, stored, seq)
        return stories_answer(tx, row)

    return ctx.write(apply)


def _set_single(ctx: Context) -> dict[str, Any]:
    strict = bool(ctx.settings["strict_approval"])

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PLANNING, "PHASE_NOT_PLANNING")
        check_outcome(row)
        if not row["verification_surface"].strip():
            raise Refused(
                "VERIFICATION_SURFACE_REQUIRED",
                "set-stories --single derives its story from the verification surface; set it",
            )
        if records.stories(tx, row["session_id"]):
            raise Refused("STORIES_EXIST", "set-stories --single only starts an empty story set")
        seq = records.next_seq(tx)
        story = new_story(
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
        return stories_answer(tx, row)

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
        return stories_answer(tx, row)

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
        return {**stories_answer(tx, row), "confirmed": [s["id"] for s in targets]}

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


def planning_precheck(
    ctx: Context, *, require_outcome: bool = False, phases: frozenset[str] = PLANNING
) -> None:
    """The phase checks, on a plain read, before slow work (snapshots) is done; the
    transaction checks again."""
    row = records.load(ctx.read(), ctx.session_id)
    if row is None:
        if require_outcome:
            check_outcome(None)
        return
    require_phase(row, phases, "PHASE_NOT_PLANNING")
    if require_outcome:
        check_outcome(row)


def check_outcome(row: Row | None) -> None:
    """Refuse (``OUTCOME_REQUIRED``) until the pursuit has an outcome."""
    if row is None or not row["outcome"].strip():
        raise Refused("OUTCOME_REQUIRED", "set the outcome (set --phase planning --outcome ...)")


def new_story(
    parsed: dict[str, Any], position: int, seq: int, validator: dict[str, Any] | None
) -> Row:
    """The row of a story just parsed: unconfirmed, changed at ``seq``."""
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


def stories_answer(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
    """What every story operation answers: the pursuit's phase and its stories."""
    return {
        "session_id": row["session_id"],
        "phase": row["phase"],
        "stories": [views.story(entry) for entry in records.stories(tx, row["session_id"])],
    }
