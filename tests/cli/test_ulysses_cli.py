"""``ithaca ulysses``: the protocol from a terminal, and rollback as the user's alone.

Most commands run in-process through ``CliRunner`` on the ``ulysses`` group. Rollback's
authority check is proven on a real pseudo-terminal: the installed ``ithaca`` console
script runs with the pty as its terminal, and the test types the confirmation.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ithaca import open_project
from ithaca.app import IthacaProject
from ithaca.cli.commands.ulysses import group
from ithaca.kernel import journal
from ithaca.validators.notebooks import NotebookService

JUDGE = (
    "from tb_validate import observed, pass_, fail\n"
    "pass_('ok') if observed().get('ok') else fail('not ok')\n"
)


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(project_dir: Path) -> Path:
    (project_dir / "app.txt").write_text("one\n")
    git(project_dir, "add", "app.txt")
    git(project_dir, "commit", "-qm", "start")
    return project_dir


@pytest.fixture
def project(repo: Path) -> Iterator[IthacaProject]:
    opened = open_project(repo)
    yield opened
    opened.close()


def ulysses(repo: Path, *args: str) -> Any:
    return CliRunner().invoke(group, list(args), obj={"project_path": str(repo)})


def answer(repo: Path, *args: str) -> dict[str, Any]:
    result = ulysses(repo, *args, "--json")
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def journal_length(project: IthacaProject) -> int:
    return int(project.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0])


def test_a_session_runs_from_init_to_resolved(repo: Path, project: IthacaProject) -> None:
    notebooks = NotebookService(project.project, project.store, project.config)
    notebook = notebooks.create({"title": "checks"})["notebookId"]
    cells = [
        notebooks.add_cell({"notebookId": notebook, "source": JUDGE, "filename": f"{n}.py"})[
            "cellId"
        ]
        for n in ("primary", "recovery", "final")
    ]

    started = answer(repo, "init", "the login test flakes", "--constraint", "no network")
    assert (started["phase"], started["constraints"]) == ("IDLE", ["no network"])
    answer(repo, "bind-final-validator", notebook, cells[2], "--observed", '{"ok": false}')
    planned = answer(
        repo,
        "plan",
        "--primary",
        "await the login event",
        "--recovery",
        "revert it",
        "--primary-validator",
        notebook,
        cells[0],
        "--recovery-validator",
        notebook,
        cells[1],
    )
    assert planned["phase"] == "PRIMARY"
    judged = answer(repo, "outcome", "--observed", '{"ok": true}', "--details", "green")
    assert (judged["assessment"], judged["phase"]) == ("expected", "IDLE")
    noted = answer(repo, "note", "it held for 50 runs", "--kind", "evidence", "--data", "[50]")
    assert noted["note_seq"] == 1
    resumed = answer(repo, "resume")
    assert [note["data"] for note in resumed["notes"]] == [[50]]
    closed = answer(
        repo,
        "complete",
        "resolved",
        "--summary",
        "Await the login event instead of retrying; the retry only hid the race.",
        "--observed",
        '{"ok": true}',
    )
    assert closed["status"] == "resolved"
    assert (repo / closed["lesson"]["path"]).is_file()
    assert answer(repo, "status")["active"] is False


def test_human_output_names_the_phase_and_the_next_action(repo: Path) -> None:
    result = ulysses(repo, "init", "the login test flakes")
    assert result.exit_code == 0, result.output
    assert "IDLE (S=0); next: plan." in result.output
    status = ulysses(repo, "status")
    assert "Problem: the login test flakes" in status.output


def test_refusals_carry_their_code_and_exit_code(repo: Path, project: IthacaProject) -> None:
    before = journal_length(project)
    refused = ulysses(repo, "outcome", "--observed", "null", "--json")
    assert refused.exit_code == 1
    assert json.loads(refused.stderr)["error"]["code"] == "NO_ACTIVE_SESSION"
    malformed = ulysses(repo, "outcome", "--observed", "{not json", "--json")
    assert malformed.exit_code == 2
    assert json.loads(malformed.stderr)["error"]["details"]["pointer"] == "/observed"
    missing = ulysses(repo, "complete", "insufficient_information")
    assert missing.exit_code == 2
    assert "MISSING_LIST_REQUIRED" in missing.stderr
    assert journal_length(project) == before


def test_rollback_without_a_terminal_is_refused(repo: Path, project: IthacaProject) -> None:
    answer(repo, "init", "p")
    before = journal_length(project)
    result = ulysses(repo, "rollback", "initial")
    assert result.exit_code == 1
    assert "error USER_ONLY" in result.stderr
    assert "no interactive terminal" in result.stderr
    assert journal_length(project) == before


@pytest.fixture
def on_terminal(type_ahead: Callable[..., tuple[int, str]]) -> Any:
    """``run(repo, typed, *args)``: ``ithaca ulysses ARGS`` on a pseudo-terminal."""

    def run(repo: Path, typed: str, *args: str) -> tuple[int, str]:
        return type_ahead(["--project", str(repo), "ulysses", *args], typed)

    return run


def test_rollback_on_a_terminal_restores_the_checkpoint_typed(
    on_terminal: Any, repo: Path, project: IthacaProject
) -> None:
    answer(repo, "init", "p")
    (repo / "app.txt").write_text("the second version\n")
    (repo / "new.txt").write_text("made later\n")

    code, output = on_terminal(repo, "initial", "rollback", "initial")

    assert code == 0, output
    assert "type initial and press Enter: " in output
    assert "Rolled back to initial" in output
    assert (repo / "app.txt").read_text() == "one\n"
    assert not (repo / "new.txt").exists()
    (event,) = journal.query(project.store.connection(), kind="ulysses.rolled_back")
    assert event["actor"] == "user"
    assert event["payload"]["pre_rollback"]["label"] == "pre_rollback_1"


def test_rollback_with_a_wrong_label_typed_changes_nothing(
    on_terminal: Any, repo: Path, project: IthacaProject
) -> None:
    answer(repo, "init", "p")
    (repo / "app.txt").write_text("the second version\n")
    before = journal_length(project)

    code, output = on_terminal(repo, "checkpoint_1", "rollback", "initial")

    assert code == 1
    assert "error USER_ONLY" in output
    assert "the confirmation did not match" in output
    assert (repo / "app.txt").read_text() == "the second version\n"
    assert journal_length(project) == before


def test_replacing_the_final_validator_asks_for_the_user_at_a_terminal(
    repo: Path, project: IthacaProject
) -> None:
    notebooks = NotebookService(project.project, project.store, project.config)
    notebook = notebooks.create({"title": "checks"})["notebookId"]
    cell = notebooks.add_cell({"notebookId": notebook, "source": JUDGE, "filename": "f.py"})
    answer(repo, "init", "the login test flakes")
    before = journal_length(project)
    refused = ulysses(repo, "bind-final-validator", notebook, cell["cellId"], "--replace")
    assert refused.exit_code != 0 and "USER_ONLY" in refused.output
    assert journal_length(project) == before
