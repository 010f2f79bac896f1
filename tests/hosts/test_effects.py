"""The effect check: a change to what Ithaca protects, however it was made, puts the session
in lockdown until the user lifts it. Each test changes the files for real and asks the
installed hook, as a separate process, what it makes of the next call."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests import needs
from tests.accepted import accept
from tests.command_line import claude_hook

SESSION = "11111111-1111-4111-8111-111111111111"
OTHER = "22222222-2222-4222-8222-222222222222"
TEAM_RULE = ".ithaca/protocols/team.extra.json"


@pytest.fixture
def installed(project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with Claude Code wired in by `ithaca install`, and a user settings folder
    of its own."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    result = ithaca(project_dir, "install", "claude", "--profile", "unsandboxed")
    assert result.returncode == 0, result.stderr
    return project_dir


def ithaca(root: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "ithaca"), *args]
    return subprocess.run(command, cwd=root, input=stdin, capture_output=True, text=True)


def hook(
    root: Path, event: str, tool: str, tool_input: dict[str, str], session: str = SESSION
) -> dict[str, str]:
    """What the hook process answers: ``effect`` (allow when it said nothing) and ``text``."""
    return claude_hook(root, event, tool, tool_input, session)


def touch_file(root: Path, session: str = SESSION) -> dict[str, str]:
    return hook(root, "PreToolUse", "Bash", {"command": "touch notes.txt"}, session)


def after_shell(root: Path, command: str, session: str = SESSION) -> dict[str, str]:
    return hook(root, "PostToolUse", "Bash", {"command": command}, session)


def journal_kinds(root: Path) -> list[str]:
    conn = sqlite3.connect(root / ".ithaca/.runtime/state.db")
    try:
        return [row[0] for row in conn.execute("SELECT kind FROM journal ORDER BY seq")]
    finally:
        conn.close()


def test_a_team_rule_written_during_a_call_holds_the_call_and_locks_the_session(installed):
    assert "[LOCKDOWN]" not in touch_file(installed)["text"]
    (installed / TEAM_RULE).write_text("{}")  # however the agent spelled it
    held = after_shell(installed, "python3 -c 'open(...)'")
    assert held["effect"] == "block" and "[LOCKDOWN]" in held["text"]
    assert TEAM_RULE in held["text"] and "ithaca doctor lift-lockdown" in held["text"]
    denied = touch_file(installed)
    assert denied["effect"] == "deny" and "[LOCKDOWN]" in denied["text"]
    read = hook(installed, "PreToolUse", "Read", {"file_path": str(installed / "README")})
    assert "[LOCKDOWN]" not in read["text"]
    tool = hook(installed, "PreToolUse", "mcp__ithaca__ulysses_status", {})
    assert tool["effect"] == "deny" and "[LOCKDOWN]" in tool["text"]
    assert journal_kinds(installed).count("lockdown.entered") == 1


def test_the_doctor_shows_what_changed_and_how_to_restore_it(installed):
    (installed / ".ithaca/config.toml").write_text("[protocols]\nstrict = false\n")
    touch_file(installed)
    report = ithaca(installed, "doctor", "--json")
    assert report.returncode == 1
    found = {item["code"]: item["message"] for item in json.loads(report.stdout)["findings"]}
    assert SESSION in found["LOCKDOWN"] and ".ithaca/config.toml" in found["LOCKDOWN"]
    assert "added" in found["PROTECTED_CHANGED"]
    status = json.loads(ithaca(installed, "status", "--json").stdout)
    assert [held["session"] for held in status["lockdowns"]] == [SESSION]
    assert "LOCKDOWN" in ithaca(installed, "status").stdout


def test_only_the_user_lifts_it_and_lifting_accepts_the_files_as_they_are(installed, type_ahead):
    (installed / TEAM_RULE).write_text("{}")
    touch_file(installed)
    refused = ithaca(installed, "doctor", "lift-lockdown")
    assert refused.returncode != 0 and "USER_ONLY" in refused.stdout + refused.stderr
    assert touch_file(installed)["effect"] == "deny"
    code, shown = type_ahead(["--project", str(installed), "doctor", "lift-lockdown"], "lift")
    assert code == 0, shown
    assert "Lifted 1 lockdown" in shown
    assert "[LOCKDOWN]" not in touch_file(installed)["text"]
    assert "lockdown.lifted" in journal_kinds(installed)


def test_unwiring_the_hooks_by_a_settings_file_is_a_change(installed, tmp_path):
    user_settings = tmp_path / "claude-config" / "settings.json"
    user_settings.parent.mkdir(parents=True, exist_ok=True)
    user_settings.write_text(json.dumps({"disableAllHooks": True}))
    held = after_shell(installed, "cat > ~/.claude/settings.json")
    assert held["effect"] == "block" and "disableAllHooks" in held["text"]


def test_removing_ithacas_hook_from_the_project_settings_is_a_change(installed):
    path = installed / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    del settings["hooks"]["PreToolUse"]
    path.write_text(json.dumps(settings))
    held = after_shell(installed, "sed -i … .claude/settings.json")
    assert held["effect"] == "block" and ".claude/settings.json" in held["text"]


def test_the_users_own_edits_elsewhere_in_settings_are_not_changes(installed):
    path = installed / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    settings.setdefault("permissions", {}).setdefault("allow", []).append("Bash(npm test)")
    path.write_text(json.dumps(settings, indent=4))
    local = installed / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}}))
    assert "[LOCKDOWN]" not in after_shell(installed, "ls")["text"]
    assert "[LOCKDOWN]" not in touch_file(installed)["text"]
    assert "lockdown.entered" not in journal_kinds(installed)


def test_switching_the_sandbox_off_in_local_settings_is_a_change(
    project_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    assert ithaca(project_dir, "install", "claude").returncode == 0  # the sandboxed profile
    local = project_dir / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"sandbox": {"enabled": False}}))
    held = after_shell(project_dir, "echo … > .claude/settings.local.json")
    assert held["effect"] == "block" and "sandbox.enabled" in held["text"]


def test_a_cut_journal_tail_is_a_change(installed):
    touch_file(installed)
    conn = sqlite3.connect(installed / ".ithaca/.runtime/state.db")
    conn.execute("DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal)")
    conn.commit()
    conn.close()
    held = after_shell(installed, "sqlite3 …")
    assert held["effect"] == "block" and "journal" in held["text"]


def test_another_database_in_its_place_is_a_change(installed, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    assert ithaca(other, "init").returncode == 0
    touch_file(installed)
    os.replace(other / ".ithaca/.runtime/state.db", installed / ".ithaca/.runtime/state.db")
    held = after_shell(installed, "cp …")
    assert held["effect"] == "block" and "database replaced" in held["text"]


def test_a_copy_of_the_whole_project_is_the_same_project(installed, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(installed, copy, symlinks=True)
    assert "[LOCKDOWN]" not in touch_file(copy)["text"]


def test_a_change_undone_before_another_session_looks_locks_only_the_session_that_saw_it(
    installed,
):
    rule = installed / TEAM_RULE
    rule.write_text("{}")
    assert after_shell(installed, "…")["effect"] == "block"
    rule.unlink()
    assert "[LOCKDOWN]" not in touch_file(installed, session=OTHER)["text"]
    assert touch_file(installed)["effect"] == "deny"


def test_what_ithaca_writes_itself_is_accepted(installed):
    assert ithaca(installed, "uninstall", "claude").returncode == 0
    assert ithaca(installed, "install", "claude", "--profile", "unsandboxed").returncode == 0
    assert "[LOCKDOWN]" not in touch_file(installed)["text"]
    assert "lockdown.entered" not in journal_kinds(installed)


def git(root: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@x"}  # fmt: skip
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, **identity})  # fmt: skip


@pytest.fixture
def two_branches(installed: Path) -> Path:
    """The team rule committed as v1 on the current branch and as v2 on ``other``."""
    rule = installed / TEAM_RULE
    rule.write_text('{"v": 1}')
    git(installed, "add", "-A")
    git(installed, "commit", "-qm", "v1")
    git(installed, "checkout", "-qb", "other")
    rule.write_text('{"v": 2}')
    git(installed, "commit", "-qam", "v2")
    git(installed, "checkout", "-q", "-")
    accept(installed)
    return installed


@needs.bubblewrap
def test_a_branch_switch_that_could_not_write_the_team_rules_is_a_change(two_branches):
    state = str(two_branches / ".ithaca")
    sandboxed = ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--ro-bind", state, state]
    done = subprocess.run([*sandboxed, "git", "-C", str(two_branches), "checkout", "other"],
                          capture_output=True, text=True)  # fmt: skip
    assert "unable to unlink" in done.stderr and done.returncode == 0  # git says it switched
    assert (two_branches / TEAM_RULE).read_text() == '{"v": 1}'
    held = after_shell(two_branches, "git checkout other")
    assert held["effect"] == "block" and TEAM_RULE in held["text"]
    assert "left as it was" in held["text"]


def test_commits_and_switches_that_keep_the_team_rules_are_not_changes(two_branches):
    (two_branches / "notes.txt").write_text("work")
    git(two_branches, "add", "notes.txt")
    git(two_branches, "commit", "-qm", "work")
    git(two_branches, "checkout", "-qb", "side")
    assert "[LOCKDOWN]" not in after_shell(two_branches, "git commit; git checkout -b side")["text"]
    assert "lockdown.entered" not in journal_kinds(two_branches)


def test_a_switch_that_rewrote_the_team_rules_is_a_change(two_branches):
    git(two_branches, "checkout", "-q", "other")  # the unsandboxed profile: git could write
    held = after_shell(two_branches, "git checkout other")
    assert held["effect"] == "block" and f"{TEAM_RULE}: edited" in held["text"]


@needs.bubblewrap
def test_after_a_commit_of_the_team_rules_a_switch_back_that_could_not_write_them_shows(
    two_branches,
):
    git(two_branches, "branch", "old")  # holds v1, as the fingerprint first recorded it
    (two_branches / TEAM_RULE).write_text('{"v": 3}')
    accept(two_branches)
    git(two_branches, "commit", "-qam", "v3")
    assert "[LOCKDOWN]" not in after_shell(two_branches, "git commit -am v3")["text"]
    state = str(two_branches / ".ithaca")
    sandboxed = ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--ro-bind", state, state]
    subprocess.run([*sandboxed, "git", "-C", str(two_branches), "checkout", "-q", "old"],
                   capture_output=True)  # fmt: skip
    held = after_shell(two_branches, "git checkout old")
    assert held["effect"] == "block" and "left as it was" in held["text"]


def test_the_users_own_ithaca_settings_are_protected_but_another_users_are_not_theirs(
    installed, tmp_path, monkeypatch
):
    home = Path(os.environ["ITHACA_HOME"])
    other = tmp_path / "another-home"
    other.mkdir()
    (other / "config.toml").write_text("[protocols]\nstrict = false\n")
    monkeypatch.setenv("ITHACA_HOME", str(other))  # a process with other user settings
    assert "[LOCKDOWN]" not in touch_file(installed)["text"]
    monkeypatch.setenv("ITHACA_HOME", str(home))
    (home / "config.toml").write_text("[protocols]\nstrict = false\n")
    held = after_shell(installed, "echo … >> ~/.ithaca/config.toml")
    assert held["effect"] == "block" and "config.toml: added" in held["text"]
