"""The seed's sequence through the service, and the read shapes of reference §3.1."""

from __future__ import annotations

from typing import Any

import pytest

from ithaca.kernel import journal
from ithaca.kernel.errors import IthacaError
from ithaca.ultragoal import marker


def test_one_story_reaches_complete_and_get_then_reads_null(ug: Any) -> None:
    result = ug.complete()

    assert result["phase"] == "complete"
    assert result["relayed_confirmations"] == []  # the user confirmed A
    assert ug.call("status")["status"] == "complete"
    assert ug.call("get") == {"state": None}
    events = journal.query(ug.service.store.connection(), kind="ultragoal.completed")
    assert [event["subject"] for event in events] == [ug.SESSION]
    assert ug.call("request_complete") == result  # the stored completion, no new event
    assert len(journal.query(ug.service.store.connection(), kind="ultragoal.completed")) == 1


def test_several_stories_advance_one_at_a_time(ug: Any) -> None:
    ug.pursue(ug.STORY_A, ug.STORY_B)
    assert ug.call("status")["current_story"]["id"] == "A"
    ref = ug.write("evidence/b.txt")

    with pytest.raises(IthacaError) as refused:
        ug.call(
            "record_story_verdict", id="B", verdict="APPROVE", evidence_refs=[ref], verifier="v"
        )
    assert refused.value.code == "STORY_NOT_CURRENT"

    ug.approve_stories()
    state = ug.call("get")["state"]
    assert state["ithaca"]["current_story"] is None
    ug.submit(ug.artifact())
    ug.call("set_verdict", verdict="APPROVE")
    assert ug.call("request_complete")["phase"] == "complete"


def test_request_changes_makes_an_approved_story_current_again(ug: Any) -> None:
    ug.pursue(ug.STORY_A, ug.STORY_B)
    ug.approve_stories()
    ug.call("record_story_verdict", id="A", verdict="REQUEST_CHANGES", verifier="review")
    assert ug.call("status")["current_story"]["id"] == "A"
    assert ug.call("status")["verdict_artifact"]["objective_verdict"] == "REQUEST_CHANGES"


def test_get_keeps_the_original_keys_and_adds_ithaca(ug: Any) -> None:
    ug.pursue()
    state = ug.call("get")["state"]

    assert state["outcome"] == ug.OUTCOME
    assert state["phase"] == "pursuing"
    assert state["active"] is True
    assert state["pristine"] is False
    assert state["objective_verdict"] == "absent"
    assert state["completion_evidence_paths"] == ["evidence/final.txt"]
    assert state["review_dispatch_used"] == 0 and state["review_dispatch_cap"] == 5
    assert state["stories"][0]["status"] == "confirmed"
    assert "last_seen_stories_digest" in state
    assert set(state["ithaca"]) == {
        "session_id",
        "max_wall_minutes",
        "wall_used_s",
        "budget_kind",
        "host_capped",
        "current_story",
        "completion_evidence",
        "relayed_confirmations",
        "retired_after_confirmation",
        "diagnostics",
    }
    assert state["ithaca"]["current_story"] == "A"


def test_status_is_absent_without_a_row_and_get_is_null(ug: Any) -> None:
    assert ug.call("status")["status"] == "absent"
    assert ug.call("get") == {"state": None}


def test_a_refused_first_write_leaves_no_seeded_row(ug: Any) -> None:
    with pytest.raises(IthacaError):
        ug.call("set", phase="pursuing")
    assert ug.call("status")["status"] == "absent"


def test_status_json_lists_stale_evidence_by_owner(ug: Any) -> None:
    ug.pursue()
    ug.approve_stories()
    (ug.root / "evidence" / "A.txt").write_text("edited\n")
    (ug.root / "evidence" / "final.txt").unlink()

    stale = ug.call("status")["stale_evidence"]

    assert stale == [
        {"owner": "completion", "path": "evidence/final.txt"},
        {"owner": "story:A", "path": "evidence/A.txt"},
    ]


def test_serialize_requirements_and_review_context(ug: Any) -> None:
    assert ug.call("serialize_requirements") == {"requirements": ""}
    ug.call("set", phase="planning", outcome=ug.OUTCOME, verification_surface=ug.SURFACE)
    assert ug.call("serialize_requirements")["requirements"] == (
        f"[outcome] {ug.OUTCOME} — AC: {ug.SURFACE} — verify: {ug.SURFACE}"
    )
    ug.call("set_stories", stories=[ug.STORY_A])
    ug.as_user("confirm_all_stories")
    assert ug.call("serialize_requirements")["requirements"] == (
        "[A] Accept trailing commas in arrays — AC: [1,2,] parses — verify: test_arrays passes"
    )
    context = ug.call("serialize_review_context")
    assert context["what_was_implemented"] == ug.OUTCOME
    assert context["description"] == "(none provided)"
    assert context["non_goals"] == "(none provided)"
    assert "[SCOPE_CONTRACT]" in context["project_context"]
    assert "scope_contract_sha256" in context["project_context"]


def test_serialize_review_context_needs_an_active_pursuit(ug: Any) -> None:
    with pytest.raises(IthacaError) as refused:
        ug.call("serialize_review_context")
    assert refused.value.code == "NO_ACTIVE_PURSUIT"


def test_entering_pursuit_writes_the_marker_and_completion_removes_it(ug: Any) -> None:
    runtime = ug.service.project.runtime
    ug.pursue()
    assert marker.exists(runtime, ug.SESSION)
    ug.approve_stories()
    ug.submit(ug.artifact())
    ug.call("set_verdict", verdict="APPROVE")
    ug.call("request_complete")
    assert not marker.exists(runtime, ug.SESSION)


def test_set_verdict_from_planning_enters_pursuit_first(ug: Any) -> None:
    ug.plan()
    answer = ug.call("set_verdict", verdict="COMMENT")
    assert answer["phase"] == "pursuing"
    events = journal.query(ug.service.store.connection(), kind="ultragoal.")
    kinds = [e["kind"] for e in events][-2:]
    assert kinds == ["ultragoal.phase_set", "ultragoal.verdict_set"]


def test_replanning_clears_both_lanes_and_keeps_the_budget(ug: Any) -> None:
    ug.pursue()
    ug.approve_stories()
    ug.submit(ug.artifact([ug.finding(priority="MEDIUM")]))
    ug.call("set_verdict", verdict="APPROVE")

    answer = ug.call("set", phase="planning", outcome="A new outcome")

    assert answer["phase"] == "planning"
    state = ug.call("get")["state"]
    assert state["objective_verdict"] == "absent"
    assert state["completion_evidence_paths"] == []
    assert state["review_dispatch_used"] == 1
    assert state["stories"][0]["status"] == "unconfirmed"  # a content slot changed
    status = ug.call("status")
    assert status["verdict_artifact"] is None
    assert status["codereview_artifact"] is None


def test_completion_evidence_in_planning_is_ignored_with_a_diagnostic(ug: Any) -> None:
    answer = ug.call(
        "set",
        phase="planning",
        outcome=ug.OUTCOME,
        completion_evidence=[ug.write("x.txt")],
    )
    assert [d["code"] for d in answer["diagnostics"]] == ["completion_evidence_ignored_in_planning"]


def test_a_low_stop_cap_is_reported_when_entering_pursuit(ug: Any) -> None:
    ug.plan()
    answer = ug.service.perform(
        {"operation": "set", "session": ug.SESSION, "phase": "pursuing"},
        actor="agent",
        env={"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "8"},
    )
    assert [d["code"] for d in answer["diagnostics"]] == ["host_stop_cap_below_budget"]


@pytest.mark.parametrize("strict, status", [(True, "unconfirmed"), (False, "confirmed")])
def test_a_single_story_is_auto_confirmed_only_without_strict_approval(
    ug: Any, strict: bool, status: str
) -> None:
    ug.service.config["ultragoal"]["strict_approval"] = strict
    ug.call("set", phase="planning", outcome=ug.OUTCOME, verification_surface=ug.SURFACE)
    stories = ug.call("set_stories", single=True)["stories"]
    assert stories == [
        {
            "id": "S1",
            "story": ug.OUTCOME,
            "acceptance_criteria": [ug.SURFACE],
            "verification_surface": ug.SURFACE,
            "status": status,
        }
    ]


def test_split_story_retires_the_parent_and_inserts_children_after_it(ug: Any) -> None:
    ug.call("set", phase="planning", outcome=ug.OUTCOME, verification_surface=ug.SURFACE)
    ug.call("set_stories", stories=[ug.STORY_A, ug.STORY_B])
    children = [
        {**ug.STORY_A, "id": "A1", "story": "arrays of numbers"},
        {**ug.STORY_A, "id": "A2", "story": "arrays of strings"},
    ]
    answer = ug.call("split_story", id="A", replacements=children, evidence="e", rationale="r")
    shown = [
        (s["id"], s["status"], s.get("split_from"), s.get("split_into")) for s in answer["stories"]
    ]
    assert shown == [
        ("A", "retired", None, ["A1", "A2"]),
        ("A1", "unconfirmed", "A", None),
        ("A2", "unconfirmed", "A", None),
        ("B", "unconfirmed", None, None),
    ]


def test_revise_story_may_rename_and_resets_confirmation(ug: Any) -> None:
    ug.plan(ug.STORY_A, ug.STORY_B)
    answer = ug.call(
        "revise_story",
        id="A",
        patch={"id": "A-2", "story": "new words"},
        evidence="e",
        rationale="r",
    )
    assert [(s["id"], s["status"]) for s in answer["stories"]] == [
        ("A-2", "unconfirmed"),
        ("B", "confirmed"),
    ]


def test_reorder_stories(ug: Any) -> None:
    ug.plan(ug.STORY_A, ug.STORY_B)
    answer = ug.call("reorder_stories", order=["B", "A"])
    assert [s["id"] for s in answer["stories"]] == ["B", "A"]
