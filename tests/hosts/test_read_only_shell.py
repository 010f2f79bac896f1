"""A read-only program with an option that starts a program, through the installed hook as
a separate process (issue 24, item 4).

``git grep -O<pager>`` opens the files it found in a pager of the caller's choosing, so
``git grep -O'sh -c …'`` runs any command. It is judged mutating: during a lockdown the
hook refuses it while a plain ``git grep`` still runs, and in a coding turn it arms the
end-of-turn critic, whose Stop is held until a verification passed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.accepted import accept

from ithaca.app import open_project

HOOK = str(Path(sys.executable).parent / "ithaca-hook")
SESSION = "33333333-3333-4333-8333-333333333333"
TEAM_RULE = ".ithaca/protocols/team.extra.json"
MARKER = "pwned.txt"
PAGER_GREP = f"git grep -O'sh -c \"touch {MARKER}\"' hello"
VERIFY = f"test ! -f {MARKER}"  # the project's check: no file made by the "search"
EVENT_ID = re.compile(r"evt_[0-9A-HJKMNP-TV-Z]{26}")


@pytest.fixture
def installed(project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with Claude Code wired in (the unsandboxed profile, where nothing but the
    hook stands between the agent's shell and the files) and one file Git tracks."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ithaca"), "install", "claude", "--profile",
         "unsandboxed"],
        cwd=project_dir, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (project_dir / "notes.md").write_text("hello\n")
    subprocess.run(["git", "-C", str(project_dir), "add", "notes.md"], check=True)
    return project_dir


def hook(root: Path, event: str, **fields: Any) -> dict[str, Any]:
    """What the installed hook command answers Claude Code (``{}`` for silence)."""
    payload = {"session_id": SESSION, "cwd": str(root), "hook_event_name": event, **fields}
    done = subprocess.run(
        [HOOK, "claude", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(root)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    return answer


def before_shell(root: Path, command: str) -> tuple[str, str]:
    """The PreToolUse decision on a Bash command (``allow`` when the hook said nothing)
    and its reason."""
    answer = hook(root, "PreToolUse", tool_name="Bash", tool_input={"command": command})
    specific = answer.get("hookSpecificOutput", {})
    return specific.get("permissionDecision", "allow"), specific.get("permissionDecisionReason", "")


def after_shell(root: Path, command: str) -> dict[str, Any]:
    """Claude Code's PostToolUse for a Bash command that exited 0."""
    response = {"stdout": "", "stderr": "", "interrupted": False}
    return hook(
        root, "PostToolUse", tool_name="Bash", tool_input={"command": command},
        tool_response=response,
    )  # fmt: skip


def run_as_the_host(root: Path, command: str) -> subprocess.CompletedProcess[str]:
    """Run a command the hook let through, as Claude Code's Bash tool does."""
    return subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, text=True)


def test_during_a_lockdown_git_grep_with_a_pager_is_refused_and_plain_git_grep_runs(installed):
    (installed / TEAM_RULE).write_text("{}")  # a change to a protected file
    held = after_shell(installed, "printf '{}' > .ith''aca/protocols/team.extra.json")
    assert held["decision"] == "block" and "[LOCKDOWN]" in held["reason"]

    for command in (
        PAGER_GREP,
        "git grep --open-files-in-pager=vim hello",
        "GIT_PAGER='sh -c x' git -p grep hello",
        "git log --output=notes.md -1",
    ):
        decision, reason = before_shell(installed, command)
        assert decision == "deny" and "[LOCKDOWN]" in reason, (command, reason)
    assert not (installed / MARKER).exists()

    decision, reason = before_shell(installed, "git grep -n hello")
    assert decision == "allow" and "[LOCKDOWN]" not in reason, reason
    assert run_as_the_host(installed, "git grep -n hello").stdout == "notes.md:1:hello\n"


def test_git_grep_with_a_pager_arms_the_critic_until_ithacas_verification_passed(installed):
    (installed / ".ithaca" / "config.toml").write_text(
        f'[verification]\ncommands = ["{VERIFY}"]\n', encoding="utf-8"
    )
    accept(installed)
    admitted = hook(installed, "UserPromptSubmit", prompt="::workflow coding\nFind hello.")
    event_id = EVENT_ID.search(admitted["hookSpecificOutput"]["additionalContext"])
    assert event_id is not None, admitted
    project = open_project(installed)
    try:
        project.protocols.load_protocols({"eventId": event_id.group()})
    finally:
        project.close()

    assert before_shell(installed, PAGER_GREP)[0] == "allow"
    assert run_as_the_host(installed, PAGER_GREP).returncode == 0
    assert (installed / MARKER).exists()  # the "search" ran a program that made a file
    after_shell(installed, PAGER_GREP)

    stop = hook(installed, "Stop", stop_hook_active=False, last_assistant_message="Found it.")
    assert stop.get("decision") == "block", stop
    assert "VERIFICATION_REQUIRED" in stop["reason"] and "custom failed" in stop["reason"]

    (installed / MARKER).unlink()  # what the agent does after the hold
    assert hook(installed, "Stop", stop_hook_active=False, last_assistant_message="Done.") == {}
