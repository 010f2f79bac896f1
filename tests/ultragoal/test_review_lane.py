"""The review lane: scope digests, the artifact schema, the reducer, and the lane's
operations (claim, ticket, submission, resolution, dismissal, renewal)."""

from __future__ import annotations

from typing import Any

import pytest

from ithaca.kernel import journal
from ithaca.kernel.errors import IthacaError
from ithaca.ultragoal import reducer
from ithaca.ultragoal.contract import scope_contract, scope_digest

ROW = {
    "outcome": "o",
    "verification_surface": "v",
    "constraints": "c",
    "boundaries": "b",
    "non_goals": "",
    "phase": "pursuing",
    "active": True,
    "review_resolution": None,
}
CONFIRMED_A = {
    "id": "A",
    "story": "s",
    "acceptance_criteria": ["y"],
    "verification_surface": "t",
    "status": "confirmed",
    "validator": {"snapshot_sha256": "f" * 64},
}
CONFIRMED_B = {
    "id": "B",
    "story": "s",
    "acceptance_criteria": ["x"],
    "verification_surface": "t",
    "status": "confirmed",
}
UNCONFIRMED_C = {**CONFIRMED_B, "id": "C", "status": "unconfirmed"}


def refused(call: Any, *args: Any, **kwargs: Any) -> IthacaError:
    with pytest.raises(IthacaError) as caught:
        call(*args, **kwargs)
    return caught.value


# --- the scope contract -----------------------------------------------------------------


def test_scope_digest_is_a_fixed_vector_independent_of_key_and_story_order() -> None:
    stories: list[dict[str, Any]] = [CONFIRMED_B, CONFIRMED_A, UNCONFIRMED_C]
    reordered = [dict(reversed(list(s.items()))) for s in reversed(stories)]
    expected = "ecd1dcf70c4de8c0e37a5a2fdb693f4790f44efc03042a7fb553501b821c008a"
    assert scope_digest(ROW, stories) == expected
    assert scope_digest(dict(reversed(list(ROW.items()))), reordered) == expected
    assert [s["id"] for s in scope_contract(ROW, stories)["stories"]] == ["A", "B"]


def test_a_validator_binding_changes_the_scope_digest() -> None:
    unbound = {**CONFIRMED_A, "validator": None}
    assert scope_digest(ROW, [CONFIRMED_B, unbound]) == (
        "1ec6a5850c02018e8a3440f708abfa6c446b3618623d7f0affd54767a3f1d94f"
    )
    rebound = {**CONFIRMED_A, "validator": {"snapshot_sha256": "e" * 64}}
    assert scope_digest(ROW, [CONFIRMED_B, rebound]) != scope_digest(
        ROW, [CONFIRMED_B, CONFIRMED_A]
    )


# --- the artifact schema ----------------------------------------------------------------


def finding(**changes: Any) -> dict[str, Any]:
    made: dict[str, Any] = {
        "class": "correctness",
        "verdict": "CONFIRMED",
        "impact": "HIGH",
        "priority": "HIGH",
        "assessment": {k: "x" for k in reducer.ASSESSMENT_KEYS},
        "scope": "IN_SCOPE",
        "scope_evidence": {"basis": "requirement", "reference": "outcome", "rationale": "r"},
        "ref": "a.py:1",
    }
    made.update(changes)
    return made


def artifact(findings: list[Any], **changes: Any) -> dict[str, Any]:
    made = {
        "status": "COMPLETE",
        "scope_contract_sha256": scope_digest(ROW, [CONFIRMED_A, CONFIRMED_B]),
        "findings": findings,
        "reviewer": "r",
        "at": "now",
        "files_read": [{"path": "a.py", "sha256": "0" * 64}],
    }
    made.update(changes)
    return made


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ([], ""),
        (artifact([], extra=1), "/extra"),
        ({"status": "COMPLETE"}, "/scope_contract_sha256"),
        (artifact([], status="DONE"), "/status"),
        (artifact([], scope_contract_sha256="ABC"), "/scope_contract_sha256"),
        (artifact([], reviewer=" "), "/reviewer"),
        (artifact([], at=5), "/at"),
        (artifact([], findings_report=1), "/findings_report"),
        (artifact([finding(colour="red")]), "/findings/0/colour"),
        (artifact([finding(klass="x")]), "/findings/0/klass"),
        (artifact([finding(**{"class": "style"})]), "/findings/0/class"),
        (artifact([finding(impact="URGENT")]), "/findings/0/impact"),
        (
            artifact([{k: v for k, v in finding().items() if k != "priority"}]),
            "/findings/0/priority",
        ),
        (artifact([finding(assessment={"rationale": "x"})]), "/findings/0/assessment"),
        (
            artifact([finding(assessment={k: " " for k in reducer.ASSESSMENT_KEYS})]),
            "/findings/0/assessment/unfixed_cost",
        ),
        (
            artifact([finding(scope="OUT_OF_SCOPE")]),
            "/findings/0/scope_evidence/basis",
        ),
        (
            artifact(
                [
                    finding(
                        scope_evidence={"basis": "requirement", "reference": "", "rationale": "r"}
                    )
                ]
            ),
            "/findings/0/scope_evidence/reference",
        ),
        (artifact([finding(ref="no line")]), "/findings/0/ref"),
        (artifact([finding(), "x"]), "/findings/1"),
        ({k: v for k, v in artifact([]).items() if k != "files_read"}, "/files_read"),
        (artifact([], files_read="a.py"), "/files_read"),
        (artifact([], files_read=[{"path": "a.py"}]), "/files_read/0"),
        (artifact([], files_read=[{"path": "/etc/passwd", "sha256": None}]), "/files_read/0/path"),
        (artifact([], files_read=[{"path": "a.py", "sha256": "ABC"}]), "/files_read/0/sha256"),
    ],
)
def test_artifact_schema_names_the_first_problem(value: Any, path: str) -> None:
    problem = reducer.artifact_problem(value)
    assert problem is not None and problem[0] == path


def test_inconclusive_artifacts_need_no_priority_or_assessment() -> None:
    bare = {k: v for k, v in finding().items() if k not in ("priority", "assessment")}
    assert reducer.artifact_problem(artifact([bare], status="INCONCLUSIVE")) is None
    assert reducer.artifact_problem(artifact([bare])) is not None


# --- the reducer ------------------------------------------------------------------------


def reduce(findings: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    value = artifact(findings, **changes)
    review = {"artifact": value, "artifact_sha256": reducer.artifact_sha256(value)}
    return reducer.reduce(ROW, [CONFIRMED_A, CONFIRMED_B], review, [])


MATRIX = [
    ("OUT_OF_SCOPE", "CONFIRMED", "HIGH", "NOTE", "notes", "COMMENT"),
    ("OUT_OF_SCOPE", "PLAUSIBLE", "LOW", "NOTE", "notes", "COMMENT"),
    ("UNKNOWN", "CONFIRMED", "LOW", "BLOCK", "adjudicate", "REQUEST_CHANGES"),
    ("UNKNOWN", "PLAUSIBLE", "HIGH", "BLOCK", "adjudicate", "REQUEST_CHANGES"),
    ("IN_SCOPE", "PLAUSIBLE", "HIGH", "ADJUDICATE", "adjudicate", "REQUEST_CHANGES"),
    ("IN_SCOPE", "PLAUSIBLE", "LOW", "ADJUDICATE", "adjudicate", "REQUEST_CHANGES"),
    ("IN_SCOPE", "CONFIRMED", "HIGH", "BLOCK", "repair", "REQUEST_CHANGES"),
    ("IN_SCOPE", "CONFIRMED", "MEDIUM", "FIX", "repair", "COMMENT"),
    ("IN_SCOPE", "CONFIRMED", "LOW", "NOTE", "notes", "COMMENT"),
]
BASIS = {"IN_SCOPE": "requirement", "OUT_OF_SCOPE": "unrelated", "UNKNOWN": "uncertain"}


@pytest.mark.parametrize(("scope", "verdict", "priority", "outcome", "group", "overall"), MATRIX)
def test_reducer_matrix(
    scope: str, verdict: str, priority: str, outcome: str, group: str, overall: str
) -> None:
    evidence = {"basis": BASIS[scope], "reference": "outcome", "rationale": "r"}
    result = reduce(
        [finding(scope=scope, verdict=verdict, priority=priority, scope_evidence=evidence)]
    )
    assert result["verdict"] == overall
    assert [item["outcome"] for item in result["findings"][group]] == [outcome]
    assert "reason" not in result


def test_no_findings_approve() -> None:
    assert reduce([])["verdict"] == "APPROVE"


@pytest.mark.parametrize(
    ("row_changes", "review", "reason"),
    [
        ({"phase": "budget_limited", "active": False}, artifact([]), reducer.NOT_PURSUING),
        ({}, None, reducer.MISSING),
        ({}, artifact([], scope_contract_sha256="0" * 64), reducer.STALE),
        (
            {},
            artifact(
                [
                    finding(
                        scope_evidence={
                            "basis": "requirement",
                            "reference": "boundaries",
                            "rationale": "r",
                        }
                    )
                ]
            ),
            reducer.BAD_SCOPE_EVIDENCE,
        ),
        ({}, artifact([], status="INCONCLUSIVE"), reducer.INCONCLUSIVE),
    ],
)
def test_unusable_artifacts_request_changes_with_the_reason(
    row_changes: dict[str, Any], review: dict[str, Any] | None, reason: str
) -> None:
    stored = (
        None
        if review is None
        else {
            "artifact": review,
            "artifact_sha256": reducer.artifact_sha256(review),
        }
    )
    result = reducer.reduce({**ROW, **row_changes}, [CONFIRMED_A, CONFIRMED_B], stored, [])
    assert (result["verdict"], result["reason"]) == ("REQUEST_CHANGES", reason)
    assert result["findings"] == {"repair": [], "adjudicate": [], "notes": []}


@pytest.mark.parametrize(
    ("scope", "basis", "reference", "valid"),
    [
        ("IN_SCOPE", "requirement", "outcome", True),
        ("IN_SCOPE", "requirement", "verification_surface", True),
        ("IN_SCOPE", "requirement", "A", True),
        ("IN_SCOPE", "requirement", "C", False),  # unconfirmed story
        ("IN_SCOPE", "requirement", "constraints", False),
        ("IN_SCOPE", "regression", "constraints", True),
        ("IN_SCOPE", "regression", "boundaries", True),
        ("IN_SCOPE", "regression", "B", True),
        ("IN_SCOPE", "regression", "non_goals", False),
        ("OUT_OF_SCOPE", "non_goal", "non_goals", False),  # the slot is blank
        ("OUT_OF_SCOPE", "non_goal", "outcome", False),
        ("OUT_OF_SCOPE", "unrelated", "outcome", True),
        ("OUT_OF_SCOPE", "unrelated", "A", False),
        ("UNKNOWN", "uncertain", "boundaries", True),
        ("UNKNOWN", "uncertain", "A", True),
        ("UNKNOWN", "uncertain", "elsewhere", False),
    ],
)
def test_reference_validity(scope: str, basis: str, reference: str, valid: bool) -> None:
    item = finding(
        scope=scope, scope_evidence={"basis": basis, "reference": reference, "rationale": "r"}
    )
    assert reducer.reference_valid(item, ROW, {"A", "B"}) is valid


# --- the lane's operations --------------------------------------------------------------


def reviewing(ug: Any) -> None:
    """Pursuing with every story approved: the review lane is open."""
    ug.pursue()
    ug.approve_stories()


def test_claims_follow_the_reference_order(ug: Any) -> None:
    assert ug.claim()["reason"] == "failure"
    ug.pursue()
    pending = ug.claim()
    assert (pending["reason"], pending["code"], pending["ids"]) == (
        "stories_pending",
        "REVIEW_STORIES_PENDING",
        ["A"],
    )
    ug.approve_stories()
    for used in range(1, 6):
        claim = ug.claim()
        assert (claim["allowed"], claim["used"], claim["cap"]) == (True, used, 5)
        assert len(claim["nonce"]) == 32
    exhausted = ug.claim()
    assert (exhausted["reason"], exhausted["code"]) == (
        "budget_exhausted",
        "REVIEW_DISPATCH_CAP_REACHED",
    )
    assert "approve-review-dispatch-renewal" in exhausted["renewal_command"]
    renewed = ug.as_user("approve_review_dispatch_renewal")
    assert renewed == {"allowed": True, "reason": "allowed", "used": 5, "cap": 10}
    nonce = ug.claim()["nonce"]
    ug.review(ug.artifact(), nonce=nonce)
    assert ug.claim()["reason"] == "completion_eligible"
    events = journal.query(ug.service.store.connection(), kind="ultragoal.review_dispatch_claimed")
    assert len(events) == 6


def test_renewal_records_the_valid_artifact_hash(ug: Any) -> None:
    reviewing(ug)
    result = ug.submit(ug.artifact([ug.finding()]))
    assert result["verdict"] == "REQUEST_CHANGES"
    ug.as_user("approve_review_dispatch_renewal")
    assert ug.call("get")["state"]["approved_review_artifact_sha256"] == result["artifact_sha256"]


def test_an_invalid_artifact_keeps_the_dispatch_open_and_each_attempt_spends_its_pass(
    ug: Any,
) -> None:
    reviewing(ug)
    nonce = ug.claim()["nonce"]
    bad = refused(ug.review, {"status": "COMPLETE"}, nonce=nonce)
    assert (bad.code, bad.details["path"]) == ("REVIEW_ARTIFACT_INVALID", "/scope_contract_sha256")
    again = refused(ug.call, "submit_review", nonce=nonce, artifact={"status": "COMPLETE"})
    assert again.code == "REVIEW_NOT_SEEN_FROM_REVIEWER"  # its pass is spent
    assert ug.review(ug.artifact(), nonce=nonce)["verdict"] == "APPROVE"
    spent = refused(ug.review, ug.artifact(), nonce=nonce)
    assert spent.code == "REVIEW_NOT_SEEN_FROM_REVIEWER"  # no dispatch open: no pass minted
    assert spent.details == {"dispatch_open": False}


def test_a_submission_the_hook_did_not_see_from_the_reviewer_is_refused(ug: Any) -> None:
    reviewing(ug)
    nonce = ug.claim()["nonce"]
    before = ug.digest()
    mine = refused(ug.call, "submit_review", nonce=nonce, artifact=ug.artifact())
    assert mine.code == "REVIEW_NOT_SEEN_FROM_REVIEWER"
    assert "reviewer subagent" in mine.message and mine.details == {"dispatch_open": True}
    assert ug.digest() == before
    ug.seen(ug.artifact([ug.finding()]))  # the reviewer submitted another artifact
    other = refused(ug.call, "submit_review", artifact=ug.artifact())
    assert other.code == "REVIEW_NOT_SEEN_FROM_REVIEWER"  # a pass binds the exact artifact
    assert ug.review(ug.artifact())["verdict"] == "APPROVE"  # no nonce needed


def test_a_nonce_given_must_name_an_open_dispatch(ug: Any) -> None:
    reviewing(ug)
    ug.claim()
    ug.seen(ug.artifact())
    wrong = refused(ug.call, "submit_review", nonce="0" * 32, artifact=ug.artifact())
    assert wrong.code == "REVIEW_NONCE_INVALID"


def test_a_superseded_artifact_becomes_a_blob_named_in_the_journal(ug: Any) -> None:
    reviewing(ug)
    first = ug.artifact([ug.finding()])
    ug.submit(first)
    ug.submit(ug.artifact())
    events = journal.query(ug.service.store.connection(), kind="ultragoal.review_submitted")
    blob = events[-1]["payload"]["superseded_blob"]
    assert blob == reducer.artifact_sha256(first)
    assert events[0]["payload"]["superseded_blob"] is None
    assert "nonce" not in events[-1]["payload"]["inputs"]


def test_review_ticket_hands_out_each_nonce_once(ug: Any) -> None:
    reviewing(ug)
    nonce = ug.claim()["nonce"]
    ticket = ug.call("review_ticket")
    assert ticket == {"session_id": ug.SESSION, "dispatch_no": 1, "nonce": nonce}
    assert refused(ug.call, "review_ticket").code == "REVIEW_TICKET_NONE"
    refused_alone = refused(ug.call, "submit_review", nonce=nonce, artifact=ug.artifact())
    assert refused_alone.code == "REVIEW_NOT_SEEN_FROM_REVIEWER"  # a nonce authorises nothing
    assert ug.review(ug.artifact(), nonce=nonce)["verdict"] == "APPROVE"


def test_a_nonce_delivered_in_the_prompt_is_not_ticketed(ug: Any) -> None:
    reviewing(ug)
    claim = ug.service.claim_review_dispatch(ug.SESSION, nonce_in_prompt=True)
    assert refused(ug.call, "review_ticket").code == "REVIEW_TICKET_NONE"
    assert ug.review(ug.artifact(), nonce=claim["nonce"])


def test_replanning_voids_unconsumed_nonces(ug: Any) -> None:
    reviewing(ug)
    nonce = ug.claim()["nonce"]
    ug.call("set", phase="planning")
    ug.as_user("confirm_all_stories")
    ug.seen(ug.artifact())  # no open dispatch: no pass
    assert refused(ug.call, "submit_review", nonce=nonce, artifact=ug.artifact()).code == (
        "REVIEW_NOT_SEEN_FROM_REVIEWER"
    )


def test_comment_resolution_binds_evidence_to_the_artifact(ug: Any) -> None:
    reviewing(ug)
    high = ug.submit(ug.artifact([ug.finding()]))
    ref = ug.write("evidence/fix.txt")
    not_comment = refused(
        ug.call,
        "record_comment_resolution",
        artifact_sha256=high["artifact_sha256"],
        evidence=[ref],
    )
    assert not_comment.code == "REVIEW_NOT_COMMENT"
    medium = ug.submit(ug.artifact([ug.finding(priority="MEDIUM")]))
    assert medium["verdict"] == "COMMENT"
    recorded = ug.call(
        "record_comment_resolution", artifact_sha256=medium["artifact_sha256"], evidence=[ref]
    )
    assert recorded["review_resolution"]["evidence"] == [ref]
    assert (
        ug.call("get_review_result")["resolution"]["artifact_sha256"] == medium["artifact_sha256"]
    )


def test_dismissal_clears_one_finding_and_lapses_with_the_next_artifact(ug: Any) -> None:
    reviewing(ug)
    first, second = ug.claim()["nonce"], ug.claim()["nonce"]
    findings = [ug.finding(), ug.finding(ref="b.py:2", priority="LOW")]
    result = ug.review(ug.artifact(findings), nonce=first)
    assert result["verdict"] == "REQUEST_CHANGES"
    fields = {"ref": "src/parser.py:10", "class": "correctness", "rationale": "the test is wrong"}
    ug.as_user("dismiss_review_finding", **fields)
    assert ug.call("get_review_result")["verdict"] == "COMMENT"
    state = ug.call("get")["state"]
    assert state["dismissed_review_findings"] == [
        {
            "artifact_sha256": result["artifact_sha256"],
            "ref": "src/parser.py:10",
            "class": "correctness",
            "rationale": "the test is wrong",
        }
    ]
    before = ug.digest()
    assert ug.as_user("dismiss_review_finding", **fields)["repeated"] is True
    assert ug.digest() == before
    next_round = {**ug.artifact(findings), "at": "later"}
    assert ug.review(next_round, nonce=second)["verdict"] == ("REQUEST_CHANGES")


@pytest.mark.parametrize(
    ("findings", "fields", "code"),
    [
        ([], {"ref": " ", "class": "correctness", "rationale": "r"}, "DISMISS_INPUT_BLANK"),
        ([], {"ref": "a:1", "class": "correctness", "rationale": ""}, "DISMISS_INPUT_BLANK"),
        ([], {"ref": "a:1", "class": "style", "rationale": "r"}, "INVALID_INPUT"),
        (None, {"ref": "a:1", "class": "correctness", "rationale": "r"}, "REVIEW_MISSING"),
        ([], {"ref": "a.py:9", "class": "correctness", "rationale": "r"}, "DISMISS_NO_MATCH"),
        (
            [{"priority": "LOW"}],
            {"ref": "src/parser.py:10", "class": "correctness", "rationale": "r"},
            "DISMISS_NO_MATCH",
        ),
        (
            [{}, {}],
            {"ref": "src/parser.py:10", "class": "correctness", "rationale": "r"},
            "DISMISS_AMBIGUOUS",
        ),
        (
            [{"verdict": "PLAUSIBLE"}],
            {"ref": "src/parser.py:10", "class": "correctness", "rationale": "r"},
            "DISMISS_NOT_CONFIRMED",
        ),
        (
            [{"reference": "nowhere"}],
            {"ref": "src/parser.py:10", "class": "correctness", "rationale": "r"},
            "REVIEW_SCOPE_EVIDENCE_INVALID",
        ),
    ],
)
def test_dismissal_refusals(
    ug: Any, findings: list[dict[str, Any]] | None, fields: dict[str, Any], code: str
) -> None:
    reviewing(ug)
    if findings is not None:
        ug.submit(ug.artifact([ug.finding(**changes) for changes in findings]))
    before = ug.digest()
    assert refused(ug.as_user, "dismiss_review_finding", **fields).code == code
    assert ug.digest() == before


def test_dismissal_of_a_stale_review_and_outside_pursuit(ug: Any) -> None:
    reviewing(ug)
    ug.submit(ug.artifact([ug.finding()]))
    fields = {"ref": "src/parser.py:10", "class": "correctness", "rationale": "r"}
    ug.call("add_story", story={**ug.STORY_B, "id": "C"}, evidence="e", rationale="r")
    ug.as_user("confirm_story", id="C")  # the scope grew: the review is stale
    assert refused(ug.as_user, "dismiss_review_finding", **fields).code == "REVIEW_SCOPE_STALE"
    ug.call("set_blocked", reason="stuck")
    assert refused(ug.as_user, "dismiss_review_finding", **fields).code == "PURSUIT_PAUSED"


def test_renewal_needs_pursuit(ug: Any) -> None:
    ug.plan()
    assert refused(ug.as_user, "approve_review_dispatch_renewal").code == "PHASE_NOT_PURSUING"
