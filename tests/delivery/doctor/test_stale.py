"""Stale worktrees and branches: ``ithaca doctor`` reports what sessions and run-plan left
that nothing uses any more (``WORKTREE_STALE``, ``BRANCH_STALE``), with the fix;
``--repair`` backs each one up (its commits as a bundle, its uncommitted and untracked
files) and then removes it, journaled. What is still in use, or still waiting for the
user's merge, is never stale."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.delivery.run_plan.conftest import *  # noqa: F403  (fixtures are found by name)
from tests.delivery.run_plan.conftest import git, run

from ithaca.app import IthacaProject
from ithaca.cli.entry import cli
from ithaca.delivery.doctor import stale
from ithaca.kernel import doctor, journal


def inspect(project_dir: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["--project", str(project_dir), "doctor", "--json"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def repair(project_dir: Path) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli, ["--project", str(project_dir), "doctor", "--repair", "--json"]
    )
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def branches(project_dir: Path) -> list[str]:
    return git(project_dir, "branch", "--format=%(refname:short)").split()


@pytest.fixture
def half_done(project: IthacaProject, change: str, settings: Any) -> dict[str, Any]:
    """A run paused on T-1, whose worker committed part of its work and left more
    uncommitted: its failed session's worktree and branch stay."""
    answer = run(project, settings("half"), max_parallel=1)
    assert answer["pause"]["reason"] == "TASK_NOT_CONVERGED"
    return dict(answer["waves"][0]["tasks"][0])


def test_a_failed_sessions_worktree_is_reported_stale_with_its_fix(
    half_done: dict[str, Any], project: IthacaProject, project_dir: Path
) -> None:
    session_id = half_done["session_id"]
    report = inspect(project_dir)

    assert report["status"] == "degraded"
    (found,) = report["findings"]  # the paused run's integration worktree is in use
    assert found["code"] == "WORKTREE_STALE" and found["severity"] == "warning"
    assert found["subject"] == f".ithaca-work/worktrees/{session_id}"
    assert found["branch"] == f"ithaca/T-1/{session_id}"
    assert found["session_id"] == session_id
    assert found["uncommitted_changes"] is True
    assert found["fix"] == "ithaca doctor --repair"
    assert f"session {session_id} ended failed" in found["message"]


def test_repair_backs_up_the_stale_worktree_then_removes_it_and_its_branch(
    half_done: dict[str, Any], project: IthacaProject, project_dir: Path, tmp_path: Path
) -> None:
    session_id = half_done["session_id"]
    worktree = project_dir / ".ithaca-work/worktrees" / session_id
    branch = f"ithaca/T-1/{session_id}"
    tip = git(project_dir, "rev-parse", branch).strip()

    report = repair(project_dir)

    assert report["status"] == "healthy", report["findings"]
    (line,) = [entry for entry in report["repaired"] if "stale" in entry]
    assert line.startswith(
        f"delivery: removed stale worktree .ithaca-work/worktrees/{session_id} and branch {branch}"
    )
    assert not worktree.exists()
    assert branch not in branches(project_dir)
    assert (project_dir / ".ithaca/.runtime/sessions" / session_id / "worker.log").is_file()
    event = journal.query(project.store.connection(), kind="delivery.doctor_repaired")[-1]
    assert event["payload"]["step"] == "stale_worktrees"
    (removed,) = event["payload"]["removed"]
    manifest = json.loads(Path(removed["backup"]).read_text())
    assert Path(manifest["bundle"]).parent.parent == Path(event["payload"]["backup"])
    assert manifest["commit"] == tip
    assert manifest["untracked"] == ["notes.txt"]
    assert "+half done" in Path(manifest["patch"]).read_text()
    untracked = Path(manifest["bundle"]).parent / "untracked/notes.txt"
    assert untracked.read_text() == "what is left\n"
    # the bundle gives the commits back
    git(project_dir, "fetch", "-q", manifest["bundle"], f"{branch}:restored")
    assert git(project_dir, "show", "restored:src/a.py") == "written by T-1\n"
    assert git(project_dir, "rev-parse", "restored").strip() == tip


def test_an_integration_branch_is_stale_only_once_merged(
    project: IthacaProject, project_dir: Path, change: str, settings: Any
) -> None:
    answer = run(project, settings())
    assert answer["status"] == "completed"
    assert inspect(project_dir)["findings"] == []  # it waits for the user's merge

    git(project_dir, "merge", "-q", "--no-edit", "ithaca/plan/add-login")
    found = inspect(project_dir)["findings"]

    assert [(f["code"], f["subject"], f["branch"]) for f in found] == [
        ("WORKTREE_STALE", ".ithaca-work/worktrees/plan-add-login", "ithaca/plan/add-login")
    ]
    assert found[0]["change_id"] == "add-login"
    repair(project_dir)
    assert not (project_dir / ".ithaca-work/worktrees/plan-add-login").exists()
    assert "ithaca/plan/add-login" not in branches(project_dir)
    assert inspect(project_dir)["status"] == "healthy"


def test_a_branch_no_session_names_is_stale_and_goes_after_a_backup(
    project: IthacaProject, project_dir: Path, change: str
) -> None:
    left = "ithaca/T-1/ses_01J9Z3V6Q2X8M4K7T1R5B0C9DE"
    git(project_dir, "branch", left)

    (found,) = inspect(project_dir)["findings"]

    assert (found["code"], found["subject"]) == ("BRANCH_STALE", left)
    assert "no session row names it" in found["message"]
    report = repair(project_dir)
    assert left not in branches(project_dir)
    (line,) = [entry for entry in report["repaired"] if "stale" in entry]
    assert line.startswith(f"delivery: removed stale branch {left} (backup: ")
    manifest = json.loads(Path(line.split("(backup: ")[1].rstrip(")")).read_text())
    assert manifest["bundle"] is None  # nothing the main HEAD lacks


def test_what_cannot_be_backed_up_is_kept(
    half_done: dict[str, Any],
    project: IthacaProject,
    project_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_room(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(stale, "_bundle", no_room)
    worktree = project_dir / ".ithaca-work/worktrees" / half_done["session_id"]

    done = doctor.repair(project.project, project.store)

    (line,) = [entry for entry in done["repaired"] if "stale" in entry]
    assert line.startswith(f"delivery: kept stale worktree .ithaca-work/worktrees/{worktree.name}")
    assert "backup failed" in line
    assert worktree.is_dir()
    assert f"ithaca/T-1/{worktree.name}" in branches(project_dir)


def test_a_running_sessions_worktree_is_not_stale(
    project: IthacaProject, project_dir: Path, change: str, service: Any
) -> None:
    answer = service.session(
        {"operation": "acquire", "task_id": "T-1", "strategy": "spawn", "idempotency_key": "a-1"}
    )
    assert Path(answer["worktree"]).is_dir()
    assert inspect(project_dir)["findings"] == []

    service.session(
        {"operation": "close", "session_id": answer["session"]["id"], "idempotency_key": "c-1"}
    )
    found = inspect(project_dir)["findings"]
    assert [f["code"] for f in found] == ["WORKTREE_STALE"]
    assert found[0]["uncommitted_changes"] is False
    assert subprocess.run(["git", "-C", answer["worktree"], "status"]).returncode == 0
