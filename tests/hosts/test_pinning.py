"""The hook judges every call by the project it was installed in: a ``.ithaca/`` the agent
makes in a sub-folder, or in a folder it moves to, is refused, not obeyed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ithaca.hosts import dispatch


def pre_tool_use(cwd: Path, tool: str = "Write") -> tuple[str, str]:
    tool_input = {"file_path": str(cwd / "a.py"), "content": "x"} if tool == "Write" else {}
    payload = {
        "session_id": "sess-1",
        "cwd": str(cwd),
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": {**tool_input, "file_path": str(cwd / "a.py")},
    }
    out, code = dispatch.run("claude", "PreToolUse", json.dumps(payload))
    assert code == 0
    specific = json.loads(out)["hookSpecificOutput"] if out else {}
    return specific.get("permissionDecision", "allow"), specific.get("permissionDecisionReason", "")


def decoy(folder: Path) -> None:
    """A state folder an agent made, that would switch strict mode off if obeyed."""
    (folder / ".ithaca").mkdir(parents=True)
    (folder / ".ithaca" / "config.toml").write_text("[protocols]\nstrict = false\n")


def test_a_state_folder_below_the_git_top_is_refused(project_dir):
    decoy(project_dir / "sub")
    decision, reason = pre_tool_use(project_dir / "sub")
    assert decision == "deny" and "[STATE_ROOT_DISPLACED]" in reason
    assert str(project_dir / "sub" / ".ithaca") in reason
    assert pre_tool_use(project_dir / "sub", tool="Read")[0] == "allow"


def test_with_the_hosts_project_dir_a_folder_elsewhere_is_refused_too(
    project_dir, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project_dir))
    elsewhere = tmp_path / "elsewhere"
    subprocess.run(["git", "init", "-q", str(elsewhere)], check=True)
    decoy(elsewhere)
    decision, reason = pre_tool_use(elsewhere)
    assert decision == "deny" and "[STATE_ROOT_DISPLACED]" in reason


def test_a_folder_without_state_is_judged_by_the_pinned_project_not_let_through(
    project_dir, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project_dir))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    decision, reason = pre_tool_use(scratch)
    assert decision == "deny" and "[NO_CURRENT_EVENT]" in reason  # strict mode, no prompt yet


def test_a_worktree_linking_to_the_state_folder_is_the_same_project(project_dir, tmp_path):
    worktree = tmp_path / "wt"
    subprocess.run(["git", "init", "-q", str(worktree)], check=True)
    (worktree / ".ithaca").symlink_to(project_dir / ".ithaca")
    decision, reason = pre_tool_use(worktree)
    assert "STATE_ROOT_DISPLACED" not in reason


def test_placeholders_the_hosts_sandboxes_leave_are_not_projects(tmp_path, monkeypatch):
    from ithaca.kernel.project import find_project

    (tmp_path / ".ithaca").mkdir()  # an empty stand-in for a protected path
    folder = tmp_path / "work"
    folder.mkdir()
    assert find_project(folder) is None
    home = tmp_path / "home"
    (home / ".ithaca").mkdir(parents=True)
    (home / ".ithaca" / "config.toml").write_text("")  # the user's own Ithaca settings
    (home / "scratch").mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ITHACA_HOME")
    assert find_project(home / "scratch") is None
    monkeypatch.setenv("ITHACA_HOME", str(tmp_path / "elsewhere"))
    assert find_project(home / "scratch").root == str(home)  # then it is a state folder
