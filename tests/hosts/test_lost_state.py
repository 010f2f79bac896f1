"""Lost state fails closed: where Ithaca was set up but its state is gone, every hook that
could let something change refuses with a code and the commands that restore it, through
every host adapter and the Claude Code plugin; a folder never set up is left alone.

Every hook here runs as the host runs it: the installed ``ithaca-hook`` in a process of
its own, JSON on stdin.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.accepted import accept
from tests.lost_states import CASES, DB, as_an_ordinary_user, deleted, garbage, with_backup

from ithaca import init_project
from ithaca.kernel.lost_state import record_path

HOOK = str(Path(sys.executable).parent / "ithaca-hook")


@pytest.fixture
def project_with_backup(project_dir: Path) -> Path:
    """An initialised project (so Ithaca's record says so) with one verified backup."""
    return with_backup(project_dir)


def hook(
    host: str,
    event: str,
    payload: dict[str, Any],
    *,
    plugin: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The installed hook, as a host starts it for one call (with ``env`` on top of this
    process's environment, where Claude Code's project folder is not set)."""
    inherited = {name: value for name, value in os.environ.items() if name != "CLAUDE_PROJECT_DIR"}
    done = subprocess.run(
        [HOOK, host, event, *(["--plugin"] if plugin else [])],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**inherited, **(env or {})},
        preexec_fn=as_an_ordinary_user,
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def write(root: Path) -> dict[str, Any]:
    return {
        "session_id": "s1",
        "cwd": str(root),
        "tool_name": "Write",
        "tool_input": {"file_path": str(root / "notes.txt"), "content": "x"},
    }


def read(root: Path) -> dict[str, Any]:
    return {
        "session_id": "s1",
        "cwd": str(root),
        "tool_name": "Read",
        "tool_input": {"file_path": str(root / "README")},
    }


def shell(root: Path, command: str) -> dict[str, Any]:
    return {
        "session_id": "s1",
        "cwd": str(root),
        "tool_name": "Bash",
        "tool_input": {"command": command},
    }


def prompt(root: Path) -> dict[str, Any]:
    return {"session_id": "s1", "cwd": str(root), "prompt": "add a notes file"}


def session(root: Path) -> dict[str, Any]:
    return {"session_id": "s1", "cwd": str(root), "source": "startup"}


def denial(done: subprocess.CompletedProcess[str]) -> str:
    """The reason of a PreToolUse deny (Claude Code's and Codex's shape alike)."""
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny", answer
    reason: str = answer["permissionDecisionReason"]
    return reason


def assert_refused(reason: str, code: str, restore: tuple[str, ...]) -> None:
    assert reason.startswith(f"Refused by Ithaca policy [{code}], on purpose"), reason
    for command in restore:
        assert command in reason, (command, reason)


@pytest.mark.parametrize("case", sorted(CASES))
def test_lost_state_refuses_mutating_calls_with_its_code_and_restore_command(
    case: str, project_with_backup: Path
):
    root = project_with_backup
    lose, code, restore = CASES[case]
    lose(root)
    anchor = {"CLAUDE_PROJECT_DIR": str(root)}

    for host, plugin, env in (
        ("claude", False, anchor),
        ("claude", True, anchor),  # the plugin: Ithaca's record says it was set up here
        ("codex", False, {}),
    ):
        assert_refused(
            denial(hook(host, "PreToolUse", write(root), plugin=plugin, env=env)), code, restore
        )
        assert hook(host, "PreToolUse", read(root), plugin=plugin, env=env).stdout == ""
    assert not (root / "notes.txt").exists()


@pytest.mark.parametrize("case", sorted(CASES))
def test_lost_state_is_said_at_the_prompt_and_the_session_start_and_stop_still_ends(
    case: str, project_with_backup: Path
):
    """The prompt goes through, carrying the loss to the agent and to the user; nothing can
    change meanwhile, so the turn may end."""
    root = project_with_backup
    lose, code, restore = CASES[case]
    lose(root)
    anchor = {"CLAUDE_PROJECT_DIR": str(root)}

    for host, env in (("claude", anchor), ("codex", {})):
        for event, payload in (("UserPromptSubmit", prompt(root)), ("SessionStart", session(root))):
            done = hook(host, event, payload, env=env)
            assert done.returncode == 0, done.stderr
            answer = json.loads(done.stdout)
            assert "decision" not in answer  # not blocked: said
            context = answer["hookSpecificOutput"]["additionalContext"]
            assert f"[{code}]" in context and restore[-1] in context
            assert answer["systemMessage"].startswith(f"Ithaca [{code}]: ")
        stop = hook(host, "Stop", {"session_id": "s1", "cwd": str(root)}, env=env)
        assert (stop.returncode, stop.stdout.strip()) == (0, "" if host == "claude" else "{}")
    for event in ("PostToolUse", "PreCompact", "SubagentStop", "SessionEnd"):
        quiet = hook("claude", event, {**read(root), "hook_event_name": event}, env=anchor)
        assert (quiet.returncode, quiet.stdout) == (0, "")


def test_the_agent_can_report_but_not_remake_the_lost_state(project_with_backup: Path):
    root = project_with_backup
    deleted(root)
    env = {"CLAUDE_PROJECT_DIR": str(root)}

    for command in ("ithaca init", "ithaca record baseline initialize", "ithaca doctor --repair"):
        assert "[STATE_MISSING]" in denial(
            hook("claude", "PreToolUse", shell(root, command), env=env)
        )
    ithaca_tool = {**read(root), "tool_name": "mcp__ithaca__context", "tool_input": {}}
    assert "[STATE_MISSING]" in denial(hook("claude", "PreToolUse", ithaca_tool, env=env))
    for command in ("ithaca status", "ithaca doctor", "git status"):
        assert hook("claude", "PreToolUse", shell(root, command), env=env).stdout == ""
    assert not (root / ".ithaca").exists()


def test_a_folder_never_set_up_is_left_alone(tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".ithaca").mkdir()  # the empty placeholder a host's sandbox may stand there
    anchor = {"CLAUDE_PROJECT_DIR": str(root)}

    for host, plugin, env in (
        ("claude", False, anchor),
        ("claude", True, anchor),
        ("codex", False, {}),
    ):
        assert hook(host, "PreToolUse", write(root), plugin=plugin, env=env).stdout == ""
        assert hook(host, "UserPromptSubmit", prompt(root), plugin=plugin, env=env).stdout == ""
        assert hook(host, "SessionStart", session(root), plugin=plugin, env=env).stdout == ""
    assert hook("codex", "Stop", {"session_id": "s1", "cwd": str(root)}).stdout.strip() == "{}"
    bad_input = subprocess.run(
        [HOOK, "claude", "PreToolUse"], input="{not json", capture_output=True, text=True, cwd=root
    )
    assert (bad_input.returncode, bad_input.stderr) == (0, "")


def test_a_teammates_clone_is_known_by_its_committed_wiring(project_dir: Path):
    """No record on this machine (another home, a fresh clone): the project's wiring, which
    names ``ithaca-hook``, is what says Ithaca governs it. The plugin's hook leaves each
    event to the install's."""
    from ithaca.hosts.claude.installer import install as install_claude
    from ithaca.hosts.codex.installer import install as install_codex

    root = project_dir
    install_claude(root, profile="unsandboxed")
    install_codex(root, profile="unsandboxed")
    Path(record_path(str(root))).unlink()
    deleted(root)
    anchor = {"CLAUDE_PROJECT_DIR": str(root)}

    claude = denial(hook("claude", "PreToolUse", write(root), env=anchor))
    assert "[STATE_MISSING]" in claude and "its .claude/settings.json runs ithaca-hook" in claude
    codex = denial(hook("codex", "PreToolUse", write(root)))
    assert "[STATE_MISSING]" in codex and "its .codex/hooks.json runs ithaca-hook" in codex
    assert hook("claude", "PreToolUse", write(root), plugin=True, env=anchor).stdout == ""


def test_without_record_or_wiring_the_plugin_leaves_a_deleted_state_alone(project_dir: Path):
    """Nothing outside the folder says Ithaca was set up there (a project set up before the
    record existed, say): the plugin cannot tell it from any other repository."""
    Path(record_path(str(project_dir))).unlink()
    deleted(project_dir)

    done = hook(
        "claude",
        "PreToolUse",
        write(project_dir),
        plugin=True,
        env={"CLAUDE_PROJECT_DIR": str(project_dir)},
    )
    assert done.stdout == ""


def test_a_session_worktrees_link_to_the_state_is_not_a_loss(project_dir: Path):
    """A delivery session's worktree carries the project's wiring and links its ``.ithaca``
    to the project's state: the project's gates judge the call, as ever."""
    from ithaca.hosts.claude.installer import install as install_claude

    install_claude(project_dir, profile="unsandboxed")
    worktree = project_dir / ".ithaca-work" / "worktrees" / "s1"
    (worktree / ".claude").mkdir(parents=True)
    shutil.copy(project_dir / ".claude" / "settings.json", worktree / ".claude")
    (worktree / ".git").write_text("gitdir: elsewhere\n")
    (worktree / ".ithaca").symlink_to(project_dir / ".ithaca")
    accept(project_dir)  # the install, as the user accepts their own

    reason = denial(
        hook("claude", "PreToolUse", write(worktree), env={"CLAUDE_PROJECT_DIR": str(worktree)})
    )
    assert "[NO_CURRENT_EVENT]" in reason  # the project's own gates judged it


def test_unreadable_hook_input_where_the_state_is_lost_fails_closed(project_with_backup: Path):
    deleted(project_with_backup)
    done = subprocess.run(
        [HOOK, "claude", "PreToolUse"],
        input="{not json",
        capture_output=True,
        text=True,
        cwd=project_with_backup,
    )
    assert done.returncode == 2
    assert "the hook input could not be read" in done.stderr


def test_without_a_backup_a_database_that_cannot_be_read_is_rebuilt(project_dir: Path):
    shutil.rmtree(project_dir / DB.parent / "backups")  # the one `ithaca init` took
    garbage(project_dir)
    reason = denial(hook("codex", "PreToolUse", write(project_dir)))
    assert_refused(reason, "STATE_UNREADABLE", ("`ithaca doctor --rebuild`",))
    assert "doctor restore" not in reason


def test_once_restored_the_hooks_govern_again(project_with_backup: Path):
    root = project_with_backup
    deleted(root)
    init_project(root)[0].close()  # the user's `ithaca init`

    reason = denial(
        hook("claude", "PreToolUse", write(root), env={"CLAUDE_PROJECT_DIR": str(root)})
    )
    # The project's own gates judge the call again (a new journal may first want the
    # user's acceptance); nothing is refused for lost state.
    assert "[STATE_" not in reason and reason.startswith("Refused by Ithaca policy ["), reason


def test_a_database_another_process_holds_is_not_called_lost(project_dir: Path):
    """A lock is not a loss: the failure policy refuses, and no restore or rebuild of a
    healthy database is suggested."""
    holder = sqlite3.connect(project_dir / DB, isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        reason = denial(hook("codex", "PreToolUse", write(project_dir)))
    finally:
        holder.close()
    assert reason.startswith("Ithaca failed closed"), reason
    assert "database is locked" in reason
    assert "doctor restore" not in reason and "--rebuild" not in reason


def test_another_project_does_not_stand_in_for_the_lost_one(project_dir: Path, tmp_path: Path):
    """The session belongs to the project Claude Code started in: once its state is lost, a
    call from inside another governed repository is not judged by that one's rules."""
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    init_project(other)[0].close()
    deleted(project_dir)

    reason = denial(
        hook("claude", "PreToolUse", write(other), env={"CLAUDE_PROJECT_DIR": str(project_dir)})
    )
    assert "[STATE_MISSING]" in reason and f"set up in {project_dir}" in reason
