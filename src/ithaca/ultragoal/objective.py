"""The objective lane and completion: story verdicts, ``set-verdict``, ``request-complete``.

Stories advance one at a time: only the current story (the first confirmed one without
``APPROVE``) can be approved, only with evidence, and a story bound to a validator only
after a passing run since its last change. ``request-complete`` evaluates the nine gates
(``completion``) over files hashed before its transaction; if the pursuit changed while
they were hashed it reads and hashes again (three tries, then ``CONFLICT``). Every failed
step leaves some gate input missing, so no failure can end in ``complete``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict, InvalidInput, Refused
from ithaca.ultragoal import codex_goal, completion, evidence, records, review_diff, views
from ithaca.ultragoal.operation import (
    Context,
    Row,
    check_not_adopted,
    require_phase,
    story_by_id,
)
from ithaca.ultragoal.planning import add_evidence, enter_pursuing

STORY_VERDICTS = ("APPROVE", "REQUEST_CHANGES")
OBJECTIVE_VERDICTS = ("APPROVE", "REQUEST_CHANGES", "COMMENT", "absent")
PURSUING = frozenset({"pursuing"})
COMPLETE_TRIES = 3


def record_story_verdict(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    verdict = command["verdict"]
    if verdict not in STORY_VERDICTS or not command["verifier"].strip():
        raise InvalidInput(
            "VERDICT_INVALID",
            "a story verdict is APPROVE or REQUEST_CHANGES, with a non-blank verifier",
            {"verdict": verdict},
        )
    story_id = command["id"]
    conn = ctx.read()
    row = records.load(conn, ctx.session_id)
    if row is not None:
        _check_story_verdict(conn, row, story_id, verdict, command["evidence_refs"])
    pairs = evidence.record(command["evidence_refs"], ctx.roots, "/evidence_refs")

    def apply(tx: sqlite3.Connection, current: Row) -> dict[str, Any]:
        run_id = _check_story_verdict(tx, current, story_id, verdict, pairs)
        seq = records.next_seq(tx)
        tx.execute(
            "INSERT INTO ultragoal_story_verdict (session_id, story_id, verdict, evidence,"
            " verifier, validator_run_id, at, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (session_id, story_id) DO UPDATE SET verdict = excluded.verdict,"
            " evidence = excluded.evidence, verifier = excluded.verifier,"
            " validator_run_id = excluded.validator_run_id, at = excluded.at, seq = excluded.seq",
            (
                ctx.session_id,
                story_id,
                verdict,
                canon.canonical_text(pairs),
                command["verifier"],
                run_id,
                ctx.now,
                seq,
            ),
        )
        add_evidence(tx, ctx.session_id, pairs)
        ctx.commit(
            tx,
            current,
            "story_verdict_recorded",
            {"id": story_id, "verdict": verdict, "evidence": pairs, "validator_run_id": run_id},
        )
        all_stories = records.stories(tx, ctx.session_id)
        following = records.current_story(all_stories, records.verdicts(tx, ctx.session_id))
        return {
            "session_id": ctx.session_id,
            "id": story_id,
            "verdict": verdict,
            "evidence": pairs,
            "validator_run_id": run_id,
            "current_story": None if following is None else views.story(following),
        }

    return ctx.write(apply)


def _check_story_verdict(
    conn: sqlite3.Connection, row: Row, story_id: str, verdict: str, refs: list[Any]
) -> str | None:
    """The refusals of ``record-story-verdict``; returns the validator run it relies on."""
    require_phase(row, PURSUING, "PHASE_NOT_PURSUING")
    all_stories = records.stories(conn, row["session_id"])
    story = story_by_id(all_stories, story_id)
    if story["status"] == "retired":
        raise Refused("STORY_RETIRED", f"story {story_id} is retired", {"id": story_id})
    if story["status"] != "confirmed":
        raise Refused("STORY_UNCONFIRMED", f"story {story_id} is not confirmed", {"id": story_id})
    run_id = records.passing_run(conn, row["session_id"], story)
    if verdict != "APPROVE":
        return run_id
    by_story = records.verdicts(conn, row["session_id"])
    current = records.current_story(all_stories, by_story)
    already = by_story.get(story_id, {}).get("verdict") == "APPROVE"
    if not already and (current is None or current["id"] != story_id):
        raise Refused(
            "STORY_NOT_CURRENT",
            f"story {story_id} is not the current story"
            + ("" if current is None else f" ({current['id']} is)"),
            {"id": story_id, "current": None if current is None else current["id"]},
        )
    if not refs:
        raise Refused("EVIDENCE_REQUIRED", "an APPROVE verdict needs evidence_refs")
    if not story.get("validator"):
        raise Refused(
            "STORY_VALIDATOR_REQUIRED",
            f"story {story_id} has no validator: an APPROVE needs a passing run of a validator"
            " bound to the story (a probe cell measures for itself), not only files the"
            " pursuit wrote; bind one with revise-story --data '{\"validator\": …}', then"
            " run-story-validator",
            {"id": story_id},
        )
    if run_id is None:
        raise Refused(
            "STORY_VALIDATOR_NOT_PASSED",
            f"story {story_id}'s validator has not passed since its last change"
            " (run-story-validator)",
            {"id": story_id},
        )
    return run_id


def set_verdict(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    verdict = command["verdict"]
    if verdict not in OBJECTIVE_VERDICTS:
        raise InvalidInput(
            "INVALID_INPUT",
            f"--verdict must be one of {', '.join(OBJECTIVE_VERDICTS)}",
            {"pointer": "/verdict", "problem": "NOT_ALLOWED"},
        )
    base = review_diff.base_of(ctx.project.root)

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, {"planning", "pursuing", "budget_limited"}, "PHASE_NOT_PURSUING")
        diagnostics: list[dict[str, Any]] = []
        if row["phase"] == "planning":
            diagnostics = enter_pursuing(ctx, tx, row, {}, None, base)
        row["objective_verdict"] = verdict
        ctx.commit(tx, row, "verdict_set", {"verdict": verdict})
        return {
            "session_id": row["session_id"],
            "phase": row["phase"],
            "objective_verdict": verdict,
            "diagnostics": diagnostics,
        }

    return ctx.write(apply)


def request_complete(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    snapshot = codex_goal.load(command.get("codex_goal_json"), ctx.roots.base)
    for _ in range(COMPLETE_TRIES):
        with ctx.store.read() as conn:
            row = records.load(conn, ctx.session_id)
            by_story = {} if row is None else records.verdicts(conn, ctx.session_id)
        if row is None:  # a write would seed a pristine, planning row
            check_not_adopted(ctx.read(), ctx.session_id)
            row = records.pristine(ctx.session_id, ctx.now, 1)
        if row["phase"] == "complete" and row["completion"] is not None:
            return dict(row["completion"])
        require_phase(row, {"pursuing", "budget_limited", "blocked"}, "PHASE_PLANNING")
        checks = {
            pair: evidence.check({"path": pair[0], "sha256": pair[1]}, ctx.roots)
            for pair in completion.pairs(row, by_story)
        }
        done = _complete_if_unchanged(ctx, row["version"], checks, snapshot)
        if done is not None:
            return done
    raise Conflict(
        "CONFLICT",
        "the pursuit kept changing while its evidence was checked; try again",
        {"reason": "pursuit_changed"},
    )


def _complete_if_unchanged(
    ctx: Context,
    version: int,
    checks: completion.FileChecks,
    snapshot: codex_goal.Snapshot | None,
) -> dict[str, Any] | None:
    """The completion, or None when the pursuit moved past ``version`` meanwhile."""

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any] | None:
        if row["version"] != version:
            return None
        require_phase(row, {"pursuing", "budget_limited", "blocked"}, "PHASE_PLANNING")
        failures, digests = completion.evaluate(tx, row, checks, snapshot)
        if failures:
            first = failures[0]
            raise Refused(
                first["code"],
                f"request-complete refused: {first['message']}"
                + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""),
                {"failed": failures},
            )
        all_stories = records.stories(tx, row["session_id"])
        result = {
            "session_id": row["session_id"],
            "phase": "complete",
            "completed_at": ctx.now,
            "gates": digests,
            "relayed_confirmations": views.relayed_confirmations(all_stories),
            "retired_after_confirmation": views.retired_after_confirmation(all_stories),
        }
        row.update(phase="complete", active=False, completion=result, turn_started_at=None)
        ctx.commit(tx, row, "completed", {k: v for k, v in result.items() if k != "phase"})
        return result

    return ctx.write(apply)
