"""Steering the story set: ``add-story``, ``revise-story``, ``retire-story`` and
``split-story``, while planning or pursuing.

Each change names its evidence and rationale, kept on the story it touched. While
pursuing, a confirmed story is fenced: the agent may add stories and change unconfirmed
ones, never rewrite what the user approved; a revised story needs approval again.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ithaca.kernel.errors import Refused
from ithaca.ultragoal import records, stories, story_set, story_validators
from ithaca.ultragoal.operation import Context, Row, not_retired, require_phase, story_by_id
from ithaca.ultragoal.planning import WORKING


def add_story(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    steering = _steering(command)
    parsed = stories.parse_story(command["story"], "/story")
    story_set.planning_precheck(ctx, require_outcome=True, phases=WORKING)
    built = story_validators.build(ctx.read(), [parsed], ctx.config["validators"])

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, WORKING, "PHASE_NOT_PLANNING")
        story_set.check_outcome(row)
        all_stories = records.stories(tx, row["session_id"])
        if any(story["id"] == parsed["id"] for story in all_stories):
            raise stories.duplicate(parsed["id"])
        stored = story_validators.bind(tx, ctx.blobs, row["session_id"], built)
        seq = records.next_seq(tx)
        position = 1 + max((story["position"] for story in all_stories), default=-1)
        story = story_set.new_story(parsed, position, seq, stored.get(parsed["id"]))
        story.update(steering)
        records.save_story(tx, row["session_id"], story)
        ctx.commit(
            tx,
            row,
            "story_added",
            {"id": parsed["id"], "bindings": story_validators.event_entries(stored)},
        )
        story_validators.attach(tx, stored, seq)
        return story_set.stories_answer(tx, row)

    return ctx.write(apply)


def revise_story(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    steering = _steering(command)
    story_id = command["id"]
    patch = stories.parse_patch(command["patch"], "/patch")
    story_set.planning_precheck(ctx, phases=WORKING)
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
        return story_set.stories_answer(tx, row)

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
        return story_set.stories_answer(tx, row)

    return ctx.write(apply)


def split_story(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    steering = _steering(command)
    story_id = command["id"]
    value = command["replacements"]
    if isinstance(value, list) and len(value) < 2:
        raise Refused("SPLIT_TOO_FEW", "a split needs at least two replacement stories")
    children = stories.parse_list(value, "/replacements")
    story_set.planning_precheck(ctx, phases=WORKING)
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
                    made = story_set.new_story(child, 0, seq, stored.get(child["id"]))
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
        return story_set.stories_answer(tx, row)

    return ctx.write(apply)


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
