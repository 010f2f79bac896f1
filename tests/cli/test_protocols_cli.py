from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ithaca import open_project
from ithaca.app import IthacaProject
from ithaca.cli.commands.protocols import group
from ithaca.kernel import clock, journal
from ithaca.protocols import approvals

RECORD = {
    "id": "team.review",
    "name": "Review first",
    "description": "Changes are reviewed before they are pushed.",
    "priority": 50,
    "selector": {"workflow": "coding"},
    "rules": ["Review your diff before pushing."],
    "constraints": [{"kind": "deny_command", "commands": ["git push --force*"]}],
    "tags": ["team"],
}


@pytest.fixture
def project(project_dir: Path) -> Iterator[IthacaProject]:
    opened = open_project(project_dir)
    yield opened
    opened.close()


def run(project_dir: Path, *args: str, **kwargs: Any) -> Result:
    return CliRunner().invoke(group, list(args), obj={"project_path": str(project_dir)}, **kwargs)


def journal_length(project: IthacaProject) -> int:
    return int(project.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0])


def error_of(result: Result) -> dict[str, Any]:
    return dict(json.loads(result.stderr)["error"])


# --- reads -------------------------------------------------------------------------------


def test_list_json_returns_records_in_bundle_order_with_their_public_fields(
    project_dir: Path, project: IthacaProject
) -> None:
    project.protocols.create_protocol(RECORD)

    result = run(project_dir, "list", "--json")

    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [(-r["priority"], r["id"]) for r in rows] == sorted(
        (-r["priority"], r["id"]) for r in rows
    )
    review = next(r for r in rows if r["id"] == "team.review")
    assert {
        "id",
        "name",
        "scope",
        "source",
        "enabled",
        "priority",
        "selector",
        "rules",
        "constraints",
        "tags",
        "overridesBase",
        "baseHash",
        "effectiveConstraints",
    } <= set(review)
    assert (review["scope"], review["source"]) == ("user", "sqlite")


def test_list_filters_by_scope_enabled_and_tag(project_dir: Path, project: IthacaProject) -> None:
    project.protocols.create_protocol(RECORD)
    project.protocols.create_protocol(dict(RECORD, id="team.off", enabled=False, tags=[]))

    def ids(*flags: str) -> list[str]:
        return [r["id"] for r in json.loads(run(project_dir, "list", "--json", *flags).stdout)]

    assert ids("--scope", "user") == ["team.off", "team.review"]
    assert ids("--disabled") == ["team.off"]
    assert ids("--tag", "team") == ["team.review"]
    assert len(ids("--source", "seed")) == 10


def test_get_json_returns_the_record_and_an_unknown_id_exits_1(
    project_dir: Path, project: IthacaProject
) -> None:
    project.protocols.create_protocol(RECORD)

    found = run(project_dir, "get", "team.review", "--json")
    missing = run(project_dir, "get", "team.nothing", "--json")

    assert found.exit_code == 0
    assert json.loads(found.stdout)["rules"] == RECORD["rules"]
    assert missing.exit_code == 1
    assert error_of(missing)["code"] == "PROTOCOL_NOT_FOUND"


def test_bundle_json_has_the_load_shape_and_records_no_load(
    project_dir: Path, project: IthacaProject
) -> None:
    event = project.protocols.admit_event(connector="test")
    before = journal_length(project)

    result = run(project_dir, "bundle", event["id"], "--json")

    assert result.exit_code == 0
    bundle = json.loads(result.stdout)
    assert set(bundle) == {
        "eventId",
        "protocols",
        "loadedAt",
        "revision",
        "digest",
        "selectorValues",
    }
    assert bundle["protocols"][0]["id"] == "ithaca.protocols-first"
    assert journal_length(project) == before


def test_explain_json_marks_each_record(project_dir: Path, project: IthacaProject) -> None:
    event = project.protocols.admit_event(connector="test", workflow="chat")

    result = run(project_dir, "explain", event["id"], "--json")
    human = run(project_dir, "explain", event["id"], env={"COLUMNS": "200"})

    explained = json.loads(result.stdout)
    status = {entry["id"]: entry["status"] for entry in explained["records"]}
    assert status["ithaca.protocols-first"] == "matched"
    assert status["ithaca.coding.progress"] == "no-match"
    assert human.exit_code == 0
    assert 'workflow: wants "coding", is "chat"' in human.stdout


def test_an_unknown_event_exits_1_with_event_not_found(project_dir: Path) -> None:
    result = run(project_dir, "explain", "evt_01J9Z3V6Q2X8M4K7T1R5B0C9DE", "--json")

    assert result.exit_code == 1
    assert error_of(result)["code"] == "EVENT_NOT_FOUND"


def write_fixtures(tmp_path: Path, document: Any) -> str:
    path = tmp_path / "fixtures.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


@pytest.mark.parametrize(
    ("document", "exit_code"),
    [
        ({"version": 1, "cases": [{"name": "ok", "mustMatch": ["ithaca.protocols-first"]}]}, 0),
        ({"version": 1, "cases": [{"name": "bad", "mustNotMatch": ["ithaca.protocols-first"]}]}, 1),
        ({"version": 1, "cases": [{"name": "bad", "actions": [{"tool": "Bash"}]}]}, 2),
        ("{not json", 2),
    ],
)
def test_test_exits_0_when_all_pass_1_when_one_fails_2_on_invalid_fixtures(
    project_dir: Path, tmp_path: Path, document: Any, exit_code: int
) -> None:
    result = run(project_dir, "test", write_fixtures(tmp_path, document))

    assert result.exit_code == exit_code
    if exit_code == 2:
        assert "INVALID_FIXTURES" in result.stderr


def test_lint_exits_0_when_clean_1_on_a_warning_and_2_on_a_bad_window(
    project_dir: Path, project: IthacaProject
) -> None:
    clean = run(project_dir, "lint", "--json")
    project.protocols.create_protocol(dict(RECORD, selector={"task": "never"}))
    warned = run(project_dir, "lint", "--json", "--since", "7d")
    bad_window = run(project_dir, "lint", "--since", "a week")

    assert (clean.exit_code, json.loads(clean.stdout)) == (0, [])
    assert warned.exit_code == 1
    assert {f["code"] for f in json.loads(warned.stdout)} >= {"NEVER_MATCHED"}
    assert bad_window.exit_code == 2


def test_seeds_json_reports_states_and_both_digests(project_dir: Path) -> None:
    result = run(project_dir, "seeds", "--json")

    report = json.loads(result.stdout)
    assert result.exit_code == 0
    assert {seed["state"] for seed in report["seeds"]} == {"in-sync"}
    assert set(report["seedSetDigest"]) == {"code", "store"}


def test_decisions_lists_newest_first_with_filters(
    project_dir: Path, project: IthacaProject
) -> None:
    with project.store.write() as conn:
        for effect, event_id in (("allow", "evt_a"), ("deny", "evt_b"), ("deny", "evt_a")):
            journal.append(
                conn,
                actor="hook",
                kind="protocols.decision",
                subject=event_id,
                payload={
                    "eventId": event_id,
                    "hostSessionId": "s1",
                    "tool": "Bash",
                    "effect": effect,
                    "reasonCode": None,
                    "constraints": [],
                },
            )

    def listed(*flags: str) -> list[tuple[str, str]]:
        rows = json.loads(run(project_dir, "decisions", "--json", *flags).stdout)
        return [(row["effect"], row["eventId"]) for row in rows]

    assert listed() == [("deny", "evt_a"), ("deny", "evt_b"), ("allow", "evt_a")]
    assert listed("--effect", "deny", "--event", "evt_a") == [("deny", "evt_a")]
    assert listed("--limit", "1") == [("deny", "evt_a")]
    assert listed("--session", "other") == []


def request_approval(project: IthacaProject, command: str = "make deploy") -> str:
    event = project.protocols.admit_event(connector="test", host_session_id="sess-1")
    with project.store.write() as conn:
        approval_id = approvals.request_id(conn, "sess-1", f"digest of {command}", clock.now())
        approvals.request(
            conn,
            approval_id=approval_id,
            session_id="sess-1",
            event_id=event["id"],
            action_digest=f"digest of {command}",
            action={"tool": "Bash", "input": {"command": command}, "cwd": "/repo"},
            protocol_ids=["team.review"],
            now=clock.now(),
            ttl_seconds=900,
        )
    return approval_id


def test_approvals_lists_open_requests_and_all_with_the_flag(
    project_dir: Path, project: IthacaProject
) -> None:
    pending = request_approval(project)
    used = request_approval(project, "make release")
    project.protocols.grant_approval(used)
    approvals.consume(project.store.connection(), used, clock.now())

    open_ids = [a["id"] for a in json.loads(run(project_dir, "approvals", "--json").stdout)]
    all_ids = [a["id"] for a in json.loads(run(project_dir, "approvals", "--all", "--json").stdout)]

    assert open_ids == [pending]
    assert sorted(all_ids) == sorted([pending, used])


# --- input errors and authority -------------------------------------------------------


# A create command that lacks only its selector (or a name, for the INVALID_FIELD case).
CREATE_X = ("create", "--id", "team.x", "--description", "d", "--priority", "1", "--rule", "r")


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ((*CREATE_X, "--name", "X", "--selector", "{bad"), "INVALID_INPUT"),
        ((*CREATE_X, "--name", "X", "--constraint", "[not a constraint"), "INVALID_INPUT"),
        (CREATE_X, "INVALID_FIELD"),
        (
            (*CREATE_X, "--name", "X", "--selector", '{"workflow": "typo"}'),
            "INVALID_SELECTOR_VALUE",
        ),
        (("update", "team.review", "--selector", "nope"), "INVALID_INPUT"),
        (("update", "team.review"), "INVALID_INPUT"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(
    project_dir: Path, project: IthacaProject, args: tuple[str, ...], code: str
) -> None:
    project.protocols.create_protocol(RECORD)
    before = journal_length(project)

    result = run(project_dir, *args)

    assert result.exit_code == 2
    assert f"error {code}" in result.stderr
    assert journal_length(project) == before


def test_update_with_an_unknown_protocol_exits_1_before_asking(project_dir: Path) -> None:
    result = run(project_dir, "update", "team.nothing", "--priority", "3")

    assert result.exit_code == 1
    assert "error PROTOCOL_NOT_FOUND" in result.stderr
    assert "press Enter" not in result.stdout


def test_file_and_field_flags_together_exit_2_and_create_nothing(
    project_dir: Path, project: IthacaProject, tmp_path: Path
) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps(RECORD))

    result = run(project_dir, "create", "--file", str(path), "--priority", "3")

    assert result.exit_code == 2
    assert "error INVALID_INPUT" in result.stderr
    assert project.protocols.list_protocols(scope="user") == []


CREATE_NEW = (
    "create",
    "--id",
    "team.new",
    "--name",
    "New",
    "--description",
    "d",
    "--priority",
    "1",
    "--selector",
    "{}",
    "--rule",
    "Be careful.",
)
USER_ONLY = [
    CREATE_NEW,
    ("update", "team.review", "--priority", "7"),
    ("enable", "team.review"),
    ("disable", "team.review"),
    ("remove", "team.review"),
    ("admit", "--connector", "cli"),
    ("approve", "APPROVAL"),
]


@pytest.mark.parametrize("args", USER_ONLY, ids=lambda args: args[0])
def test_user_only_commands_without_a_terminal_are_refused_and_change_nothing(
    project_dir: Path, project: IthacaProject, args: tuple[str, ...]
) -> None:
    project.protocols.create_protocol(RECORD)
    approval_id = request_approval(project)
    args = tuple(approval_id if arg == "APPROVAL" else arg for arg in args)
    before = journal_length(project)

    # Even the right confirmation on stdin does not help without a terminal.
    result = run(project_dir, *args, input=f"team.review\nteam.new\n{approval_id}\n")

    assert result.exit_code == 1
    assert "error USER_ONLY" in result.stderr
    assert "no interactive terminal" in result.stderr
    assert journal_length(project) == before
    assert project.protocols.get_approval(approval_id)["status"] == "pending"


def test_user_only_commands_in_an_agent_environment_are_refused(
    project_dir: Path, project: IthacaProject
) -> None:
    project.protocols.create_protocol(RECORD)

    result = run(project_dir, "disable", "team.review", env={"CODEX_THREAD_ID": "t-1"})

    assert result.exit_code == 1
    assert "error USER_ONLY" in result.stderr
    assert "CODEX_THREAD_ID" in result.stderr
    assert project.protocols.get_protocol("team.review")["enabled"] is True


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    [
        (["disable", "ithaca.coding.progress"], "BASE_LOCKED", 1),
        (["remove", "ithaca.coding.progress"], "BASE_LOCKED", 1),
        (["update", "team.review", "--selector", "[1]"], "INVALID_FIELD", 2),
        (["update", "team.nothing", "--priority", "3"], "PROTOCOL_NOT_FOUND", 1),
        (["admit", "--connector", "cli", "--workflow", "nope"], "UNKNOWN_WORKFLOW", 2),
        (["admit", "--connector", "cli", "--task", "Not A Task"], "INVALID_EVENT", 2),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else str(value),
)
def test_user_only_commands_report_the_real_problem_before_asking_for_confirmation(
    project_dir: Path, project: IthacaProject, args: list[str], code: str, exit_code: int
) -> None:
    project.protocols.create_protocol(RECORD)
    before = journal_length(project)

    result = run(project_dir, *args)

    assert result.exit_code == exit_code, result.output
    assert f"error {code}" in result.stderr
    assert "type" not in result.output
    assert journal_length(project) == before
