"""Session worktrees in a real Git repository (reference §9.2, §9.5): sparse, linked to
the central ``.ithaca``, clean, and removed only when nothing would be lost."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ithaca.delivery.sessions import worktrees
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.kernel.errors import Conflict, Refused
from ithaca.kernel.project import Project, find_project


def git(root: Path | str, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def project(project_dir: Path) -> Project:
    git(project_dir, "config", "user.email", "dev@example.com")
    git(project_dir, "config", "user.name", "Dev")
    (project_dir / "app.py").write_text("x = 1\n")
    (project_dir / ".ithaca" / "team.json").write_text("{}\n")
    git(project_dir, "add", "-A")
    git(project_dir, "commit", "-qm", "first")
    found = find_project(project_dir)
    assert found is not None
    return found


def make(project: Project, name: str = "ses_1", *, link: bool = True) -> Path:
    head = worktrees.main_head(project)
    return Path(worktrees.create(project, name, f"ithaca/T-1/{name}", head, link=link))


def test_the_worktree_checks_out_the_code_but_not_the_tracked_state(project):
    path = make(project)
    assert (path / "app.py").read_text() == "x = 1\n"
    assert (path / ".ithaca").is_symlink()
    assert (path / ".ithaca" / "team.json").read_text() == "{}\n"  # through the link
    assert git(path, "status", "--porcelain") == ""
    assert git(path, "status", "--porcelain", "--ignored").strip() == "!! .ithaca"


def test_a_worker_cannot_stage_the_link(project):
    path = make(project)
    git(path, "add", "-A")
    assert git(path, "diff", "--cached", "--name-only") == ""
    refused = subprocess.run(
        ["git", "-C", str(path), "add", ".ithaca/team.json"], capture_output=True, text=True
    )
    assert refused.returncode != 0


def test_the_main_checkout_still_sees_new_state_files(project):
    make(project)
    (Path(project.state_root) / "new.json").write_text("{}\n")
    shown = git(project.root, "status", "--porcelain", "--untracked-files=all")
    assert "?? .ithaca/new.json" in shown and ".ithaca-work" not in shown


def test_worktrees_lie_in_the_work_folder_nested_in_the_checkout(project):
    path = make(project)
    assert path == Path(project.root, ".ithaca-work", "worktrees", "ses_1")
    assert str(path) in git(project.root, "worktree", "list")
    assert not Path(project.runtime, "worktrees").exists()
    assert Path(project.runtime, "sessions", "ses_1", "exclude").is_file()  # Ithaca's, kept


def test_the_work_folder_is_excluded_once_beside_the_installs_block(project):
    exclude = Path(project.root, ".git", "info", "exclude")
    before = exclude.read_text()
    exclude.write_text(before + install_sandbox.EXCLUDE_BLOCK + "\n")
    make(project)
    make(project, "plan-add-login", link=False)
    text = exclude.read_text()
    assert text.startswith(before + install_sandbox.EXCLUDE_BLOCK + "\n")
    assert text.splitlines().count("/.ithaca-work/") == 1
    assert worktrees.WORK_EXCLUDE_MARKER in text
    uninstalled = install_sandbox.without_exclusions(text)  # the install takes its block back
    assert "/.ithaca-work/" in uninstalled.splitlines()
    assert install_sandbox.excluded(uninstalled).count("/.ithaca-work/") == 1


def test_a_repository_without_an_exclude_file_gets_one(project):
    info = Path(project.root, ".git", "info")
    for child in info.iterdir():
        child.unlink()
    info.rmdir()
    make(project)
    assert (info / "exclude").read_text().splitlines()[-1] == "/.ithaca-work/"
    assert ".ithaca-work" not in git(project.root, "status", "--porcelain", "-uall")


def test_a_work_folder_that_is_a_symlink_is_refused(project):
    os.symlink(project.runtime, os.path.join(project.root, ".ithaca-work"))
    with pytest.raises(Conflict) as caught:
        make(project)
    assert caught.value.code == "WORKTREE_UNSAFE"
    assert not Path(project.runtime, "worktrees").exists()


def test_an_integration_worktree_has_no_link(project):
    path = make(project, "plan-add-login", link=False)
    assert not (path / ".ithaca").exists()
    assert git(path, "status", "--porcelain") == ""


def test_an_existing_branch_is_checked_out_again(project):
    path = make(project)
    worktrees.remove(project, str(path), None)
    again = make(project)
    assert again == path and git(again, "rev-parse", "--abbrev-ref", "HEAD").strip() == (
        "ithaca/T-1/ses_1"
    )


def test_a_taken_worktree_folder_is_refused_and_left_alone(project):
    path = make(project)
    with pytest.raises(Conflict) as caught:
        make(project)  # the folder is taken
    assert caught.value.code == "WORKTREE_UNSAFE"
    assert path.is_dir()


def test_preserved_reasons_and_removal(project):
    path = make(project)
    head = worktrees.main_head(project)
    assert worktrees.preserved_reason(str(path), head) is None
    (path / "scratch.txt").write_text("wip\n")
    assert worktrees.preserved_reason(str(path), head) == "dirty"
    git(path, "add", "scratch.txt")
    git(path, "commit", "-qm", "wip")
    assert worktrees.preserved_reason(str(path), head) == "not_integrated"
    git(project.root, "merge", "-q", "--ff-only", "ithaca/T-1/ses_1")
    assert worktrees.preserved_reason(str(path), worktrees.main_head(project)) is None
    worktrees.remove(project, str(path), "ithaca/T-1/ses_1")
    assert not path.exists()
    assert (Path(project.state_root) / "team.json").read_text() == "{}\n"
    assert "ithaca/T-1/ses_1" not in git(project.root, "branch", "--list")


def test_branch_names_avoid_what_git_refuses():
    assert worktrees.branch_name("T-1.lock", "ses_1") == "ithaca/T-1_lock/ses_1"
    assert worktrees.branch_name("a..b", "ses_1") == "ithaca/a__b/ses_1"


def test_old_git_is_a_prerequisite(monkeypatch):
    monkeypatch.setattr(worktrees, "git_version", lambda: (2, 30, 1))
    with pytest.raises(Refused) as caught:
        worktrees.require_git()
    assert caught.value.code == "GIT_PREREQUISITE_MISSING"
