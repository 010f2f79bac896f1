"""Every refusal of reference §4–§5: its code, its exit status, and nothing changed.

Each case brings a pursuit to a named point through the agent's own operations, takes a
digest of every ultragoal row, the gate records and the journal length, makes one call
that must be refused, and checks the digest again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from ithaca.kernel.errors import IthacaError

A, B = "A", "B"


def story(story_id: str, **changes: Any) -> dict[str, Any]:
    made = {
        "id": story_id,
        "story": f"story {story_id}",
        "acceptance_criteria": [f"{story_id} works"],
        "verification_surface": f"test_{story_id} passes",
    }
    return {**made, **changes}


def none(ug: Any) -> None:
    """No row at all."""


def slots(ug: Any) -> None:
    ug.call("set", phase="planning", outcome=ug.OUTCOME, verification_surface=ug.SURFACE)


def outcome_only(ug: Any) -> None:
    ug.call("set", phase="planning", outcome=ug.OUTCOME)


def stories(ug: Any) -> None:
    slots(ug)
    ug.call("set_stories", stories=[story(A), story(B)])


def retired(ug: Any) -> None:
    stories(ug)
    ug.call("retire_story", id=B, evidence="e", rationale="r")


def planned(ug: Any) -> None:
    ug.plan(story(A), story(B))


def pursuing(ug: Any) -> None:
    ug.pursue(story(A), story(B))


def measured(ug: Any) -> None:
    """Pursuing, with the current story's validator passed (only evidence is missing)."""
    pursuing(ug)
    ug.call("run_story_validator", id=A, observed={"ok": True})


def unmeasured(ug: Any) -> None:
    """Pursuing a story that no validator measures."""
    ug.pursue({**story(A), "validator": None})
    ug.write("evidence/A.txt")


def pursuing_with_new_story(ug: Any) -> None:
    pursuing(ug)
    ug.call("add_story", story=story("C"), evidence="e", rationale="r")


def budget_limited(ug: Any) -> None:
    pursuing(ug)
    ug.as_user("set_budget_limited")


def blocked(ug: Any) -> None:
    pursuing(ug)
    ug.call("set_blocked", reason="the database is down")


def complete(ug: Any) -> None:
    ug.complete()


Setup = Callable[[Any], None]
# (setup, operation, fields, code, exit status)
CASES: list[tuple[Setup, str, dict[str, Any], str, int]] = [
    (none, "get", {"session": "bad id!"}, "SESSION_ID_INVALID", 2),
    (none, "set", {"phase": "complete"}, "PHASE_NOT_SETTABLE", 1),
    (none, "set", {"phase": "planning", "non_goals": "no dash here"}, "NON_GOALS_FORMAT", 1),
    (
        none,
        "set",
        {"phase": "planning", "non_goals": "- speed | owner Bob"},
        "NON_GOALS_FORMAT",
        1,
    ),
    (
        planned,
        "set",
        {"phase": "pursuing", "codex_goal_objective": " \n"},
        "CODEX_GOAL_OBJECTIVE_EMPTY",
        1,
    ),
    (none, "set", {"phase": "planning", "max_iterations": 0}, "INVALID_INPUT", 2),
    (none, "set", {"phase": "planning", "colour": "red"}, "INVALID_INPUT", 2),
    (none, "set", {"phase": "planning", "outcome": 7}, "INVALID_INPUT", 2),
    (none, "fly", {}, "INVALID_INPUT", 2),
    (none, "set", {"phase": "pursuing"}, "OBJECTIVE_NOT_FALSIFIABLE", 1),
    (outcome_only, "set", {"phase": "pursuing"}, "OBJECTIVE_NOT_FALSIFIABLE", 1),
    (slots, "set", {"phase": "pursuing"}, "NO_STORIES", 1),
    (retired, "set", {"phase": "pursuing"}, "STORIES_UNCONFIRMED", 1),
    (planned, "set", {"phase": "pursuing", "outcome": "other"}, "SCOPE_FROZEN", 1),
    (planned, "set", {"phase": "pursuing", "constraints": "new"}, "SCOPE_FROZEN", 1),
    (pursuing, "set", {"phase": "pursuing", "max_iterations": 50}, "AUTHORITY_USER_ONLY", 1),
    (pursuing, "set", {"phase": "planning", "max_iterations": 50}, "AUTHORITY_USER_ONLY", 1),
    (budget_limited, "set", {"phase": "planning"}, "PURSUIT_PAUSED", 1),
    (budget_limited, "set", {"phase": "pursuing"}, "PURSUIT_PAUSED", 1),
    (blocked, "set", {"phase": "planning"}, "PURSUIT_PAUSED", 1),
    (complete, "set", {"phase": "pursuing"}, "PURSUIT_COMPLETE", 1),
    (none, "set_stories", {"stories": [story(A)]}, "OUTCOME_REQUIRED", 1),
    (slots, "set_stories", {"stories": []}, "STORIES_EMPTY", 1),
    (slots, "set_stories", {"stories": [story("bad id")]}, "STORY_INVALID", 2),
    (slots, "set_stories", {"stories": [story(A, acceptance_criteria=[])]}, "STORY_INVALID", 2),
    (slots, "set_stories", {"stories": [story(A, acceptance_criteria=[" "])]}, "STORY_INVALID", 2),
    (slots, "set_stories", {"stories": [story(A, verification_surface="")]}, "STORY_INVALID", 2),
    (slots, "set_stories", {"stories": [story(A, owner="me")]}, "STORY_INVALID", 2),
    (slots, "set_stories", {"stories": [story(A, status="retired")]}, "STORY_INVALID", 2),
    (slots, "set_stories", {"stories": {"id": A}}, "STORY_INVALID", 2),
    (slots, "set_stories", {"stories": [story(A), story(A)]}, "STORY_ID_DUPLICATE", 1),
    (
        slots,
        "set_stories",
        {"stories": [story(A, status="confirmed")]},
        "STORY_CONFIRMED_BY_MUTATION",
        1,
    ),
    (slots, "set_stories", {}, "INVALID_INPUT", 2),
    (pursuing, "set_stories", {"stories": [story(A)]}, "PHASE_NOT_PLANNING", 1),
    (stories, "set_stories", {"single": True}, "STORIES_EXIST", 1),
    (outcome_only, "set_stories", {"single": True}, "VERIFICATION_SURFACE_REQUIRED", 1),
    (stories, "confirm_story", {"id": "Z"}, "STORY_UNKNOWN", 1),
    (retired, "confirm_story", {"id": B}, "STORY_RETIRED", 1),
    (pursuing_with_new_story, "confirm_story", {"id": "C"}, "AUTHORITY_USER_ONLY", 1),
    (pursuing_with_new_story, "confirm_all_stories", {}, "AUTHORITY_USER_ONLY", 1),
    (stories, "reorder_stories", {"order": [A, A]}, "ORDER_NOT_PERMUTATION", 1),
    (stories, "reorder_stories", {"order": [A, B, "C"]}, "ORDER_NOT_PERMUTATION", 1),
    (pursuing, "reorder_stories", {"order": [B, A]}, "PHASE_NOT_PLANNING", 1),
    (slots, "add_story", {"story": story("C"), "rationale": "r"}, "STEERING_REASON_REQUIRED", 1),
    (
        slots,
        "add_story",
        {"story": story("C"), "evidence": " ", "rationale": "r"},
        "STEERING_REASON_REQUIRED",
        1,
    ),
    (
        none,
        "add_story",
        {"story": story("C"), "evidence": "e", "rationale": "r"},
        "OUTCOME_REQUIRED",
        1,
    ),
    (
        stories,
        "add_story",
        {"story": story(A), "evidence": "e", "rationale": "r"},
        "STORY_ID_DUPLICATE",
        1,
    ),
    (
        stories,
        "add_story",
        {"story": story("C", status="confirmed"), "evidence": "e", "rationale": "r"},
        "STORY_CONFIRMED_BY_MUTATION",
        1,
    ),
    (
        stories,
        "revise_story",
        {"id": "Z", "patch": {"story": "x"}, "evidence": "e", "rationale": "r"},
        "STORY_UNKNOWN",
        1,
    ),
    (
        retired,
        "revise_story",
        {"id": B, "patch": {"story": "x"}, "evidence": "e", "rationale": "r"},
        "STORY_RETIRED",
        1,
    ),
    (
        stories,
        "revise_story",
        {"id": A, "patch": {"id": B}, "evidence": "e", "rationale": "r"},
        "STORY_ID_DUPLICATE",
        1,
    ),
    (
        pursuing,
        "revise_story",
        {"id": A, "patch": {"story": "x"}, "evidence": "e", "rationale": "r"},
        "STORY_CONFIRMED_FENCE",
        1,
    ),
    (
        stories,
        "revise_story",
        {"id": A, "patch": {"status": "confirmed"}, "evidence": "e", "rationale": "r"},
        "STORY_CONFIRMED_BY_MUTATION",
        1,
    ),
    (
        pursuing,
        "retire_story",
        {"id": A, "evidence": "e", "rationale": "r"},
        "STORY_CONFIRMED_FENCE",
        1,
    ),
    (retired, "retire_story", {"id": B, "evidence": "e", "rationale": "r"}, "STORY_RETIRED", 1),
    (stories, "retire_story", {"id": A}, "STEERING_REASON_REQUIRED", 1),
    (
        stories,
        "split_story",
        {"id": A, "replacements": [story("A1")], "evidence": "e", "rationale": "r"},
        "SPLIT_TOO_FEW",
        1,
    ),
    (
        stories,
        "split_story",
        {"id": A, "replacements": [story("A1"), story("A1")], "evidence": "e", "rationale": "r"},
        "STORY_ID_DUPLICATE",
        1,
    ),
    (
        stories,
        "split_story",
        {"id": A, "replacements": [story("A1"), story(B)], "evidence": "e", "rationale": "r"},
        "STORY_ID_DUPLICATE",
        1,
    ),
    (
        pursuing,
        "split_story",
        {"id": A, "replacements": [story("A1"), story("A2")], "evidence": "e", "rationale": "r"},
        "STORY_CONFIRMED_FENCE",
        1,
    ),
    (stories, "run_story_validator", {"id": A}, "STORY_NO_VALIDATOR", 1),
    (stories, "run_story_validator", {"id": "Z"}, "STORY_UNKNOWN", 1),
    (retired, "run_story_validator", {"id": B}, "STORY_RETIRED", 1),
    (
        planned,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v"},
        "PHASE_NOT_PURSUING",
        1,
    ),
    (
        blocked,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v"},
        "PURSUIT_PAUSED",
        1,
    ),
    (
        pursuing,
        "record_story_verdict",
        {"id": "Z", "verdict": "APPROVE", "verifier": "v"},
        "STORY_UNKNOWN",
        1,
    ),
    (
        pursuing_with_new_story,
        "record_story_verdict",
        {"id": "C", "verdict": "REQUEST_CHANGES", "verifier": "v"},
        "STORY_UNCONFIRMED",
        1,
    ),
    (
        pursuing,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": " "},
        "VERDICT_INVALID",
        2,
    ),
    (
        pursuing,
        "record_story_verdict",
        {"id": A, "verdict": "MAYBE", "verifier": "v"},
        "VERDICT_INVALID",
        2,
    ),
    (
        pursuing,
        "record_story_verdict",
        {"id": B, "verdict": "APPROVE", "verifier": "v", "evidence_refs": ["evidence/final.txt"]},
        "STORY_NOT_CURRENT",
        1,
    ),
    (
        pursuing,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v"},
        "EVIDENCE_REQUIRED",
        1,
    ),
    (
        measured,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v", "evidence_refs": ["missing.txt"]},
        "EVIDENCE_MISSING",
        1,
    ),
    (
        measured,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v", "evidence_refs": ["evidence"]},
        "EVIDENCE_MISSING",
        1,
    ),
    (
        measured,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v", "evidence_refs": ["../outside.txt"]},
        "EVIDENCE_PATH_UNSAFE",
        1,
    ),
    (
        measured,
        "record_story_verdict",
        {
            "id": A,
            "verdict": "APPROVE",
            "verifier": "v",
            "evidence_refs": [".ithaca/.runtime/state.db"],
        },
        "EVIDENCE_PATH_UNSAFE",
        1,
    ),
    (
        measured,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v", "evidence_refs": ["escape.txt"]},
        "EVIDENCE_PATH_UNSAFE",
        1,
    ),
    (
        pursuing,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v", "evidence_refs": ["evidence/final.txt"]},
        "STORY_VALIDATOR_NOT_PASSED",
        1,
    ),
    (
        unmeasured,
        "record_story_verdict",
        {"id": A, "verdict": "APPROVE", "verifier": "v", "evidence_refs": ["evidence/A.txt"]},
        "STORY_VALIDATOR_REQUIRED",
        1,
    ),
    (pursuing, "set_verdict", {"verdict": "MAYBE"}, "INVALID_INPUT", 2),
    (blocked, "set_verdict", {"verdict": "APPROVE"}, "PURSUIT_PAUSED", 1),
    (complete, "set_verdict", {"verdict": "APPROVE"}, "PURSUIT_COMPLETE", 1),
    (slots, "set_verdict", {"verdict": "APPROVE"}, "NO_STORIES", 1),
    (planned, "request_complete", {}, "PHASE_PLANNING", 1),
    (none, "request_complete", {}, "PHASE_PLANNING", 1),
    (pursuing, "request_complete", {}, "COMPLETE_VERDICT_NOT_APPROVE", 1),
    (pursuing, "set_blocked", {"reason": " \t"}, "BLOCKED_REASON_REQUIRED", 1),
    (pursuing, "set_blocked", {}, "BLOCKED_REASON_REQUIRED", 1),
    (budget_limited, "set_blocked", {"reason": "x"}, "PURSUIT_PAUSED", 1),
    (
        complete,
        "add_story",
        {"story": story("C"), "evidence": "e", "rationale": "r"},
        "PURSUIT_COMPLETE",
        1,
    ),
    (pursuing, "claim_review_dispatch", {}, "AUTHORITY_HOOK_ONLY", 1),
    (budget_limited, "resume_pursuit", {}, "AUTHORITY_USER_ONLY", 1),
    (pursuing, "set_budget_limited", {}, "AUTHORITY_USER_ONLY", 1),
    (pursuing, "approve_review_dispatch_renewal", {}, "AUTHORITY_USER_ONLY", 1),
    (
        pursuing,
        "dismiss_review_finding",
        {"ref": "a:1", "class": "cleanup", "rationale": "r"},
        "AUTHORITY_USER_ONLY",
        1,
    ),
    (pursuing, "review_ticket", {}, "REVIEW_TICKET_NONE", 1),
    (planned, "review_ticket", {}, "PHASE_NOT_PURSUING", 1),
    (
        pursuing,
        "submit_review",
        {"nonce": "0" * 32, "artifact": {}},
        "REVIEW_NOT_SEEN_FROM_REVIEWER",
        1,
    ),
    (
        pursuing,
        "record_comment_resolution",
        {"artifact_sha256": "a" * 64, "evidence": ["evidence/final.txt"]},
        "REVIEW_SHA_MISMATCH",
        1,
    ),
    (
        pursuing,
        "record_comment_resolution",
        {"artifact_sha256": "abc", "evidence": ["evidence/final.txt"]},
        "INVALID_INPUT",
        2,
    ),
    (
        pursuing,
        "record_comment_resolution",
        {"artifact_sha256": "a" * 64, "evidence": []},
        "INVALID_INPUT",
        2,
    ),
    (pursuing, "adopt", {"src": "sess-a"}, "ADOPT_SELF", 1),
    (pursuing, "adopt", {"src": "no such!"}, "SESSION_ID_INVALID", 2),
    (pursuing, "adopt", {"src": "sess-z"}, "ADOPT_CURRENT_BUSY", 1),
    (none, "adopt", {"src": "sess-z"}, "ADOPT_SOURCE_NOT_FOUND", 1),
]


@pytest.mark.parametrize(
    ("setup", "operation", "fields", "code", "exit_status"),
    CASES,
    ids=[f"{case[0].__name__}-{case[1]}-{case[3]}-{index}" for index, case in enumerate(CASES)],
)
def test_refusal_has_its_code_and_changes_nothing(
    ug: Any,
    setup: Setup,
    operation: str,
    fields: dict[str, Any],
    code: str,
    exit_status: int,
) -> None:
    setup(ug)
    os.symlink("/etc/hostname", ug.root / "escape.txt")
    before = ug.digest()

    with pytest.raises(IthacaError) as refused:
        ug.service.dispatch({"operation": operation, "session": ug.SESSION, **fields})

    assert refused.value.code == code, refused.value
    assert refused.value.exit_code == exit_status
    assert ug.digest() == before


def test_a_session_is_ambiguous_without_any_way_to_tell(ug: Any) -> None:
    with pytest.raises(IthacaError) as refused:
        ug.service.perform({"operation": "status"}, actor="agent", env={})
    assert refused.value.code == "SESSION_AMBIGUOUS"
    assert refused.value.details == {"candidates": []}


def test_strict_approval_refuses_relayed_confirmation(ug: Any) -> None:
    stories(ug)
    ug.service.config["ultragoal"]["strict_approval"] = True
    before = ug.digest()
    with pytest.raises(IthacaError) as refused:
        ug.call("confirm_all_stories")
    assert refused.value.code == "AUTHORITY_USER_ONLY"
    assert ug.digest() == before
    assert ug.as_user("confirm_all_stories")["confirmed"] == [A, B]


def test_only_a_budget_limited_pursuit_resumes(ug: Any) -> None:
    budget_limited(ug)
    answer = ug.as_user("resume_pursuit", max_iterations=30)
    assert (answer["phase"], answer["iteration"], answer["max_iterations"]) == ("pursuing", 0, 30)
    with pytest.raises(IthacaError) as again:
        ug.as_user("resume_pursuit")
    assert again.value.code == "RESUME_NOT_BUDGET_LIMITED"
