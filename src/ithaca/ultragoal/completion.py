"""The nine completion gates of ``request-complete`` (docs/ultragoal.md, "The nine
completion gates").

``request-complete`` is the only way to ``complete``, so every gate is evaluated from
stored rows and freshly hashed files, never from what the agent says: the objective
verdict and completion evidence (1), at least one live story (2), the verdict artifact
rebuilt from its rows (3–5), every live story approved with unchanged evidence and, where
bound, a validator pass since its last change (6), the review lane (7–8) and, when armed,
the Codex goal (9). All gates are evaluated, so one refusal lists every gap.

Files are hashed before the completing transaction (``pairs`` names them); inside it the
caller passes their results in ``file_checks`` after confirming that the pursuit's
``version`` is still the one the pairs were read from.
"""

from __future__ import annotations

from ithaca.kernel import canon
from ithaca.ultragoal import codex_goal, records, reducer, views
from ithaca.ultragoal.contract import scope_digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

FileChecks = dict[tuple[str, str], str | None]


def pairs(row: dict[str, Any], by_story: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """Every recorded ``(path, sha256)`` a gate will re-verify."""
    found = [(p["path"], p["sha256"]) for p in row["completion_evidence"]]
    for entry in by_story.values():
        found += [(p["path"], p["sha256"]) for p in entry["evidence"]]
    resolution = row["review_resolution"]
    if resolution:
        found += sorted(resolution["evidence_sha256"].items())
    return found


def evaluate(
    conn: sqlite3.Connection,
    row: dict[str, Any],
    file_checks: FileChecks,
    snapshot: codex_goal.Snapshot | None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(failures, digests)``: each failure is ``{gate, code, message, ...}`` in gate order."""
    session_id = row["session_id"]
    all_stories = records.stories(conn, session_id)
    by_story = records.verdicts(conn, session_id)
    review = records.review(conn, session_id)
    failures: list[dict[str, Any]] = []

    def fail(gate: int, code: str, message: str, **details: Any) -> None:
        failures.append({"gate": gate, "code": code, "message": message, **details})

    # Gate 1: completion evidence and the objective verdict.
    if not row["completion_evidence"]:
        fail(1, "COMPLETE_NO_EVIDENCE", "no completion evidence is recorded")
    for pair in row["completion_evidence"]:
        problem = file_checks.get((pair["path"], pair["sha256"]), "EVIDENCE_CHANGED")
        if problem is not None:
            fail(
                1,
                problem,
                f"completion evidence {pair['path']} is {_word(problem)}",
                path=pair["path"],
            )
    if row["objective_verdict"] != "APPROVE":
        fail(
            1,
            "COMPLETE_VERDICT_NOT_APPROVE",
            f"objective_verdict is {row['objective_verdict']}, not APPROVE",
        )

    # Gate 2: a live story.
    live = [story for story in all_stories if story["status"] != "retired"]
    if not live:
        fail(2, "COMPLETE_NO_STORIES", "no non-retired story exists")

    # Gates 3-5: the verdict artifact, rebuilt from its rows.
    artifact = views.verdict_artifact(all_stories, by_story)
    if artifact is None or not _artifact_valid(by_story):
        fail(3, "VERDICT_ARTIFACT_INVALID", "the verdict artifact is missing or malformed")
    elif artifact["objective_verdict"] != "APPROVE":
        fail(
            4,
            "VERDICT_ARTIFACT_NOT_APPROVE",
            f"the verdict artifact reads {artifact['objective_verdict']}",
        )
    known = {story["id"] for story in all_stories}
    for story_id in sorted(set(by_story) - known):
        fail(5, "VERDICT_UNKNOWN_STORY", f"the verdict names unknown story {story_id}", id=story_id)

    # Gate 6: every live story approved, its evidence unchanged, its validator passed.
    for story in live:
        entry = by_story.get(story["id"])
        if story["status"] != "confirmed":
            fail(6, "STORY_UNCONFIRMED", f"story {story['id']} is unconfirmed", id=story["id"])
        if entry is None:
            fail(6, "STORY_VERDICT_MISSING", f"story {story['id']} has no verdict", id=story["id"])
        elif entry["verdict"] != "APPROVE":
            fail(
                6,
                "STORY_VERDICT_NOT_APPROVE",
                f"story {story['id']} reads {entry['verdict']}",
                id=story["id"],
            )
        else:
            for pair in entry["evidence"]:
                if file_checks.get((pair["path"], pair["sha256"]), "EVIDENCE_CHANGED"):
                    fail(
                        6,
                        "EVIDENCE_CHANGED",
                        f"evidence {pair['path']} of story {story['id']} changed",
                        id=story["id"],
                        path=pair["path"],
                    )
        if story.get("validator") and records.passing_run(conn, session_id, story) is None:
            fail(
                6,
                "STORY_VALIDATOR_NOT_PASSED",
                f"story {story['id']}'s validator has not passed since its last change",
                id=story["id"],
            )

    # Gates 7-8: the review lane (completion wins over budget_limited: no pursuing check).
    result = reducer.reduce(
        row, all_stories, review, records.dismissals(conn, session_id), require_pursuing=False
    )
    reason = result.get("reason")
    repairs = result["findings"]["repair"]
    if reason is not None:
        fail(7, reducer.REASON_CODES[reason], f"the review lane reads: {reason}")
    elif result["verdict"] == "REQUEST_CHANGES" or any(
        item["outcome"] != "FIX" for item in repairs
    ):
        fail(7, "REVIEW_NOT_ELIGIBLE", f"the review reduces to {result['verdict']}")
    elif result["verdict"] == "COMMENT" and repairs:
        resolution = result.get("resolution")
        if resolution is None:
            fail(
                8,
                "REVIEW_RESOLUTION_MISSING",
                "the MEDIUM repairs have no record-comment-resolution for this artifact",
            )
        else:
            for path, sha in sorted(resolution["evidence_sha256"].items()):
                if file_checks.get((path, sha), "EVIDENCE_CHANGED"):
                    fail(8, "EVIDENCE_CHANGED", f"resolution evidence {path} changed", path=path)

    # Gate 9: the Codex goal, when armed.
    codex = codex_goal.check(row["codex_goal_objective"], snapshot)
    if codex is not None:
        fail(9, codex[0], codex[1])

    digests = {
        "scope_contract_sha256": scope_digest(row, all_stories),
        "verdict_artifact_sha256": None if artifact is None else canon.digest(artifact),
        "review_artifact_sha256": None if review is None else review["artifact_sha256"],
        "completion_evidence_sha256": canon.digest(row["completion_evidence"]),
    }
    return failures, digests


def _artifact_valid(by_story: dict[str, dict[str, Any]]) -> bool:
    """Each verdict row is well-formed: a known verdict, a verifier, evidence pairs (at
    least one for APPROVE)."""
    for entry in by_story.values():
        pairs_ = entry["evidence"]
        if entry["verdict"] not in ("APPROVE", "REQUEST_CHANGES"):
            return False
        if not isinstance(entry["verifier"], str) or not entry["verifier"].strip():
            return False
        if not isinstance(pairs_, list) or not all(
            isinstance(p, dict) and set(p) == {"path", "sha256"} and reducer.is_sha256(p["sha256"])
            for p in pairs_
        ):
            return False
        if entry["verdict"] == "APPROVE" and not pairs_:
            return False
    return True


def _word(code: str) -> str:
    return "missing" if code == "EVIDENCE_MISSING" else "changed"
