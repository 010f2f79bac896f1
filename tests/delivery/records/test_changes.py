"""``record change_contract …``: profiles and their gaps, incident diagnoses with Ulysses
blocks, revise by merge patch, cancel, and archived changes refusing writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.kernel.errors import Conflict, InvalidInput, NotFound, Refused

FULL_CONTRACT = {
    "outcome": "Users can sign in.",
    "acceptance": [{"id": "A1", "criterion": "valid login reaches /home", "verification": "e2e"}],
    "non_goals": ["SSO"],
    "public_seams": ["POST /login"],
    "recovery": {"strategy": "feature flag", "verification": "flag off restores old page"},
}
DIAGNOSIS = {
    "reproduction": "POST /login with a + in the email.",
    "hypotheses": "The address is URL-decoded twice.",
    "root_cause": "Double decoding in the form parser.",
    "regression_test": "tests/test_login.py::test_plus_address",
    "recovery": "Revert the parser change.",
}


def gaps(result: dict[str, Any]) -> list[str]:
    return sorted(
        found["code"].split(":", 1)[1]
        for found in result["diagnostics"]
        if found["code"].startswith("CHANGE_CONTRACT_GAP:")
    )


def codes(result: dict[str, Any]) -> list[str]:
    return [found["code"] for found in result["diagnostics"]]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("quick", ["contract.outcome"]),
        ("standard", ["contract.acceptance", "contract.outcome"]),
        (
            "major",
            [
                "classification.rationale",
                "classification.risk_flags",
                "contract.acceptance",
                "contract.non_goals",
                "contract.outcome",
                "contract.public_seams",
                "contract.recovery",
                "research_disposition",
            ],
        ),
    ],
)
def test_each_profile_warns_about_its_missing_parts(
    new_change: Any, kind: str, expected: list[str]
) -> None:
    result = new_change("add-login", kind)
    assert result["status"] == "committed"
    assert gaps(result) == expected


def test_a_complete_major_contract_has_no_gaps(new_change: Any) -> None:
    result = new_change(
        "add-login",
        "major",
        contract=FULL_CONTRACT,
        classification={"rationale": "touches auth", "risk_flags": []},
        research_disposition="bounded",
    )
    assert gaps(result) == []


def test_a_risky_quick_change_is_advised_to_escalate(new_change: Any) -> None:
    result = new_change(
        "add-login", "quick", contract={"outcome": "x"}, classification={"risk_flags": ["auth"]}
    )
    assert "CHANGE_PROFILE_ESCALATION_SUGGESTED" in codes(result)


def test_open_writes_intent_and_registers_it(
    opened_change: dict[str, Any], state_root: Path, project: IthacaProject
) -> None:
    intent = state_root / "changes/active/add-login/intent.md"
    assert intent.read_text() == "# Add login\n\nUsers sign in with email.\n"
    row = project.store.connection().execute(
        "SELECT digest, kind, scope_type, scope_id FROM delivery_files WHERE path = ?",
        ("changes/active/add-login/intent.md",),
    )
    assert row.fetchone() == (
        opened_change["result"]["files"][0]["digest"],
        "intent",
        "change",
        "add-login",
    )


def test_an_id_is_made_from_the_title_when_none_is_given(record: Any) -> None:
    body = {"kind": "quick", "title": "Fix the Login Page!", "intent": "x"}
    first = record("change_contract", "open", body)["result"]["change"]
    second = record("change_contract", "open", body)["result"]["change"]
    assert (first["id"], second["id"]) == ("fix-the-login-page", "fix-the-login-page-2")


def test_opening_a_taken_id_is_a_conflict(new_change: Any) -> None:
    new_change("add-login")
    with pytest.raises(Conflict) as caught:
        new_change("add-login", "quick")
    assert caught.value.code == "CHANGE_EXISTS"


def test_an_incident_writes_the_five_diagnosis_sections_in_order(
    new_change: Any, state_root: Path
) -> None:
    result = new_change("login-500", "incident", diagnosis=DIAGNOSIS)
    text = (state_root / "changes/active/login-500/diagnosis.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Reproduction",
        "## Hypotheses",
        "## Root cause",
        "## Regression test",
        "## Recovery",
    ]
    for body in DIAGNOSIS.values():
        assert body in text
    assert not [code for code in codes(result) if code.startswith("DIAGNOSIS_SECTION_MISSING")]


def test_short_diagnosis_sections_warn_and_are_never_refused(new_change: Any) -> None:
    result = new_change("login-500", "incident", diagnosis={"reproduction": "ok"})
    missing = [code for code in codes(result) if code.startswith("DIAGNOSIS_SECTION_MISSING:")]
    assert missing == [
        "DIAGNOSIS_SECTION_MISSING:reproduction",
        "DIAGNOSIS_SECTION_MISSING:hypotheses",
        "DIAGNOSIS_SECTION_MISSING:root_cause",
        "DIAGNOSIS_SECTION_MISSING:regression_test",
        "DIAGNOSIS_SECTION_MISSING:recovery",
    ]


def test_caller_text_may_not_hold_the_block_markers(new_change: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        new_change(
            "login-500", "incident", diagnosis={"hypotheses": "<!-- ithaca:ulysses:begin -->"}
        )
    assert caught.value.details["pointer"] == "/entries/0/data/diagnosis/hypotheses"


def test_an_unknown_debug_session_warns(new_change: Any) -> None:
    result = new_change("login-500", "incident", debug_session_id="uly_nope")
    assert "DEBUG_SESSION_NOT_FOUND" in codes(result)


def test_a_linked_ulysses_session_gets_blocks_refreshed_at_revise_keeping_caller_text(
    new_change: Any, record: Any, project: IthacaProject, state_root: Path
) -> None:
    session = project.ulysses.init({"problem": "login fails", "constraints": []})
    new_change("login-500", "incident", diagnosis=DIAGNOSIS, debug_session_id=session["session_id"])
    path = state_root / "changes/active/login-500/diagnosis.md"
    text = path.read_text()
    assert text.count("<!-- ithaca:ulysses:begin -->") == 3
    assert "checkpoint `initial`" in text
    assert "- none recorded yet" in text
    assert f"Ulysses session {session['session_id']}: active." in text

    with project.store.write() as conn:
        state = json.loads(conn.execute("SELECT state_json FROM ulysses_sessions").fetchone()[0])
        state["hypotheses"].append(
            {"seq": 1, "hypothesis": "decoded twice", "falsification": "single decode still fails"}
        )
        conn.execute("UPDATE ulysses_sessions SET state_json = ?", (json.dumps(state),))
    record("change_contract", "revise", {"id": "login-500", "patch": {}})
    refreshed = path.read_text()
    assert "- H1: decoded twice (falsified if: single decode still fails)" in refreshed
    assert "- none recorded yet" not in refreshed
    for body in DIAGNOSIS.values():
        assert body in refreshed


def test_revise_applies_a_merge_patch_bumps_the_revision_and_rewrites_intent(
    new_change: Any, record: Any, state_root: Path
) -> None:
    new_change("add-login", "standard", contract={"outcome": "sign in", "non_goals": ["SSO"]})
    revised = record(
        "change_contract",
        "revise",
        {
            "id": "add-login",
            "expected_revision": 1,
            "patch": {
                "title": "Add login form",
                "contract": {"non_goals": None, "outcome": "log in"},
            },
            "status": "blocked",
            "intent": "New intent.",
        },
    )
    change = revised["result"]["change"]
    assert change["revision"] == 2
    assert change["title"] == "Add login form"
    assert change["status"] == "blocked"
    assert change["contract"] == {"outcome": "log in"}
    assert (state_root / "changes/active/add-login/intent.md").read_text() == "New intent.\n"


def test_a_revise_that_changes_nothing_is_a_no_op(
    opened_change: dict[str, Any], record: Any, count_events: Any
) -> None:
    events = count_events("")
    result = record("change_contract", "revise", {"id": "add-login", "patch": {}})
    assert result["result"]["unchanged"] is True
    assert count_events("") == events


def test_revise_with_a_stale_revision_or_unknown_id_fails(
    opened_change: dict[str, Any], record: Any
) -> None:
    with pytest.raises(Conflict) as caught:
        record(
            "change_contract", "revise", {"id": "add-login", "patch": {}, "expected_revision": 4}
        )
    assert caught.value.code == "REVISION_CONFLICT"
    with pytest.raises(NotFound) as missing:
        record("change_contract", "revise", {"id": "no-such", "patch": {}})
    assert missing.value.code == "CHANGE_NOT_FOUND"


def test_the_patched_contract_is_checked(opened_change: dict[str, Any], record: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        record("change_contract", "revise", {"id": "add-login", "patch": {"kind": None}})
    assert caught.value.details["pointer"] == "/entries/0/data/patch/kind"


def test_cancel_and_then_revise_is_refused(opened_change: dict[str, Any], record: Any) -> None:
    cancelled = record("change_contract", "cancel", {"id": "add-login", "reason": "dropped"})
    assert cancelled["result"]["change"]["status"] == "cancelled"
    again = record("change_contract", "cancel", {"id": "add-login", "reason": "dropped"})
    assert again["result"]["unchanged"] is True
    with pytest.raises(Refused) as caught:
        record("change_contract", "revise", {"id": "add-login", "patch": {}})
    assert caught.value.code == "CHANGE_CANCELLED"


def test_cancel_with_a_task_in_progress_conflicts(
    opened_change: dict[str, Any], record: Any, project: IthacaProject
) -> None:
    record(
        "task_contract",
        "define",
        {"id": "T-1", "title": "t", "change_id": "add-login", "verification": {"argv": ["x"]}},
    )
    with project.store.write() as conn:
        conn.execute("UPDATE delivery_tasks SET status = 'in_progress'")
    with pytest.raises(Conflict) as caught:
        record("change_contract", "cancel", {"id": "add-login", "reason": "dropped"})
    assert caught.value.code == "SESSIONS_RUNNING"
    assert caught.value.details["tasks"] == ["T-1"]


def test_writes_into_an_archived_change_are_refused(
    opened_change: dict[str, Any], record: Any, project: IthacaProject
) -> None:
    with project.store.write() as conn:
        conn.execute("UPDATE delivery_changes SET status = 'archived'")
    attempts = [
        ("change_contract", "revise", {"id": "add-login", "patch": {}}),
        ("change_contract", "cancel", {"id": "add-login", "reason": "x"}),
        (
            "decision",
            "defer",
            {
                "scope": {"change_id": "add-login"},
                "question": "q",
                "recommendation": "r",
                "owner": "o",
                "consequence": "c",
            },
        ),
        (
            "task_contract",
            "define",
            {"id": "T-1", "title": "t", "change_id": "add-login", "verification": {"argv": ["x"]}},
        ),
        (
            "artifact",
            "bind",
            {
                "kind": "research",
                "scope": {"change_id": "add-login"},
                "path": "research/a.md",
                "content": "a",
            },
        ),
    ]
    for kind, action, data in attempts:
        with pytest.raises(Refused) as caught:
            record(kind, action, data)
        assert caught.value.code == "CHANGE_ARCHIVED", (kind, action)
