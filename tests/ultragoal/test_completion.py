"""``request-complete``: the nine gates, evidence re-verified, the Codex goal (§5.6, §7)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ithaca.kernel.errors import IthacaError


def ready(ug: Any, findings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything done but request-complete; returns the review result."""
    ug.pursue(ug.STORY_A, ug.STORY_B)
    ug.approve_stories()
    result = ug.submit(ug.artifact(findings))
    ug.call("set_verdict", verdict="APPROVE")
    return dict(result)


def failed(ug: Any, **fields: Any) -> IthacaError:
    before = ug.digest()
    with pytest.raises(IthacaError) as refused:
        ug.call("request_complete", **fields)
    assert ug.digest() == before
    assert ug.row()["phase"] != "complete"
    return refused.value


def codes(error: IthacaError) -> list[tuple[int, str]]:
    return [(entry["gate"], entry["code"]) for entry in error.details["failed"]]


def test_all_gates_are_listed_and_the_first_is_the_code(ug: Any) -> None:
    ug.pursue()
    error = failed(ug)
    assert error.code == "COMPLETE_VERDICT_NOT_APPROVE"
    assert codes(error) == [
        (1, "COMPLETE_VERDICT_NOT_APPROVE"),
        (3, "VERDICT_ARTIFACT_INVALID"),
        (6, "STORY_VERDICT_MISSING"),
        (6, "STORY_VALIDATOR_NOT_PASSED"),
        (7, "REVIEW_MISSING"),
    ]


def test_edited_completion_evidence_blocks_completion(ug: Any) -> None:
    ready(ug)
    (ug.root / "evidence" / "final.txt").write_text("edited after recording\n")
    error = failed(ug)
    assert codes(error) == [(1, "EVIDENCE_CHANGED")]
    (ug.root / "evidence" / "final.txt").write_text("ok\n")
    assert ug.call("request_complete")["phase"] == "complete"


def test_missing_completion_evidence_blocks_completion(ug: Any) -> None:
    ready(ug)
    (ug.root / "evidence" / "final.txt").unlink()
    assert codes(failed(ug)) == [(1, "EVIDENCE_MISSING")]


def test_no_completion_evidence_blocks_completion(ug: Any) -> None:
    ug.plan()
    ug.call("set", phase="pursuing")
    ug.approve_stories()
    ug.submit(ug.artifact())
    ug.call("set_verdict", verdict="APPROVE")
    assert codes(failed(ug)) == [(1, "COMPLETE_NO_EVIDENCE")]


def test_edited_story_evidence_blocks_completion(ug: Any) -> None:
    ready(ug)
    (ug.root / "evidence" / "B.txt").write_text("different\n")
    assert codes(failed(ug)) == [(6, "EVIDENCE_CHANGED")]


def test_a_story_sent_back_blocks_completion(ug: Any) -> None:
    ready(ug)
    ug.call("record_story_verdict", id="B", verdict="REQUEST_CHANGES", verifier="me")
    error = failed(ug)
    assert codes(error) == [(4, "VERDICT_ARTIFACT_NOT_APPROVE"), (6, "STORY_VERDICT_NOT_APPROVE")]


def test_a_story_added_mid_pursuit_blocks_completion_until_approved(ug: Any) -> None:
    ready(ug)
    ug.call("add_story", story={**ug.STORY_B, "id": "C"}, evidence="e", rationale="r")
    assert codes(failed(ug)) == [
        (4, "VERDICT_ARTIFACT_NOT_APPROVE"),
        (6, "STORY_UNCONFIRMED"),
        (6, "STORY_VERDICT_MISSING"),
    ]
    ug.as_user("confirm_story", id="C")
    assert (7, "REVIEW_SCOPE_STALE") in codes(failed(ug))


@pytest.mark.parametrize(
    ("findings", "status", "code"),
    [
        ([{}], "COMPLETE", "REVIEW_NOT_ELIGIBLE"),
        ([{"verdict": "PLAUSIBLE"}], "COMPLETE", "REVIEW_NOT_ELIGIBLE"),
        ([{"scope": "UNKNOWN", "basis": "uncertain"}], "COMPLETE", "REVIEW_NOT_ELIGIBLE"),
        ([{"reference": "nowhere"}], "COMPLETE", "REVIEW_SCOPE_EVIDENCE_INVALID"),
        ([], "INCONCLUSIVE", "REVIEW_INCONCLUSIVE"),
    ],
)
def test_review_gate_codes(ug: Any, findings: list[dict[str, Any]], status: str, code: str) -> None:
    ug.pursue()
    ug.approve_stories()
    ug.submit(ug.artifact([ug.finding(**changes) for changes in findings], status=status))
    ug.call("set_verdict", verdict="APPROVE")
    assert codes(failed(ug)) == [(7, code)]


def test_notes_only_review_completes_without_resolution(ug: Any) -> None:
    assert ready(ug, [ug.finding(priority="LOW")])["verdict"] == "COMMENT"
    assert ug.call("request_complete")["phase"] == "complete"


def test_medium_repairs_need_a_resolution_with_unchanged_evidence(ug: Any) -> None:
    result = ready(
        ug, [ug.finding(priority="MEDIUM"), ug.finding(scope="OUT_OF_SCOPE", basis="unrelated")]
    )
    assert result["verdict"] == "COMMENT"
    assert codes(failed(ug)) == [(8, "REVIEW_RESOLUTION_MISSING")]
    fix = ug.write("evidence/fix.txt", "fixed\n")
    ug.call("record_comment_resolution", artifact_sha256=result["artifact_sha256"], evidence=[fix])
    (ug.root / fix).write_text("changed\n")
    assert codes(failed(ug)) == [(8, "EVIDENCE_CHANGED")]
    (ug.root / fix).write_text("fixed\n")
    assert ug.call("request_complete")["phase"] == "complete"


def test_completion_wins_over_budget_limited_and_blocked(ug: Any) -> None:
    ready(ug)
    ug.as_user("set_budget_limited")
    assert ug.call("request_complete")["phase"] == "complete"


def test_a_blocked_pursuit_can_still_complete(ug: Any) -> None:
    ready(ug)
    ug.call("set_blocked", reason="nothing left to do but finish")
    assert ug.call("request_complete")["phase"] == "complete"


def test_tampered_rows_are_caught_by_gates_two_three_and_five(ug: Any) -> None:
    ready(ug)
    conn = ug.service.store.connection()
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        conn.execute(
            "INSERT INTO ultragoal_story_verdict (session_id, story_id, verdict, evidence,"
            " verifier, at, seq) VALUES (?, 'ghost', 'APPROVE', '[]', ' ', 'now', 1)",
            (ug.SESSION,),
        )
        conn.execute("DELETE FROM ultragoal_story WHERE session_id = ?", (ug.SESSION,))
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
    found = codes(failed(ug))
    assert (2, "COMPLETE_NO_STORIES") in found
    assert (3, "VERDICT_ARTIFACT_INVALID") in found
    assert (5, "VERDICT_UNKNOWN_STORY") in found


# --- Gate 9: the Codex goal -------------------------------------------------------------

OBJECTIVE = "Accept trailing commas in arrays"


def armed(ug: Any) -> None:
    ready(ug)
    ug.call("set", phase="pursuing", codex_goal_objective=OBJECTIVE)


@pytest.mark.parametrize(
    ("snapshot", "code"),
    [
        (None, "CODEX_GOAL_SNAPSHOT_MISSING"),
        ("not json and no such file", "CODEX_GOAL_SNAPSHOT_UNPARSEABLE"),
        ({"goal": {"objective": 7, "status": "complete"}}, "CODEX_GOAL_SNAPSHOT_UNPARSEABLE"),
        ({"goal": {"status": "complete"}}, "CODEX_GOAL_SNAPSHOT_UNPARSEABLE"),
        ({"goal": {"objective": "Something else", "status": "complete"}}, "CODEX_GOAL_MISMATCH"),
        ({"goal": {"objective": OBJECTIVE, "status": "active"}}, "CODEX_GOAL_NOT_COMPLETE"),
        ({"objective": OBJECTIVE}, "CODEX_GOAL_NOT_COMPLETE"),
    ],
)
def test_codex_goal_gate_refusals(ug: Any, snapshot: Any, code: str) -> None:
    armed(ug)
    fields = {} if snapshot is None else {"codex_goal_json": snapshot}
    assert codes(failed(ug, **fields)) == [(9, code)]


@pytest.mark.parametrize(
    "snapshot",
    [
        {"goal": {"objective": "  Accept  trailing\ncommas in arrays ", "status": "complete"}},
        {"goal": {"goal": OBJECTIVE}, "status": "complete"},
        {"goal": {"description": OBJECTIVE, "status": "complete"}},
        json.dumps({"objective": OBJECTIVE, "status": "complete"}),
    ],
)
def test_codex_goal_gate_passes_on_a_matching_complete_goal(ug: Any, snapshot: Any) -> None:
    armed(ug)
    assert ug.call("request_complete", codex_goal_json=snapshot)["phase"] == "complete"


def test_codex_goal_snapshot_may_be_a_file(ug: Any) -> None:
    armed(ug)
    path = ug.write(
        "goal.json", json.dumps({"goal": {"objective": OBJECTIVE, "status": "complete"}})
    )
    assert ug.call("request_complete", codex_goal_json=path)["phase"] == "complete"


def test_replanning_disarms_the_codex_goal(ug: Any) -> None:
    armed(ug)
    ug.call("set", phase="planning")
    assert ug.call("get")["state"]["codex_goal_objective"] == ""
