"""``ithaca ultragoal``: the seed's commands, their exit statuses, and the user's levers.

Most commands run in-process through ``CliRunner`` on the ``ultragoal`` group. The
user-only commands are proven on a real pseudo-terminal: a child process runs the
installed ``ithaca`` console script with the pty as its terminal, and the test types the
confirmation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ithaca import open_project
from ithaca.cli.commands.ultragoal import group
from ithaca.kernel import canon, journal
from ithaca.validators.notebooks import NotebookService

SESSION = "sess-cli"


@pytest.fixture(autouse=True)
def in_project(project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI resolves evidence paths against the working directory."""
    monkeypatch.chdir(project_dir)


def ultragoal(root: Path, *args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(
        group, ["--session", SESSION, *args], obj={"project_path": str(root)}, input=stdin
    )


def ok(root: Path, *args: str, stdin: str | None = None) -> Any:
    result = ultragoal(root, *args, "--json", stdin=stdin)
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


def error(result: Any) -> dict[str, Any]:
    """The refusal a command printed on standard error: ``error CODE: message``."""
    first = result.stderr.splitlines()[0]
    assert first.startswith("error "), result.stderr
    code, _, message = first.removeprefix("error ").partition(": ")
    return {"code": code, "message": message}


STORY = {
    "id": "A",
    "story": "Accept trailing commas",
    "acceptance_criteria": ["[1,] parses"],
    "verification_surface": "test passes",
}


JUDGE = (
    "from tb_validate import observed, pass_, fail\n"
    "pass_('ok') if observed().get('ok') else fail('not ok')\n"
)


def pursue(root: Path) -> None:
    """Planning to pursuing through the CLI, story A measured by a judge cell that has
    passed (an APPROVE needs a passing run of the story's validator)."""
    (root / "done.txt").write_text("done\n")
    project = open_project(root)
    notebooks = NotebookService(project.project, project.store, project.config)
    notebook = notebooks.create({"title": "checks"})["notebookId"]
    cell = notebooks.add_cell({"notebookId": notebook, "source": JUDGE, "filename": "a.py"})
    project.close()
    story = {**STORY, "validator": {"notebookId": notebook, "cellId": cell["cellId"]}}
    ok(root, "set", "--phase", "planning", "--outcome", "Parser", "--verification-surface", "t")
    ok(root, "set-stories", "--data", json.dumps([story]))
    project = open_project(root)
    user = {"operation": "confirm_all_stories", "session": SESSION}
    project.ultragoal.perform(user, actor="user")  # at their terminal (see on_terminal below)
    project.close()
    ok(root, "set", "--phase", "pursuing", "--completion-evidence", "done.txt")
    ok(root, "run-story-validator", "A", "--observed", '{"ok": true}')


def test_the_seed_sequence_reaches_complete_through_the_cli(opened: Any, project_dir: Path) -> None:
    pursue(project_dir)
    verdict = {"id": "A", "verdict": "APPROVE", "evidence_refs": ["done.txt"], "verifier": "me"}
    ok(project_dir, "record-story-verdict", "--data", "-", stdin=json.dumps(verdict))
    context = ok(project_dir, "serialize-review-context")
    assert context["what_was_implemented"] == "Parser"
    claim = _claim(opened)
    scope = json.loads(context["project_context"].split("[SCOPE_CONTRACT]\n")[1].split("\n")[0])
    artifact = {
        "status": "COMPLETE",
        "scope_contract_sha256": scope["scope_contract_sha256"],
        "findings": [],
        "reviewer": "code-reviewer",
        "at": "now",
        "files_read": [{"path": "done.txt", "sha256": canon.digest_bytes(b"done\n")}],
    }
    unseen = ultragoal(
        project_dir, "submit-review", "--nonce", claim, "--data", json.dumps(artifact)
    )
    assert error(unseen)["code"] == "REVIEW_NOT_SEEN_FROM_REVIEWER"  # a nonce alone is nothing
    _seen(opened, artifact)  # the hook saw the reviewer subagent run the command
    ok(project_dir, "submit-review", "--data", json.dumps(artifact))
    assert ok(project_dir, "get-review-result")["verdict"] == "APPROVE"
    ok(project_dir, "set-verdict", "--verdict", "APPROVE")
    assert ok(project_dir, "request-complete")["phase"] == "complete"
    status = ultragoal(project_dir, "status")
    assert status.stdout.strip() == "complete"
    assert ok(project_dir, "get") is None


def _seen(opened: Any, artifact: dict[str, Any]) -> None:
    """The pass the PreToolUse hook mints when the reviewer subagent submits ``artifact``."""
    from tests.ultragoal.conftest import reviewer_pass

    with opened.store.write() as tx:
        reviewer_pass(tx, SESSION, artifact)


def _claim(opened: Any) -> str:
    from ithaca.ultragoal.service import UltragoalService

    service = UltragoalService(opened.project, opened.store, opened.config)
    return str(service.claim_review_dispatch(SESSION)["nonce"])


def test_reads_print_text_and_json(opened: Any, project_dir: Path) -> None:
    assert ultragoal(project_dir, "status").stdout.strip() == "absent"
    assert ok(project_dir, "status")["status"] == "absent"
    pursue(project_dir)
    lines = ultragoal(project_dir, "serialize-requirements").stdout.strip()
    assert lines == "[A] Accept trailing commas — AC: [1,] parses — verify: test passes"
    assert ok(project_dir, "get")["phase"] == "pursuing"
    other = CliRunner().invoke(
        group, ["--session", "sess-other", "list-others"], obj={"project_path": str(project_dir)}
    )
    assert other.stdout.split("\t")[1] == SESSION
    assert ultragoal(project_dir, "list-others", "--json").stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        (("set", "--phase", "complete"), "PHASE_NOT_SETTABLE", 1),
        (("set", "--phase", "pursuing"), "OBJECTIVE_NOT_FALSIFIABLE", 1),
        (("record-story-verdict", "--data", "[]"), "INVALID_INPUT", 2),
        (("adopt", "--src", "bad id"), "SESSION_ID_INVALID", 2),
        (("set-stories", "--data", "{not json"), "INVALID_INPUT", 2),
        (("claim-review-dispatch",), "AUTHORITY_HOOK_ONLY", 1),
        (("set-blocked", "--reason", " "), "BLOCKED_REASON_REQUIRED", 1),
    ],
)
def test_refusals_exit_with_their_status(
    opened: Any, project_dir: Path, args: tuple[str, ...], code: str, status: int
) -> None:
    result = ultragoal(project_dir, *args)
    assert result.exit_code == status
    assert error(result)["code"] == code


def test_writes_print_text_unless_asked_for_json_and_refusals_go_to_stderr(
    opened: Any, project_dir: Path
) -> None:
    seeded = ultragoal(project_dir, "set", "--phase", "planning", "--outcome", "Parser")
    assert seeded.exit_code == 0
    assert "phase: planning" in seeded.stdout.splitlines()
    assert json.loads(ultragoal(project_dir, "get", "--json").stdout)["phase"] == "planning"
    refused = ultragoal(project_dir, "request-complete")
    assert refused.exit_code == 1 and refused.stdout == ""
    assert error(refused)["code"] == "PHASE_PLANNING"
    as_json = ultragoal(project_dir, "request-complete", "--json")
    assert json.loads(as_json.stderr)["error"]["code"] == "PHASE_PLANNING"


def test_usage_errors_exit_two(opened: Any, project_dir: Path) -> None:
    assert (
        ultragoal(project_dir, "set", "--phase", "planning", "--max-iterations", "0").exit_code == 2
    )
    assert ultragoal(project_dir, "set-blocked", "--reason").exit_code == 2
    assert ultragoal(project_dir, "set-verdict", "--verdict", "YES").exit_code == 2


def test_free_text_flags_take_the_next_token_even_with_dashes(
    opened: Any, project_dir: Path
) -> None:
    pursue(project_dir)
    answer = ok(project_dir, "set-blocked", "--reason", "--the-db-is-down")
    assert answer["blocked_reason"] == "--the-db-is-down"


def test_codex_goal_objective_from_stdin_loses_exactly_one_newline(
    opened: Any, project_dir: Path
) -> None:
    pursue(project_dir)
    ok(
        project_dir,
        "set",
        "--phase",
        "pursuing",
        "--codex-goal-objective",
        "-",
        stdin="Accept trailing commas\n\n",
    )
    assert ok(project_dir, "get")["codex_goal_objective"] == "Accept trailing commas\n"
    empty = ultragoal(
        project_dir, "set", "--phase", "pursuing", "--codex-goal-objective", "-", stdin="\n"
    )
    assert error(empty)["code"] == "CODEX_GOAL_OBJECTIVE_EMPTY"


def test_user_only_commands_need_a_terminal(opened: Any, project_dir: Path) -> None:
    pursue(project_dir)
    before = _journal_length(opened)
    for args in (
        ("resume-pursuit",),
        ("set-budget-limited",),
        ("approve-review-dispatch-renewal",),
        ("dismiss-review-finding", "--ref", "a:1", "--class", "correctness", "--rationale", "r"),
    ):
        result = ultragoal(project_dir, *args)
        assert result.exit_code == 1
        assert "AUTHORITY_USER_ONLY" in result.stderr
    assert _journal_length(opened) == before


def test_agent_environment_is_named(
    opened: Any, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pursue(project_dir)
    monkeypatch.setenv("CODEX_THREAD_ID", SESSION)
    result = ultragoal(project_dir, "resume-pursuit")
    assert result.exit_code == 1
    assert "AUTHORITY_AGENT_ENVIRONMENT" in result.stderr


def _journal_length(opened: Any) -> int:
    return int(opened.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0])


# --- on a pseudo-terminal ---------------------------------------------------------------


@pytest.fixture
def on_terminal(type_ahead: Callable[..., tuple[int, str]]) -> Any:
    """``run(root, typed, *args, **env)``: ``ithaca ultragoal ARGS`` on a pseudo-terminal."""

    def run(root: Path, typed: str, *args: str, **env: str) -> tuple[int, str]:
        command = ["--project", str(root), "ultragoal", "--session", SESSION, *args]
        return type_ahead(command, typed, **env)

    return run


def test_the_user_pauses_and_resumes_on_a_terminal(
    on_terminal: Any, opened: Any, project_dir: Path
) -> None:
    pursue(project_dir)
    token = SESSION[:8]

    code, output = on_terminal(project_dir, token, "set-budget-limited")
    assert code == 0, output
    assert "Objective: Parser" in output and f"type {token} and press Enter" in output

    code, output = on_terminal(project_dir, token, "resume-pursuit", "--max-iterations", "20")
    assert code == 0, output
    conn = opened.store.connection()
    resumed = journal.query(conn, kind="ultragoal.resumed")
    assert [event["actor"] for event in resumed] == ["user"]
    assert ok(project_dir, "get")["max_iterations"] == 20


def test_a_wrong_confirmation_or_an_agent_environment_changes_nothing(
    on_terminal: Any, opened: Any, project_dir: Path
) -> None:
    pursue(project_dir)
    before = _journal_length(opened)

    code, output = on_terminal(project_dir, "nope", "approve-review-dispatch-renewal")
    assert code == 1 and "USER_CONFIRMATION_MISMATCH" in output

    code, output = on_terminal(
        project_dir, SESSION[:8], "approve-review-dispatch-renewal", CLAUDECODE="1"
    )
    assert code == 1 and "AUTHORITY_AGENT_ENVIRONMENT" in output
    assert _journal_length(opened) == before
