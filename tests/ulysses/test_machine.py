"""The pure Ulysses state machine: every row of the transition table, then properties over
random operation sequences and validator results."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ithaca.kernel.errors import IthacaError, NotFound, Refused
from ithaca.ulysses import machine, refusals, session
from ithaca.ulysses.session import PHASE_S, STATUSES

NOW = "2025-03-01T10:00:00.000Z"
LATER = "2025-03-01T11:00:00.000Z"
FAIL_CAUSES = (None, "timeout", "oom", "signal", "crash", "too_large", "bad_json", "no_verdict")
TAMPER_CAUSES = ("binding_mismatch", "blob_missing", "blob_mismatch")


def observation(label: str, at: str = NOW, restorable: Any = True) -> dict[str, Any]:
    return {
        "label": label,
        "at": at,
        "git_head": "c" * 40,
        "worktree_digest": "d" * 64,
        "snapshot_ref": f"refs/ithaca/checkpoints/s/{label}",
        "restorable": restorable,
    }


def binding(name: str) -> dict[str, Any]:
    return {
        "binding_id": f"vb_{name}",
        "notebookId": "nb_1",
        "cellId": f"cell_{name}",
        "cellVersion": 1,
        "snapshotHash": name[0] * 64,
        "language": "python",
        "mode": "judge",
    }


def verdict(passed: bool, cause: str | None = None, *, tamper: bool = False) -> dict[str, Any]:
    if tamper:
        reason = session.TAMPER_REASON
    elif passed:
        reason = "all good"
    else:
        reason = "malformed_verdict" if cause else "still broken"
    return {"pass": passed, "reason": reason, "cause": cause, "evidenceDigest": "e" * 64}


def facts(**extra: Any) -> dict[str, Any]:
    return {"now": NOW, **extra}


def init(state: Any = None, *, supersede: bool = False, session_id: str = "uly_1") -> Any:
    command: dict[str, Any] = {"operation": "init", "problem": "tests flake", "constraints": []}
    if supersede:
        command["supersede"] = True
    return machine.transition(
        state, command, facts(session_id=session_id, checkpoint=observation("initial"))
    )


def plan_command(primary: str = "fix the retry", recovery: str = "revert it") -> dict[str, Any]:
    return {
        "operation": "plan",
        "primary": primary,
        "recovery": recovery,
        "irreversible": False,
        "primaryValidator": {"notebookId": "nb_1", "cellId": "cell_primary"},
        "recoveryValidator": {"notebookId": "nb_1", "cellId": "cell_recovery"},
    }


def plan_facts(step_id: str = "step_1") -> dict[str, Any]:
    return facts(
        step_id=step_id,
        base=observation("base", restorable=False),
        bindings={"primary": binding("primary"), "recovery": binding("recovery")},
    )


def plan(state: Any, primary: str = "fix the retry", recovery: str = "revert it") -> Any:
    return machine.transition(state, plan_command(primary, recovery), plan_facts())


def outcome(state: Any, validation: dict[str, Any], **extra: Any) -> Any:
    command = {"operation": "outcome", "observed": None, **extra}
    kind = session.observation_needed(state, command, validation)
    observed = {kind: observation(kind)} if kind else {}
    return machine.transition(state, command, facts(validation=validation, **observed))


def reflect(state: Any) -> Any:
    return machine.transition(
        state,
        {"operation": "reflect", "hypothesis": "the cache is stale", "falsification": "clear it"},
        facts(worktree_digest="d" * 64),
    )


def bind_final(state: Any, operation: str = "bind_final_validator", **extra: Any) -> Any:
    """Bind the final validator, seen failing on the problem as it stands."""
    return machine.transition(
        state,
        {"operation": operation, "notebookId": "nb_1", "cellId": "cell_final"},
        facts(binding=binding("final"), demonstration=verdict(False), **extra),
    )


def complete(state: Any, terminal: str, validation: dict[str, Any] | None = None) -> Any:
    command: dict[str, Any] = {"operation": "complete", "terminalState": terminal}
    if terminal == "resolved":
        command.update(summary="retry with backoff", observed={"ok": True})
    if terminal == "insufficient_information":
        command["missing"] = ["the production logs"]
    extra: dict[str, Any] = {}
    if validation is not None:
        extra["validation"] = validation
        kind = session.observation_needed(state, command, validation)
        if kind:
            extra[kind] = observation(kind)
    return machine.transition(state, command, facts(**extra))


def in_phase(phase: str, *, final: bool = False) -> dict[str, Any]:
    state: dict[str, Any]
    state, _ = init()
    if final:
        state, _ = bind_final(state)
    if phase == "IDLE":
        return state
    state, _ = plan(state)
    if phase == "PRIMARY":
        return state
    state, _ = outcome(state, verdict(False))
    if phase == "RECOVERY":
        return state
    state, _ = outcome(state, verdict(False))
    assert state["phase"] == "REFLECT"
    return state


def refused(code: str, state: Any, command: dict[str, Any], extra: dict[str, Any]) -> None:
    before = repr(state)
    with pytest.raises(IthacaError) as caught:
        machine.transition(state, command, facts(**extra))
    assert caught.value.code == code
    assert repr(state) == before


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["kind"] for event in events]


# --- rows 1–3: init ---------------------------------------------------------------------


def test_row1_init_without_a_session_starts_idle_with_the_initial_checkpoint() -> None:
    state, events = init()
    assert (state["status"], state["phase"], state["S"], state["active_step"]) == (
        "active",
        "IDLE",
        0,
        None,
    )
    assert [point["label"] for point in state["checkpoints"]] == ["initial"]
    assert state["version"] == 1
    assert kinds(events) == ["ulysses.init"]
    assert events[0]["subject"] == "uly_1"
    assert events[0]["payload"] == {
        "problem": "tests flake",
        "constraints": [],
        "checkpoint": observation("initial"),
    }


def test_row1_init_after_a_closed_session_starts_a_new_one() -> None:
    state, _ = complete(in_phase("IDLE"), "environment_compromised")
    fresh, events = init(state, session_id="uly_2")
    assert fresh["session_id"] == "uly_2"
    assert kinds(events) == ["ulysses.init"]


def test_row2_init_while_active_is_session_active() -> None:
    state = in_phase("PRIMARY")
    refused(
        "SESSION_ACTIVE",
        state,
        {"operation": "init", "problem": "x", "constraints": []},
        {"session_id": "uly_2", "checkpoint": observation("initial")},
    )


def test_row3_superseding_init_closes_the_old_session_and_abandons_its_step() -> None:
    old = in_phase("PRIMARY")
    fresh, events = init(old, supersede=True, session_id="uly_2")
    assert kinds(events) == ["ulysses.superseded", "ulysses.init"]
    assert events[0]["subject"] == "uly_1"
    assert events[0]["payload"] == {"by": "uly_2"}
    assert (fresh["session_id"], fresh["phase"]) == ("uly_2", "IDLE")

    closed = machine.supersede(old, by="uly_2", now=LATER)
    assert closed["status"] == "superseded"
    assert closed["steps"][-1]["result"] == "abandoned"
    assert closed["active_step"] is None and closed["phase"] is None
    assert closed["version"] == old["version"] + 1


# --- rows 4–7: plan ---------------------------------------------------------------------


def test_row4_plan_in_idle_enters_primary_with_both_validators_pinned() -> None:
    state, events = plan(in_phase("IDLE"))
    assert (state["phase"], state["S"]) == ("PRIMARY", 1)
    step = state["active_step"]
    assert step["step_id"] == "step_1"
    assert step["primaryValidator"] == binding("primary")
    assert kinds(events) == ["ulysses.planned"]
    payload = events[0]["payload"]
    assert payload["primaryValidator"] == {
        "binding_id": "vb_primary",
        "notebookId": "nb_1",
        "cellId": "cell_primary",
        "cellVersion": 1,
        "snapshotHash": "p" * 64,
    }
    assert payload["recoveryValidator"]["snapshotHash"] == "r" * 64
    assert payload["base"]["label"] == "base"
    assert state["version"] == 2


@pytest.mark.parametrize(
    "variant",
    ["Fix The Retry", "  fix   the\tretry  ", "ｆｉｘ ｔｈｅ ｒｅｔｒｙ", "FIX THE RETRY\n"],
)
@pytest.mark.parametrize("field", ["primary", "recovery"])
def test_row5_plan_repeating_a_forbidden_move_is_refused(variant: str, field: str) -> None:
    state = reflect(in_phase("REFLECT"))[0]
    command = plan_command("another idea", "another fallback")
    command[field] = variant
    with pytest.raises(Refused) as caught:
        machine.transition(state, command, plan_facts("step_2"))
    assert caught.value.code == "FORBIDDEN_MOVE"
    assert caught.value.details["origin_step"] == "step_1"
    assert caught.value.details["field"] == field
    assert caught.value.details["move"] == variant


@pytest.mark.parametrize("phase", ["PRIMARY", "RECOVERY"])
def test_row6_plan_with_an_open_step_is_step_active(phase: str) -> None:
    refused("STEP_ACTIVE", in_phase(phase), plan_command("x", "y"), plan_facts("step_2"))


@pytest.mark.parametrize("operation", ["plan", "outcome"])
def test_row7_plan_or_outcome_in_reflect_is_reflect_required(operation: str) -> None:
    command = plan_command("x", "y") if operation == "plan" else {"operation": "outcome"}
    refused("REFLECT_REQUIRED", in_phase("REFLECT"), command, plan_facts("step_2"))


# --- rows 8–13: outcome -------------------------------------------------------------------


def test_row8_primary_pass_returns_to_idle_with_a_checkpoint() -> None:
    state, events = outcome(in_phase("PRIMARY"), verdict(True), details="tests green")
    assert (state["phase"], state["S"], state["active_step"]) == ("IDLE", 0, None)
    assert state["steps"][-1]["result"] == "passed_primary"
    assert [point["label"] for point in state["checkpoints"]] == ["initial", "checkpoint"]
    assert kinds(events) == ["ulysses.outcome"]
    payload = events[0]["payload"]
    assert payload["assessment"] == "expected"
    assert (payload["role"], payload["from"], payload["to"]) == ("primary", "PRIMARY", "IDLE")
    assert payload["details"] == "tests green"
    assert payload["checkpoint"]["label"] == "checkpoint"
    assert state["evidence"] == [
        {"role": "primary", "snapshotHash": "p" * 64, "evidenceDigest": "e" * 64, "pass": True}
    ]


@pytest.mark.parametrize("cause", FAIL_CAUSES)
def test_row9_primary_non_pass_enters_recovery(cause: str | None) -> None:
    before = in_phase("PRIMARY")
    state, events = outcome(before, verdict(False, cause))
    assert (state["phase"], state["S"]) == ("RECOVERY", 2)
    assert state["active_step"] == before["active_step"]
    payload = events[0]["payload"]
    assert (payload["assessment"], payload["cause"]) == ("unexpected-unfavorable", cause)
    assert (payload["from"], payload["to"]) == ("PRIMARY", "RECOVERY")
    assert state["forbidden_moves"] == []


def test_row10_recovery_pass_returns_to_idle() -> None:
    state, events = outcome(in_phase("RECOVERY"), verdict(True))
    assert (state["phase"], state["active_step"]) == ("IDLE", None)
    assert state["steps"][-1]["result"] == "passed_recovery"
    assert events[0]["payload"]["role"] == "recovery"


@pytest.mark.parametrize("cause", FAIL_CAUSES)
def test_row11_recovery_non_pass_forbids_both_moves_and_requires_reflect(
    cause: str | None,
) -> None:
    state, events = outcome(in_phase("RECOVERY"), verdict(False, cause))
    assert (state["phase"], state["S"], state["active_step"]) == ("REFLECT", 2, None)
    assert state["steps"][-1]["result"] == "failed"
    assert [(m["text"], m["key"], m["reason"]) for m in state["forbidden_moves"]] == [
        ("fix the retry", "fix the retry", "failed"),
        ("revert it", "revert it", "failed"),
    ]
    payload = events[0]["payload"]
    assert payload["forbidden_added"] == state["forbidden_moves"]
    assert payload["reflect_base"]["label"] == "reflect_base"
    assert state["reflect_base"] == payload["reflect_base"]


@pytest.mark.parametrize("cause", TAMPER_CAUSES)
@pytest.mark.parametrize("phase", ["PRIMARY", "RECOVERY"])
def test_row12_a_failed_snapshot_check_forces_reflect(phase: str, cause: str) -> None:
    state, events = outcome(in_phase(phase), verdict(False, cause, tamper=True))
    assert (state["phase"], state["S"]) == ("REFLECT", 2)
    assert state["steps"][-1]["result"] == "tampered"
    assert {m["reason"] for m in state["forbidden_moves"]} == {"tampered"}
    assert len(state["forbidden_moves"]) == 2
    assert kinds(events) == ["ulysses.validator_tampering"]
    payload = events[0]["payload"]
    assert payload["role"] == phase.lower()
    assert payload["kind"] == cause
    assert payload["expected"] == ("p" if phase == "PRIMARY" else "r") * 64
    assert payload["step_id"] == "step_1"
    assert payload["reflect_base"]["label"] == "reflect_base"


def test_row13_outcome_in_idle_is_no_active_step() -> None:
    refused(
        "NO_ACTIVE_STEP",
        in_phase("IDLE"),
        {"operation": "outcome", "observed": 1},
        {"validation": verdict(True)},
    )


# --- rows 14–16: reflect ------------------------------------------------------------------


def test_row14_reflect_in_reflect_returns_to_idle_with_a_hypothesis() -> None:
    state, events = reflect(in_phase("REFLECT"))
    assert (state["phase"], state["S"], state["reflect_base"]) == ("IDLE", 0, None)
    assert state["hypotheses"] == [
        {"seq": 1, "hypothesis": "the cache is stale", "falsification": "clear it", "at": NOW}
    ]
    assert kinds(events) == ["ulysses.reflected"]
    assert events[0]["payload"] == {
        "hypothesis_seq": 1,
        "hypothesis": "the cache is stale",
        "falsification": "clear it",
        "worktree_digest": "d" * 64,
    }


@pytest.mark.parametrize(
    ("phase", "code"),
    [
        ("IDLE", "REFLECT_NOT_REQUIRED"),
        ("PRIMARY", "REFLECT_NOT_REQUIRED"),
        ("RECOVERY", "RECOVERY_OUTCOME_PENDING"),
    ],
)
def test_rows15_16_reflect_outside_reflect_is_refused(phase: str, code: str) -> None:
    refused(
        code,
        in_phase(phase),
        {"operation": "reflect", "hypothesis": "h", "falsification": "f"},
        {"worktree_digest": None},
    )


# --- rows 17–18: final validator ----------------------------------------------------------


@pytest.mark.parametrize("phase", ["IDLE", "PRIMARY"])
def test_row17_the_agent_binds_the_final_validator_before_the_first_outcome(phase: str) -> None:
    before = in_phase(phase)
    state, events = bind_final(before)
    assert state["finalValidator"] == binding("final")
    assert state["phase"] == phase
    assert state["version"] == before["version"] + 1
    assert kinds(events) == ["ulysses.final_validator_bound"]
    assert events[0]["actor"] == "agent"
    assert events[0]["payload"]["snapshotHash"] == "f" * 64
    assert events[0]["payload"]["failsOnProblem"]["reason"] == verdict(False)["reason"]


@pytest.mark.parametrize("phase", ["RECOVERY", "REFLECT"])
def test_after_the_first_outcome_binding_the_final_validator_is_the_users(phase: str) -> None:
    command = {"operation": "bind_final_validator", "notebookId": "nb_1", "cellId": "c"}
    demonstration = verdict(False)
    refused(
        "FINAL_VALIDATOR_LATE",
        in_phase(phase),
        command,
        {"binding": binding("final"), "demonstration": demonstration},
    )
    state, events = bind_final(in_phase(phase), "replace_final_validator")
    assert state["finalValidator"] == binding("final")
    assert (events[0]["kind"], events[0]["actor"]) == ("ulysses.final_validator_bound", "user")


def test_row18_a_second_final_validator_is_the_users_to_bind() -> None:
    state, _ = bind_final(in_phase("IDLE"))
    refused(
        "FINAL_VALIDATOR_ALREADY_BOUND",
        state,
        {"operation": "bind_final_validator", "notebookId": "nb_1", "cellId": "c"},
        {"binding": binding("other"), "demonstration": verdict(False)},
    )
    replaced, events = bind_final(state, "replace_final_validator")
    assert events[0]["payload"]["replaced"] == binding("final")["binding_id"]


@pytest.mark.parametrize("operation", ["bind_final_validator", "replace_final_validator"])
def test_a_final_validator_that_passes_on_the_problem_is_refused(operation: str) -> None:
    refused(
        "FINAL_VALIDATOR_CANNOT_FAIL",
        in_phase("IDLE"),
        {"operation": operation, "notebookId": "nb_1", "cellId": "c"},
        {"binding": binding("final"), "demonstration": verdict(True)},
    )


def test_the_first_failing_outcome_keeps_the_problem_as_it_stood() -> None:
    state, _ = plan(init()[0])
    command = {"operation": "outcome", "observed": {"errors": 3}}
    failed, _ = machine.transition(state, command, facts(validation=verdict(False), problem="p1"))
    assert failed is not None and failed["problem_observed"] == "p1"
    again, _ = machine.transition(
        failed,
        command,
        facts(validation=verdict(False), problem="p2", reflect_base=observation("reflect_base")),
    )
    assert again is not None and again["problem_observed"] == "p1"


# --- rows 19–25: complete -----------------------------------------------------------------


@pytest.mark.parametrize("phase", ["IDLE", "PRIMARY", "RECOVERY"])
def test_row19_resolved_with_a_passing_final_validator_closes_the_session(phase: str) -> None:
    state, events = complete(in_phase(phase, final=True), "resolved", verdict(True))
    assert (state["status"], state["phase"], state["S"]) == ("resolved", None, None)
    assert state["completed_at"] == NOW
    if phase != "IDLE":
        assert state["steps"][-1]["result"] == "abandoned"
    assert kinds(events) == ["ulysses.completed"]
    assert events[0]["payload"] == {
        "terminalState": "resolved",
        "summary": "retry with backoff",
        "final": {"snapshotHash": "f" * 64, "evidenceDigest": "e" * 64},
    }
    assert state["evidence"][-1]["role"] == "final"


def test_row20_resolved_in_reflect_is_reflect_required() -> None:
    refused(
        "REFLECT_REQUIRED",
        in_phase("REFLECT", final=True),
        {"operation": "complete", "terminalState": "resolved"},
        {"validation": verdict(True)},
    )


def test_row21_resolved_without_a_final_validator_is_refused() -> None:
    refused(
        "FINAL_VALIDATOR_REQUIRED",
        in_phase("IDLE"),
        {"operation": "complete", "terminalState": "resolved"},
        {"validation": verdict(True)},
    )


@pytest.mark.parametrize("cause", FAIL_CAUSES)
def test_row22_a_failing_final_validator_leaves_the_state(cause: str | None) -> None:
    state = in_phase("PRIMARY", final=True)
    with pytest.raises(Refused) as caught:
        complete(state, "resolved", verdict(False, cause))
    assert caught.value.code == "FINAL_VALIDATOR_FAILED"
    assert caught.value.details["validation"]["cause"] == cause
    assert state["phase"] == "PRIMARY"


@pytest.mark.parametrize("phase", ["IDLE", "PRIMARY", "RECOVERY"])
def test_row23_a_tampered_final_validator_forces_reflect(phase: str) -> None:
    state, events = complete(
        in_phase(phase, final=True), "resolved", verdict(False, "blob_missing", tamper=True)
    )
    assert (state["status"], state["phase"]) == ("active", "REFLECT")
    assert kinds(events) == ["ulysses.validator_tampering"]
    payload = events[0]["payload"]
    assert (payload["role"], payload["kind"]) == ("final", "blob_missing")
    assert payload["expected"] == "f" * 64
    if phase == "IDLE":
        assert "step_id" not in payload and payload["forbidden_added"] == []
    else:
        assert state["steps"][-1]["result"] == "tampered"
        assert len(payload["forbidden_added"]) == 2
    assert state["finalValidator"] == binding("final")


@pytest.mark.parametrize("terminal", ["insufficient_information", "environment_compromised"])
@pytest.mark.parametrize("phase", ["IDLE", "PRIMARY", "RECOVERY", "REFLECT"])
def test_rows24_25_other_terminals_close_from_every_phase(phase: str, terminal: str) -> None:
    state, events = complete(in_phase(phase), terminal)
    assert state["status"] == terminal
    assert (state["phase"], state["active_step"], state["reflect_base"]) == (None, None, None)
    assert kinds(events) == ["ulysses.completed"]
    assert events[0]["payload"]["terminalState"] == terminal
    if terminal == "insufficient_information":
        assert events[0]["payload"]["missing"] == ["the production logs"]
        assert state["missing"] == ["the production logs"]


def test_a_summary_is_kept_and_a_blank_one_is_not() -> None:
    base = {"operation": "complete", "terminalState": "environment_compromised"}
    kept, events = machine.transition(in_phase("IDLE"), {**base, "summary": "s"}, facts())
    assert kept is not None and kept["summary"] == events[0]["payload"]["summary"] == "s"
    blank, events = machine.transition(in_phase("IDLE"), {**base, "summary": "  "}, facts())
    assert blank is not None and blank["summary"] is None
    assert "summary" not in events[0]["payload"]


# --- rows 26–28: note, reads, no session --------------------------------------------------


@pytest.mark.parametrize("phase", ["IDLE", "PRIMARY", "RECOVERY", "REFLECT"])
def test_row26_note_changes_no_phase_and_no_version(phase: str) -> None:
    before = in_phase(phase)
    state, events = machine.transition(
        before,
        {"operation": "note", "thought": "saw it twice", "kind": "evidence"},
        facts(data_digest="a" * 64),
    )
    assert state is not None
    assert state["version"] == before["version"]
    assert state["phase"] == phase
    assert state["note_count"] == 1
    assert kinds(events) == ["ulysses.noted"]
    assert events[0]["payload"] == {
        "note_seq": 1,
        "kind": "evidence",
        "thought": "saw it twice",
        "data_digest": "a" * 64,
    }


@pytest.mark.parametrize("operation", ["status", "resume"])
def test_row27_reads_change_nothing(operation: str) -> None:
    before = in_phase("RECOVERY")
    state, events = machine.transition(before, {"operation": operation}, facts())
    assert state == before and events == []
    assert machine.transition(None, {"operation": "status"}, facts()) == (None, [])


def test_resume_naming_another_session_is_session_not_active() -> None:
    refused(
        "SESSION_NOT_ACTIVE", in_phase("IDLE"), {"operation": "resume", "session_id": "uly_9"}, {}
    )


@pytest.mark.parametrize(
    "command",
    [
        plan_command(),
        {"operation": "outcome", "observed": None},
        {"operation": "reflect", "hypothesis": "h", "falsification": "f"},
        {"operation": "bind_final_validator", "notebookId": "n", "cellId": "c"},
        {"operation": "note", "thought": "t", "kind": "observation"},
        {"operation": "resume"},
        {"operation": "complete", "terminalState": "environment_compromised"},
        {"operation": "rollback", "label": "initial"},
    ],
    ids=lambda command: command["operation"],
)
def test_row28_without_an_active_session_only_init_and_status_work(
    command: dict[str, Any],
) -> None:
    refused("NO_ACTIVE_SESSION", None, command, {})
    if command["operation"] != "rollback":
        closed, _ = complete(in_phase("IDLE"), "environment_compromised")
        refused("NO_ACTIVE_SESSION", closed, command, {})


# --- rollback -----------------------------------------------------------------------------


def test_rollback_records_pre_rollback_keeps_the_phase_and_bumps_the_version() -> None:
    before = in_phase("RECOVERY")
    label = session.next_checkpoint_label(before, "pre_rollback")
    state, events = machine.transition(
        before,
        {"operation": "rollback", "label": "initial"},
        facts(pre_rollback=observation(label)),
    )
    assert label == "pre_rollback_1"
    assert state is not None
    assert state["phase"] == "RECOVERY"
    assert state["version"] == before["version"] + 1
    assert state["checkpoints"][-1]["label"] == "pre_rollback_1"
    assert kinds(events) == ["ulysses.rolled_back"]
    assert events[0]["actor"] == "user"
    assert events[0]["payload"]["checkpoint"]["label"] == "initial"


def test_rollback_of_an_unknown_or_unrestorable_checkpoint_is_refused() -> None:
    state = in_phase("IDLE")
    with pytest.raises(NotFound) as caught:
        refusals.check(state, {"operation": "rollback", "label": "checkpoint_7"})
    assert caught.value.code == "CHECKPOINT_NOT_FOUND"
    state["checkpoints"][0]["restorable"] = False
    with pytest.raises(Refused) as refused_:
        refusals.check(state, {"operation": "rollback", "label": "initial"})
    assert refused_.value.code == "CHECKPOINT_NOT_RESTORABLE"


def test_irreversible_steps_after_a_checkpoint_are_named() -> None:
    command = dict(plan_command(), irreversible=True)
    state, _ = machine.transition(in_phase("IDLE"), command, dict(plan_facts(), now=LATER))
    assert state is not None
    assert [s["step_id"] for s in session.irreversible_after(state, observation("x"))] == ["step_1"]
    assert session.irreversible_after(state, observation("x", at=LATER)) == []


def test_forbidden_keys_fold_case_width_and_whitespace() -> None:
    assert session.forbidden_key("  Ｒｅｓｔａｒｔ\u00a0the\n\nSERVICE ") == "restart the service"
    assert session.forbidden_key("Straße") == session.forbidden_key("STRASSE")


# --- properties ---------------------------------------------------------------------------

MOVES = ("fix it", "Fix  It", "ｆｉｘ ｉｔ", "revert", "REVERT ", "restart", "bump the timeout")
VALIDATIONS = st.one_of(
    st.just(verdict(True)),
    st.sampled_from(FAIL_CAUSES).map(lambda cause: verdict(False, cause)),
    st.sampled_from(TAMPER_CAUSES).map(lambda cause: verdict(False, cause, tamper=True)),
)


@st.composite
def commands(draw: st.DrawFn) -> dict[str, Any]:
    operation = draw(
        st.sampled_from(
            [
                "init",
                "plan",
                "plan",
                "outcome",
                "outcome",
                "outcome",
                "reflect",
                "bind_final_validator",
                "note",
                "complete",
                "status",
                "resume",
                "rollback",
            ]
        )
    )
    if operation == "init":
        return {
            "operation": "init",
            "problem": "p",
            "constraints": [],
            "supersede": draw(st.booleans()),
        }
    if operation == "plan":
        return plan_command(draw(st.sampled_from(MOVES)), draw(st.sampled_from(MOVES)))
    if operation == "outcome":
        return {"operation": "outcome", "observed": None}
    if operation == "reflect":
        return {"operation": "reflect", "hypothesis": "h", "falsification": "f"}
    if operation == "bind_final_validator":
        return {"operation": "bind_final_validator", "notebookId": "n", "cellId": "c"}
    if operation == "note":
        return {"operation": "note", "thought": "t", "kind": "observation"}
    if operation == "complete":
        terminal = draw(st.sampled_from(session.TERMINAL_STATES))
        command: dict[str, Any] = {
            "operation": "complete",
            "terminalState": terminal,
            "summary": "s",
        }
        if terminal == "insufficient_information":
            command["missing"] = ["m"]
        return command
    if operation == "rollback":
        return {"operation": "rollback", "label": draw(st.sampled_from(["initial", "nope"]))}
    return {"operation": operation}


def facts_for(validation: dict[str, Any], n: int) -> dict[str, Any]:
    """Every fact any command could need, so the machine alone decides what it uses."""
    return facts(
        session_id=f"uly_{n}",
        step_id=f"step_{n}",
        checkpoint=observation(f"checkpoint_{n}"),
        base=observation("base"),
        reflect_base=observation("reflect_base"),
        pre_rollback=observation(f"pre_rollback_{n}"),
        bindings={"primary": binding("primary"), "recovery": binding("recovery")},
        binding=binding("final"),
        validation=validation,
        demonstration=validation,
        worktree_digest=None,
    )


def assert_consistent(state: Any) -> None:
    if state is None:
        return
    assert state["status"] in STATUSES
    if state["status"] != "active":
        assert (state["phase"], state["S"], state["active_step"]) == (None, None, None)
        return
    assert state["phase"] in PHASE_S
    assert state["S"] == PHASE_S[state["phase"]]
    assert (state["active_step"] is not None) == (state["phase"] in ("PRIMARY", "RECOVERY"))
    assert (state["reflect_base"] is not None) == (state["phase"] == "REFLECT")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(commands(), VALIDATIONS), max_size=40))
def test_no_sequence_breaks_the_protocol(script: list[tuple[dict[str, Any], Any]]) -> None:
    state: Any = None
    for n, (command, validation) in enumerate(script):
        before = state
        snapshot = repr(before)
        try:
            state, events = machine.transition(before, command, facts_for(validation, n))
        except IthacaError:
            assert repr(before) == snapshot  # a refusal changes nothing
            state = before
            continue
        assert_consistent(state)
        operation = command["operation"]
        same_session = (
            before is not None and state is not None and before["session_id"] == state["session_id"]
        )
        # one event per accepted transition, two for a superseding init, none for reads
        if operation in ("status", "resume"):
            assert events == [] and state is before
            continue
        superseding = operation == "init" and session.is_active(before)
        assert len(events) == (2 if superseding else 1)
        # resolved only through a passing final validator on this very call
        if state["status"] == "resolved":
            assert operation == "complete" and command["terminalState"] == "resolved"
            assert validation["pass"] and before["finalValidator"] is not None
        if not same_session:
            assert operation == "init"
            continue
        # the agent binds a final validator once, before any outcome, and never one that
        # passed on the problem as it stood
        if operation == "bind_final_validator":
            assert before["finalValidator"] is None and not session.has_outcome(before)
            assert not validation["pass"]
        # REFLECT is left only by reflect or a terminal
        if before["phase"] == "REFLECT" and state["phase"] != "REFLECT":
            assert operation in ("reflect", "complete")
        # forbidden moves only grow; an accepted plan uses none of them
        assert (
            state["forbidden_moves"][: len(before["forbidden_moves"])] == before["forbidden_moves"]
        )
        if operation == "plan":
            keys = {entry["key"] for entry in before["forbidden_moves"]}
            assert session.forbidden_key(command["primary"]) not in keys
            assert session.forbidden_key(command["recovery"]) not in keys
        # every write bumps the version, except a note
        expected = before["version"] + (0 if operation == "note" else 1)
        assert state["version"] == expected


@pytest.mark.parametrize(
    "look_alike",
    [
        "r\u0430ise the retry count",  # Cyrillic а
        "raise the retry c\u03bfunt",  # Greek ο
        "raise the retry c\u0585unt",  # Armenian օ
        "r\u0430is\u0435 th\u0435 r\u0435try count",  # Cyrillic а and е
        "raise the retry count\u200b",  # a zero-width space
    ],
)
def test_forbidden_keys_fold_look_alikes_from_other_scripts(look_alike: str) -> None:
    assert session.forbidden_key(look_alike) == session.forbidden_key("raise the retry count")


def test_forbidden_keys_keep_different_moves_apart() -> None:
    keys = {session.forbidden_key(move) for move in ("git push", "git pull", "git push -f")}
    assert len(keys) == 3


def test_a_move_forbidden_under_an_older_key_is_still_refused() -> None:
    # Sessions stored before the skeleton fold keep their old keys; the text decides.
    state = reflect(in_phase("REFLECT"))[0]
    for entry in state["forbidden_moves"]:
        entry["key"] = " ".join(entry["text"].casefold().split())
    (first, *_) = state["forbidden_moves"]
    command = plan_command("another idea", "another fallback")
    command["primary"] = first["text"].replace("e", "\u0435")  # Cyrillic е
    with pytest.raises(Refused) as caught:
        machine.transition(state, command, plan_facts("step_2"))
    assert caught.value.code == "FORBIDDEN_MOVE"
