"""Git runs with Ithaca's settings only: nothing the repository (or a repository inside it)
names as a program runs when Ithaca asks Git something.

Each test plants a program the way an agent could (a filter, a file-system monitor, a
hooks folder, a diff driver, an embedded repository with its own settings, an inherited
``GIT_DIR``) that, if Git ran it, would leave a marker file; then it asks Git through
``ithaca.kernel.git`` what Ithaca asks, and checks that the answer is right and that no
marker appeared. The user's own filter, in their global settings, still runs.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from ithaca.kernel import git


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home with its own Git settings, and no inherited Git variables."""
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / ".gitconfig").write_text("[user]\n\tname = User\n\temail = user@example.invalid\n")
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for name in [name for name in os.environ if name.startswith("GIT_")]:
        monkeypatch.delenv(name)
    return folder


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "RAN"


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def program(marker: Path, then: str = "cat") -> str:
    """A shell line that leaves ``marker`` and then does ``then``."""
    return f"touch {marker}; {then}"


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    sh(root, "git", "init", "-q")
    (root / "a.txt").write_text("hello\n")
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "first")
    return root


def stat_dirty(path: Path) -> None:
    """Same bytes, newer time: Git must read the file to know it did not change."""
    later = time.time() + 5
    os.utime(path, (later, later))


@pytest.fixture
def repo(tmp_path: Path, home: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_a_filter_the_repository_names_never_runs(repo: Path, marker: Path) -> None:
    (repo / ".gitattributes").write_text("* filter=mine\n")
    sh(repo, "git", "config", "filter.mine.clean", program(marker))
    sh(repo, "git", "config", "filter.mine.process", program(marker, "exit 1"))
    stat_dirty(repo / "a.txt")

    status = git.run_text(["status", "--porcelain=v2"], cwd=str(repo), timeout=10)
    hashed = git.run_text(["hash-object", "a.txt"], cwd=str(repo), timeout=10)
    diff = git.run_text(["diff", "HEAD", "--stat"], cwd=str(repo), timeout=10)

    assert not marker.exists()
    assert status.returncode == 0 and " a.txt" not in status.stdout  # unchanged, read raw
    assert hashed.stdout.strip() == sh(repo, "git", "rev-parse", "HEAD:a.txt").strip()
    assert diff.returncode == 0 and diff.stdout == ""


def test_the_users_own_filter_still_runs(repo: Path, home: Path, marker: Path) -> None:
    """A filter from the user's global settings (Git LFS is one) is theirs, not the
    repository's: Ithaca's Git keeps it, even where the repository names it too."""
    (repo / ".gitattributes").write_text("*.txt filter=lfs-like\n")
    with (home / ".gitconfig").open("a") as settings:
        settings.write(f'[filter "lfs-like"]\n\tclean = "{program(marker)}"\n')
    sh(repo, "git", "config", "filter.lfs-like.clean", "touch /nonexistent/agent; cat")
    stat_dirty(repo / "a.txt")

    git.run(["status", "--porcelain=v2"], cwd=str(repo), timeout=10)

    assert marker.exists()


def test_no_file_system_monitor_hook_or_pager_from_the_repository(repo: Path, marker: Path) -> None:
    hooks = repo / "agent-hooks"
    hooks.mkdir()
    for name in ("post-checkout", "pre-commit", "reference-transaction"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
    sh(repo, "git", "config", "core.hooksPath", str(hooks))
    sh(repo, "git", "config", "core.fsmonitor", program(marker, "echo"))
    sh(repo, "git", "config", "core.pager", program(marker))
    sh(repo, "git", "config", "pager.log", program(marker))
    stat_dirty(repo / "a.txt")

    assert git.run(["status"], cwd=str(repo), timeout=10).returncode == 0
    assert git.run(["log", "-1"], cwd=str(repo), timeout=10).returncode == 0
    added = git.run(
        ["worktree", "add", "-q", str(repo.parent / "wt"), "HEAD"], cwd=str(repo), timeout=10
    )
    assert added.returncode == 0
    updated = git.run(["update-ref", "refs/heads/other", "HEAD"], cwd=str(repo), timeout=10)
    assert updated.returncode == 0

    assert not marker.exists()


def test_no_external_diff_or_text_conversion_from_the_repository(repo: Path, marker: Path) -> None:
    (repo / ".gitattributes").write_text("*.txt diff=mine\n")
    sh(repo, "git", "config", "diff.external", program(marker, "true"))
    sh(repo, "git", "config", "diff.mine.textconv", program(marker))
    sh(repo, "git", "config", "diff.mine.command", program(marker, "true"))
    (repo / "a.txt").write_text("changed\n")

    shown = git.run_text(["diff", "HEAD"], cwd=str(repo), timeout=10)
    logged = git.run_text(["log", "-p", "-1"], cwd=str(repo), timeout=10)

    assert not marker.exists()
    assert "+changed" in shown.stdout and "+hello" in logged.stdout


def test_an_embedded_repository_the_agent_made_is_never_entered(repo: Path, marker: Path) -> None:
    """The agent makes a repository inside the project, with a monitor and a filter of its
    own, adds it as a submodule and asks (in ``.gitmodules`` and the settings) that it be
    looked into: Git, run by Ithaca, does not go in."""
    inner = make_repo(repo / "vendor" / "inner")
    (inner / ".gitattributes").write_text("* filter=inner\n")
    sh(inner, "git", "add", "-A")
    sh(inner, "git", "commit", "-qm", "attributes")
    sh(inner, "git", "config", "core.fsmonitor", program(marker, "echo"))
    sh(inner, "git", "config", "filter.inner.clean", program(marker))
    sh(inner, "git", "config", "core.hooksPath", str(inner))
    sh(repo, "git", "-c", "advice.addEmbeddedRepo=false", "add", "vendor/inner")
    (repo / ".gitmodules").write_text(
        '[submodule "inner"]\n\tpath = vendor/inner\n\turl = ./vendor/inner\n\tignore = none\n'
    )
    sh(repo, "git", "config", "submodule.inner.ignore", "none")
    sh(repo, "git", "config", "submodule.recurse", "true")
    stat_dirty(inner / "a.txt")

    status = git.run_text(["status", "--porcelain=v2", "-z"], cwd=str(repo), timeout=10)
    git.run(["diff", "HEAD"], cwd=str(repo), timeout=10)
    git.run(["diff-index", "HEAD"], cwd=str(repo), timeout=10)
    git.run(["diff-files"], cwd=str(repo), timeout=10)

    assert not marker.exists()
    assert "vendor/inner" in status.stdout  # the new submodule itself is still seen


def test_inherited_git_variables_do_not_aim_git_elsewhere(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: Path
) -> None:
    other = make_repo(tmp_path / "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", program(marker, "true"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor={program(marker, 'echo')}'")
    (repo / "a.txt").write_text("changed\n")

    top = git.run_text(["rev-parse", "--show-toplevel"], cwd=str(repo), timeout=10)
    shown = git.run_text(["diff"], cwd=str(repo), timeout=10)

    assert top.stdout.strip() == str(repo.resolve())
    assert "+changed" in shown.stdout
    assert not marker.exists()


def test_a_replacement_object_does_not_stand_in_for_the_real_one(repo: Path) -> None:
    real = sh(repo, "git", "rev-parse", "HEAD:a.txt").strip()
    fake = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=repo,
        input="forged\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    sh(repo, "git", "replace", real, fake)

    shown = git.run_text(["cat-file", "-p", real], cwd=str(repo), timeout=10)

    assert shown.stdout == "hello\n"


def test_a_setting_that_cannot_be_switched_off_stops_git_from_running(
    repo: Path, marker: Path
) -> None:
    (repo / ".gitattributes").write_text("* filter=a=b\n")
    sh(repo, "git", "config", "filter.a=b.clean", program(marker))
    stat_dirty(repo / "a.txt")

    with pytest.raises(git.UnsafeSettings) as raised:
        git.run(["status"], cwd=str(repo), timeout=10)

    assert isinstance(raised.value, OSError)  # callers treat it as Git not answering
    assert "filter.a=b.clean" in str(raised.value)
    assert not marker.exists()
