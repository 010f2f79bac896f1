from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ithaca import open_project
from ithaca.kernel import journal
from ithaca.kernel.errors import Corrupt, InvalidInput
from ithaca.kernel.markers import Prompt
from ithaca.protocols import events
from ithaca.protocols.explanation import explain
from ithaca.protocols.fixtures import parse_fixtures, run_fixtures
from ithaca.protocols.lint import lint_protocols
from ithaca.protocols.seed_report import seed_status
from ithaca.protocols.service import ProtocolsService

OLD = "2020-01-01T00:00:00.000Z"


@pytest.fixture
def service(project_dir: Path) -> Iterator[ProtocolsService]:
    project = open_project(project_dir)
    yield project.protocols
    project.close()


def record(protocol_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": protocol_id,
        "name": protocol_id,
        "description": "A test protocol.",
        "priority": 10,
        "selector": {},
        "rules": [f"Follow {protocol_id}."],
        **fields,
    }


def journal_length(service: ProtocolsService) -> int:
    return int(service.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0])


def raw_sql(service: ProtocolsService, sql: str, *params: Any) -> None:
    service.store.connection().execute(sql, params)


def admit_old_event(service: ProtocolsService, task: str) -> None:
    """An event admitted before any lint window we use."""
    with service.store.write() as conn:
        admission = events.prepare(
            conn=conn,
            config=service.config,
            connector="test",
            session_id=None,
            turn_id=None,
            prompt_text=None,
            prompt=Prompt(),
            kind="chat.message",
            admitted_by="system",
            actor_kind="test",
            explicit={"task": task},
        )
        old = events.Admission(
            event=dict(admission.event, receivedAt=OLD),
            sources=admission.sources,
            admitted_by=admission.admitted_by,
            sticky=admission.sticky,
        )
        events.admit(conn, old, actor="system")


def codes(findings: list[dict[str, Any]], subject: str) -> list[str]:
    return [finding["code"] for finding in findings if finding["subject"] == subject]


# --- explain -----------------------------------------------------------------------------


def test_explain_names_every_failing_selector_key_with_expected_and_actual(
    service: ProtocolsService,
) -> None:
    service.create_protocol(
        record(
            "team.release",
            selector={"connector": "test", "workflow": "debugging", "task": ["ship", "tag"]},
        )
    )
    event = service.admit_event(connector="test", workflow="coding")

    explained = explain(service, event["id"])

    entry = next(e for e in explained["records"] if e["id"] == "team.release")
    assert entry["status"] == "no-match"
    assert entry["mismatches"] == [
        {"key": "workflow", "expected": "debugging", "actual": "coding"},
        {"key": "task", "expected": ["ship", "tag"], "actual": None},
    ]


def test_explain_lists_every_record_in_bundle_order_marked_matched_or_disabled(
    service: ProtocolsService,
) -> None:
    service.create_protocol(record("team.b", priority=5))
    service.create_protocol(record("team.a", priority=5, enabled=False))
    event = service.admit_event(connector="test")

    explained = explain(service, event["id"])

    listed = [(e["id"], e["priority"]) for e in explained["records"]]
    assert listed == sorted(listed, key=lambda item: (-item[1], item[0]))
    status = {e["id"]: e["status"] for e in explained["records"]}
    assert status["team.a"] == "disabled"
    assert status["team.b"] == "matched"
    assert explained["load"]["ok"] is True
    assert explained["load"]["protocolIds"] == [
        e["id"] for e in explained["records"] if e["status"] == "matched"
    ]


def test_explain_shows_where_each_selector_value_came_from(service: ProtocolsService) -> None:
    event = service.admit_event(connector="cli", task="ship", actor="user")

    explained = explain(service, event["id"])

    assert explained["selectorValues"]["task"] == "ship"
    assert explained["sources"] == {
        "connector": "user",
        "messageKind": "user",
        "userId": "user",
        "clientId": "default",
        "projectId": "default",
        "workflow": "default",
        "task": "caller",
    }


def test_explain_gives_effective_constraints_of_matched_records_seed_constraints_first(
    service: ProtocolsService,
) -> None:
    extra = {"kind": "deny_command", "commands": ["git push"]}
    service.create_protocol(
        record("ithaca.debugging.ulysses", selector={"workflow": "debugging"}, constraints=[extra]),
        override=True,
    )
    service.create_protocol(
        record(
            "team.unmatched",
            selector={"workflow": "goal"},
            constraints=[{"kind": "deny_tool", "classes": ["edit"]}],
        )
    )
    event = service.admit_event(connector="test", workflow="debugging")

    explained = explain(service, event["id"])

    assert [
        (item["protocolId"], item["index"], item["constraint"]["kind"])
        for item in explained["effectiveConstraints"]
    ] == [
        ("ithaca.debugging.ulysses", 0, "require_state"),
        ("ithaca.debugging.ulysses", 1, "deny_command"),
    ]


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        (
            """UPDATE protocols SET selector_json='{"workflow":"x"}' WHERE id = ?""",
            "INVALID_SELECTOR_VALUE",
        ),
        ("UPDATE protocols SET name = 'Renamed behind Ithaca' WHERE id = ?", "HASH_MISMATCH"),
    ],
)
def test_explain_marks_a_corrupt_row_while_the_bundle_fails_store_corrupt(
    service: ProtocolsService, sql: str, problem: str
) -> None:
    service.create_protocol(record("team.victim"))
    event = service.admit_event(connector="test")
    raw_sql(service, sql, "team.victim")

    with pytest.raises(Corrupt) as failure:
        service.compute_bundle(event["id"])
    explained = explain(service, event["id"])

    assert failure.value.code == "STORE_CORRUPT"
    entry = next(e for e in explained["records"] if e["id"] == "team.victim")
    assert entry["status"] == "corrupt"
    assert entry["problem"] == problem
    assert explained["load"] == {"ok": False, "error": failure.value.to_dict()}
    others = [e["status"] for e in explained["records"] if e["id"] != "team.victim"]
    assert "corrupt" not in others


def test_explain_writes_nothing(service: ProtocolsService) -> None:
    event = service.admit_event(connector="test")
    conn = service.store.connection()
    before = (
        journal_length(service),
        conn.execute("SELECT revision FROM protocol_state").fetchone(),
    )

    explain(service, event["id"])

    after = (
        journal_length(service),
        conn.execute("SELECT revision FROM protocol_state").fetchone(),
    )
    assert after == before


WORKFLOWS = st.sampled_from(["coding", "debugging", "chat"])
SELECTORS = st.fixed_dictionaries(
    {},
    optional={
        "workflow": st.one_of(WORKFLOWS, st.lists(WORKFLOWS, min_size=1, max_size=2, unique=True)),
        "task": st.sampled_from(["ship", "tag"]),
        "connector": st.sampled_from(["test", "cli"]),
    },
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    selectors=st.lists(st.tuples(SELECTORS, st.integers(-2, 2), st.booleans()), max_size=5),
    workflow=WORKFLOWS,
    task=st.sampled_from([None, "ship"]),
)
def test_explain_matches_exactly_the_records_the_bundle_holds(
    service: ProtocolsService,
    selectors: list[tuple[dict[str, Any], int, bool]],
    workflow: str,
    task: str | None,
) -> None:
    created = [f"team.r{index}" for index in range(len(selectors))]
    for protocol_id, (selector, priority, enabled) in zip(created, selectors, strict=True):
        service.create_protocol(
            record(protocol_id, selector=selector, priority=priority, enabled=enabled)
        )
    try:
        event = service.admit_event(connector="test", workflow=workflow, task=task)
        explained = explain(service, event["id"])
        bundle = service.compute_bundle(event["id"])
        matched = [e["id"] for e in explained["records"] if e["status"] == "matched"]
        assert matched == [protocol["id"] for protocol in bundle["protocols"]]
    finally:
        for protocol_id in created:
            service.remove_protocol(protocol_id)


# --- fixtures ----------------------------------------------------------------------------


def fixtures(*cases: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "cases": list(cases)}


def bash(command: str, expect: str, **extra: Any) -> dict[str, Any]:
    return {"tool": "Bash", "input": {"command": command}, "expect": expect, **extra}


def test_fixtures_pass_when_matching_order_and_decisions_are_as_expected(
    service: ProtocolsService,
) -> None:
    service.create_protocol(
        record(
            "team.no-push",
            selector={"workflow": "coding"},
            constraints=[{"kind": "deny_command", "commands": ["git push"]}],
        )
    )
    case = {
        "name": "coding prompt",
        "event": {"connector": "claude-code", "context": {"workflow": "coding"}},
        "mustMatch": ["team.no-push", "ithaca.coding.required-loop"],
        "mustNotMatch": ["ithaca.debugging.ulysses"],
        "order": ["ithaca.protocols-first", "team.no-push"],
        "actions": [bash("git push origin main", "deny"), bash("git status", "allow")],
    }

    result = run_fixtures(service, fixtures(case))

    assert result["passed"] is True
    assert result["cases"][0]["failures"] == []


def test_fixtures_report_each_unmet_expectation(service: ProtocolsService) -> None:
    service.create_protocol(record("team.chat", selector={"workflow": "chat"}))
    case = {
        "name": "wrong expectations",
        "event": {"context": {"workflow": "coding"}},
        "mustMatch": ["team.chat"],
        "mustNotMatch": ["ithaca.protocols-first"],
        "order": ["ithaca.coding.progress", "ithaca.coding.required-loop"],
        "actions": [bash("rm -rf build", "deny")],
    }

    result = run_fixtures(service, fixtures(case))

    assert result["passed"] is False
    assert result["failed"] == 1
    assert len(result["cases"][0]["failures"]) == 4


def test_fixtures_evaluate_states_approvals_and_hosts_like_the_hook(
    service: ProtocolsService,
) -> None:
    service.create_protocol(
        record(
            "team.guarded",
            selector={"workflow": "debugging"},
            constraints=[
                {"kind": "deny_command", "commands": ["git reset"], "effect": "ask"},
                {"kind": "require_approval", "commands": ["make deploy"]},
                {"kind": "deny_path", "paths": ["secrets/**"]},
            ],
        )
    )
    edit = {
        "tool": "Edit",
        "input": {"file_path": "src/app.py", "old_string": "a", "new_string": "b"},
    }
    step = {"ulysses.step_active": True}
    actions = [
        dict(edit, expect="deny"),  # the base ulysses constraint: no active step
        dict(edit, states=step, expect="allow"),
        bash("git reset --hard", "ask", states=step),
        bash("git reset --hard", "deny", states=step, host="codex"),
        bash("git reset --hard", "allow", states=step, host="opencode", approved=True),
        bash("make deploy", "deny", states=step),
        bash("make deploy", "allow", states=step, approved=True),
        bash("rm secrets/key.pem", "deny", states=step, approved=True),
        {"tool": "mcp__ithaca__load_protocols", "input": {}, "expect": "allow"},
    ]
    case = {
        "name": "debugging",
        "event": {"context": {"workflow": "debugging"}},
        "actions": actions,
    }

    result = run_fixtures(service, fixtures(case))

    outcomes = [(a["expect"], a["effect"]) for a in result["cases"][0]["actions"]]
    assert outcomes == [(a["expect"], a["expect"]) for a in actions]
    assert result["passed"] is True


def test_fixtures_admit_and_journal_nothing(service: ProtocolsService) -> None:
    before = journal_length(service)
    case = {"name": "any", "actions": [bash("git push", "allow")]}

    run_fixtures(service, fixtures(case))

    events_stored = service.store.connection().execute("SELECT count(*) FROM protocol_events")
    assert events_stored.fetchone()[0] == 0
    assert journal_length(service) == before


@pytest.mark.parametrize(
    ("document", "pointer"),
    [
        ([], ""),
        ({"version": 2, "cases": []}, "/version"),
        ({"version": 1, "cases": [], "extra": 1}, "/extra"),
        ({"version": 1, "cases": [{"event": {}}]}, "/cases/0/name"),
        ({"version": 1, "cases": [{"name": "x", "mustMatch": "team.a"}]}, "/cases/0/mustMatch"),
        (
            {"version": 1, "cases": [{"name": "x", "event": {"connector": "slack"}}]},
            "/cases/0/event/connector",
        ),
        (
            {"version": 1, "cases": [{"name": "x", "event": {"context": {"workflow": "typo"}}}]},
            "/cases/0/event/context/workflow",
        ),
        (
            {"version": 1, "cases": [{"name": "x", "actions": [bash("ls", "maybe")]}]},
            "/cases/0/actions/0/expect",
        ),
        (
            {
                "version": 1,
                "cases": [
                    {"name": "x", "actions": [bash("ls", "allow", states={"ulysses.typo": True})]}
                ],
            },
            "/cases/0/actions/0/states/ulysses.typo",
        ),
        (
            {"version": 1, "cases": [{"name": "x", "actions": [bash("ls", "allow", host="vim")]}]},
            "/cases/0/actions/0/host",
        ),
    ],
)
def test_malformed_fixtures_are_invalid_fixtures_with_a_pointer(
    service: ProtocolsService, document: Any, pointer: str
) -> None:
    with pytest.raises(InvalidInput) as failure:
        run_fixtures(service, document)

    assert failure.value.code == "INVALID_FIXTURES"
    assert failure.value.details["pointer"] == pointer


def test_fixture_text_that_is_not_json_is_invalid_fixtures() -> None:
    with pytest.raises(InvalidInput) as failure:
        parse_fixtures("{not json")

    assert failure.value.code == "INVALID_FIXTURES"


# --- lint --------------------------------------------------------------------------------


def test_a_fresh_project_has_no_lint_findings(service: ProtocolsService) -> None:
    assert lint_protocols(service) == []


def test_the_same_rule_in_two_co_matching_records_is_a_duplicate(
    service: ProtocolsService,
) -> None:
    service.create_protocol(record("team.a", rules=["Run the tests  before\tpushing."]))
    service.create_protocol(
        record("team.b", selector={"workflow": "coding"}, rules=["Run the tests before pushing."])
    )
    service.create_protocol(
        record("team.c", selector={"workflow": "chat"}, rules=["Run the tests before pushing."])
    )
    service.create_protocol(
        record("team.d", selector={"workflow": "coding"}, rules=["Run the tests before pushing."])
    )

    findings = lint_protocols(service)

    duplicates = [f for f in findings if f["code"] == "DUPLICATE_RULE"]
    assert sorted((f["subject"], f["level"]) for f in duplicates) == [
        ("team.b", "warning"),
        ("team.c", "warning"),
        ("team.d", "warning"),
        ("team.d", "warning"),
    ]


def test_co_matching_records_with_equal_priority_tie(service: ProtocolsService) -> None:
    service.create_protocol(record("team.a", selector={"workflow": ["coding", "chat"]}))
    service.create_protocol(record("team.b", selector={"workflow": "chat", "task": "x"}))
    service.create_protocol(record("team.c", selector={"workflow": "debugging"}))
    service.create_protocol(record("team.d", selector={"workflow": "chat"}, priority=11))

    findings = lint_protocols(service)

    ties = [f for f in findings if f["code"] == "PRIORITY_TIE"]
    assert [(f["subject"], f["level"]) for f in ties] == [("team.b", "warning")]
    assert "team.a" in ties[0]["message"]


@pytest.mark.parametrize(
    ("broad", "narrow", "shadowed"),
    [
        (
            {"kind": "deny_command", "commands": ["git push*"]},
            {"kind": "deny_command", "commands": ["git push --force"], "effect": "ask"},
            True,
        ),
        (
            {"kind": "deny_command", "commands": ["git push"], "effect": "ask"},
            {"kind": "deny_command", "commands": ["git push"]},
            False,
        ),
        (
            {"kind": "deny_command", "commands": ["git push"]},
            {"kind": "require_approval", "commands": ["git push origin"]},
            True,
        ),
        (
            {"kind": "deny_path", "paths": ["secrets/**"]},
            {"kind": "deny_path", "paths": ["secrets/*.key"]},
            True,
        ),
        (
            {"kind": "deny_path", "paths": ["*.key"]},
            {"kind": "deny_path", "paths": ["config/*.key"]},
            True,
        ),
        (
            {"kind": "deny_path", "paths": ["secrets/*"]},
            {"kind": "deny_path", "paths": ["secrets/a/b.key"]},
            False,
        ),
        (
            {"kind": "deny_tool", "tools": ["mcp__*"]},
            {"kind": "deny_tool", "tools": ["mcp__github__push"]},
            True,
        ),
        (
            {"kind": "require_state", "state": "ulysses.active", "for": "mutating"},
            {"kind": "require_state", "state": "ulysses.active", "for": ["edit"]},
            True,
        ),
        (
            {"kind": "require_state", "state": "ulysses.active", "expect": False},
            {"kind": "require_state", "state": "ulysses.active"},
            False,
        ),
    ],
)
def test_a_constraint_covered_by_a_broader_record_is_shadowed(
    service: ProtocolsService, broad: dict[str, Any], narrow: dict[str, Any], shadowed: bool
) -> None:
    service.create_protocol(record("team.broad", constraints=[broad]))
    service.create_protocol(
        record("team.narrow", selector={"workflow": "coding"}, constraints=[narrow])
    )

    findings = lint_protocols(service)

    flagged = [f["subject"] for f in findings if f["code"] == "SHADOWED_CONSTRAINT"]
    assert flagged == (["team.narrow/constraints/0"] if shadowed else [])


def test_a_constraint_in_a_narrower_record_does_not_shadow(service: ProtocolsService) -> None:
    deny_push = {"kind": "deny_command", "commands": ["git push"]}
    service.create_protocol(
        record("team.narrow", selector={"workflow": "coding"}, constraints=[deny_push])
    )
    service.create_protocol(record("team.broad", constraints=[deny_push]))

    findings = lint_protocols(service)

    assert [f["subject"] for f in findings if f["code"] == "SHADOWED_CONSTRAINT"] == [
        "team.narrow/constraints/0"
    ]


def test_an_override_repeating_its_base_constraint_is_shadowed(service: ProtocolsService) -> None:
    base_constraint = {
        "kind": "require_state",
        "state": "ulysses.step_active",
        "for": ["edit", "shell", "mcp", "other"],
    }
    service.create_protocol(
        record(
            "ithaca.debugging.ulysses",
            selector={"workflow": "debugging"},
            constraints=[base_constraint],
        ),
        override=True,
    )

    findings = lint_protocols(service)

    assert [f["subject"] for f in findings if f["code"] == "SHADOWED_CONSTRAINT"] == [
        "ithaca.debugging.ulysses/constraints/1"
    ]


def test_a_record_no_event_in_the_window_matched_is_reported(service: ProtocolsService) -> None:
    service.create_protocol(record("team.release", selector={"task": "release"}))
    admit_old_event(service, "release")
    service.admit_event(connector="test", task="other")

    before = lint_protocols(service, since_days=30)
    service.admit_event(connector="test", task="release")
    after = lint_protocols(service, since_days=30)

    assert "NEVER_MATCHED" in codes(before, "team.release")
    assert "NEVER_MATCHED" not in codes(after, "team.release")
    all_time = lint_protocols(service, since_days=100_000)
    assert "NEVER_MATCHED" not in codes(all_time, "team.release")


def test_a_constraint_no_decision_in_the_window_fired_is_info(service: ProtocolsService) -> None:
    service.create_protocol(
        record(
            "team.rules",
            constraints=[
                {"kind": "deny_command", "commands": ["git push"]},
                {"kind": "deny_command", "commands": ["npm publish"]},
            ],
        )
    )
    service.admit_event(connector="test")
    with service.store.write() as conn:
        for at, index in ((None, 0), (OLD, 1)):
            journal.append(
                conn,
                actor="hook",
                kind="protocols.decision",
                subject=None,
                at=at,
                payload={
                    "constraints": [
                        {
                            "protocolId": "team.rules",
                            "index": index,
                            "kind": "deny_command",
                            "result": "deny",
                        }
                    ]
                },
            )

    findings = lint_protocols(service)

    never_fired = [(f["subject"], f["level"]) for f in findings if f["code"] == "NEVER_FIRED"]
    assert never_fired == [("team.rules/constraints/1", "info")]


def test_an_override_written_against_an_older_seed_drifts(service: ProtocolsService) -> None:
    service.create_protocol(
        record(
            "ithaca.coding.progress",
            selector={"workflow": "coding"},
            constraints=[{"kind": "deny_tool", "tools": ["WebFetch"]}],
        ),
        override=True,
    )
    service.admit_event(connector="test", workflow="coding")
    assert codes(lint_protocols(service), "ithaca.coding.progress") == []
    raw_sql(
        service,
        "UPDATE protocols SET base_hash = ? WHERE id = ?",
        "0" * 64,
        "ithaca.coding.progress",
    )

    findings = lint_protocols(service)

    assert [
        (f["code"], f["level"]) for f in findings if f["subject"] == "ithaca.coding.progress"
    ] == [("OVERRIDE_DRIFT", "warning")]


def test_user_rules_without_constraints_are_advisory_only(service: ProtocolsService) -> None:
    service.create_protocol(record("team.advice"))
    service.create_protocol(record("team.off", enabled=False, selector={"task": "none"}))
    service.admit_event(connector="test")

    findings = lint_protocols(service)

    assert [(f["code"], f["level"], f["subject"]) for f in findings] == [
        ("ADVISORY_ONLY", "info", "team.advice")
    ]


def test_lint_reports_a_corrupt_row_instead_of_failing(service: ProtocolsService) -> None:
    service.create_protocol(record("team.victim"))
    raw_sql(service, "UPDATE protocols SET priority = 99 WHERE id = 'team.victim'")

    findings = lint_protocols(service)

    assert [(f["code"], f["level"]) for f in findings if f["subject"] == "team.victim"] == [
        ("STORE_CORRUPT", "error")
    ]


def test_lint_reports_a_broken_protocol_file_as_an_error(service: ProtocolsService) -> None:
    (Path(service.project.protocols_dir) / "team.broken.json").write_text(
        "{ not json", encoding="utf-8"
    )
    service.reconcile()

    findings = lint_protocols(service)

    assert [(f["code"], f["level"], f["subject"]) for f in findings] == [
        ("PROTOCOL_FILE_INVALID", "error", ".ithaca/protocols/team.broken.json")
    ]


def test_lint_refuses_a_negative_window(service: ProtocolsService) -> None:
    with pytest.raises(InvalidInput):
        lint_protocols(service, since_days=-1)


# --- seeds -------------------------------------------------------------------------------


def seed_states(service: ProtocolsService) -> dict[str, str]:
    return {seed["id"]: seed["state"] for seed in seed_status(service)["seeds"]}


def test_every_seed_is_in_sync_in_a_fresh_project(service: ProtocolsService) -> None:
    status = seed_status(service)

    assert set(seed_states(service).values()) == {"in-sync"}
    assert status["seedSetDigest"]["code"] == status["seedSetDigest"]["store"]
    assert status["inSync"] is True
    priorities = [(-s["priority"], s["id"]) for s in status["seeds"]]
    assert priorities == sorted(priorities)


def test_seed_states_follow_overrides_drift_and_missing_rows(service: ProtocolsService) -> None:
    for protocol_id in ("ithaca.coding.progress", "ithaca.coding.completion-report"):
        service.create_protocol(record(protocol_id, selector={"workflow": "coding"}), override=True)
    raw_sql(
        service,
        "UPDATE protocols SET base_hash = ? WHERE id = ?",
        "0" * 64,
        "ithaca.coding.completion-report",
    )
    raw_sql(service, "DELETE FROM protocols WHERE id = 'ithaca.goal.ultragoal'")

    states = seed_states(service)

    assert states["ithaca.coding.progress"] == "overridden"
    assert states["ithaca.coding.completion-report"] == "overridden+drift"
    assert states["ithaca.goal.ultragoal"] == "missing"
    assert states["ithaca.protocols-first"] == "in-sync"


def test_fixtures_include_the_kernel_guard_like_the_hook(service: ProtocolsService) -> None:
    case = {
        "name": "state is off limits",
        "actions": [
            bash("rm -rf .ithaca", "deny"),
            bash("ithaca protocols approve apr_7K2M9QXD", "deny"),
            bash("rm -rf build", "allow"),
        ],
    }

    result = run_fixtures(service, fixtures(case))

    assert [a["effect"] for a in result["cases"][0]["actions"]] == ["deny", "deny", "allow"]
    assert result["passed"] is True
