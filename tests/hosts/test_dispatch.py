"""The dispatcher's own behaviour: projects, failures and the session registry.

Protocol admission and enforcement through the dispatcher are covered in
tests/protocols/test_admission.py and test_enforcement.py.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from ithaca.hosts import dispatch

HOOK = str(Path(sys.executable).parent / "ithaca-hook")


def _edit(cwd: Path) -> str:
    return json.dumps(
        {
            "session_id": "sess-1",
            "cwd": str(cwd),
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(cwd / "a.py"), "content": "x"},
        }
    )


def _read(cwd: Path) -> str:
    return json.dumps(
        {"session_id": "s", "cwd": str(cwd), "tool_name": "Read", "tool_input": {"file_path": "a"}}
    )


def test_outside_a_project_every_hook_abstains(tmp_path):
    assert dispatch.run("claude", "PreToolUse", _edit(tmp_path)) == ("", 0)


def test_unreadable_hook_input_inside_a_project_blocks_with_exit_2(project_dir):
    done = subprocess.run(
        [HOOK, "claude", "PreToolUse"],
        input="{not json",
        capture_output=True,
        text=True,
        cwd=project_dir,
    )
    assert done.returncode == 2
    assert "could not be read" in done.stderr


def test_unknown_event_or_host_is_a_usage_error():
    assert subprocess.run([HOOK, "claude", "Nope"], capture_output=True).returncode == 2
    assert subprocess.run([HOOK, "vim", "PreToolUse"], capture_output=True).returncode == 2


def test_every_hook_call_records_the_host_session(project_dir):
    dispatch.run("claude", "PreToolUse", _edit(project_dir))
    end = json.dumps({"session_id": "sess-1", "cwd": str(project_dir)})
    dispatch.run("claude", "SessionEnd", end)
    conn = sqlite3.connect(project_dir / ".ithaca" / ".runtime" / "state.db")
    row = conn.execute(
        "SELECT host, first_seen_at <= last_seen_at, ended_at IS NOT NULL FROM host_sessions"
        " WHERE host_session_id = 'sess-1'"
    ).fetchone()
    assert row == ("claude", 1, 1)


def test_session_start_exports_the_session_id_to_the_env_file(project_dir, tmp_path):
    env_file = tmp_path / "claude.env"
    payload = json.dumps({"session_id": "sess-9", "cwd": str(project_dir), "source": "startup"})
    done = subprocess.run(
        [HOOK, "claude", "SessionStart"],
        input=payload,
        capture_output=True,
        text=True,
        env={"CLAUDE_ENV_FILE": str(env_file), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0
    assert env_file.read_text() == "export ITHACA_SESSION_ID=sess-9\n"


def test_an_older_schema_denies_mutating_calls_until_repaired(project_dir):
    db = project_dir / ".ithaca" / ".runtime" / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    out, code = dispatch.run("claude", "PreToolUse", _edit(project_dir))
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "ithaca doctor --repair" in answer["permissionDecisionReason"]
    assert dispatch.run("claude", "PreToolUse", _read(project_dir)) == ("", 0)


def test_an_invalid_config_fails_closed_for_mutations_and_prompts(project_dir):
    (project_dir / ".ithaca" / "config.toml").write_text("[protocols]\nstrickt = true\n")
    out, _ = dispatch.run("claude", "PreToolUse", _edit(project_dir))
    assert "INVALID_CONFIG" in json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    prompt = json.dumps({"session_id": "s", "cwd": str(project_dir), "prompt": "hi"})
    out, _ = dispatch.run("claude", "UserPromptSubmit", prompt)
    assert json.loads(out)["decision"] == "block"


def test_the_installed_hook_command_answers_through_the_ithaca_hook_on_path(project_dir):
    from ithaca.hosts.claude.installer import hook_command

    command = hook_command("PreToolUse")
    assert sys.executable not in command and str(project_dir) not in command
    done = subprocess.run(
        command, shell=True, input=_edit(project_dir), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "no admitted prompt" in answer["permissionDecisionReason"]


def test_the_installed_hook_command_reports_unreadable_input_with_exit_code_2(project_dir):
    from ithaca.hosts.claude.installer import hook_command

    done = subprocess.run(
        hook_command("PreToolUse"),
        shell=True,
        input="{not json",
        capture_output=True,
        text=True,
        cwd=project_dir,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "the hook input could not be read" in done.stderr


def test_a_module_file_in_the_project_folder_cannot_stand_in_for_a_standard_one(project_dir):
    from ithaca.hosts.claude.installer import hook_command

    for name in ("_json", "_sqlite3", "math"):
        (project_dir / f"{name}.py").write_text("raise SystemExit('shadowed')\n")
    done = subprocess.run(
        hook_command("PreToolUse"),
        shell=True,
        input=_edit(project_dir),
        capture_output=True,
        text=True,
        cwd=project_dir,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_configured_read_only_commands_make_a_shell_call_read_only(project_dir):
    # With no admitted prompt the strict protocols gate denies mutating calls only.
    bash = json.dumps(
        {
            "session_id": "s",
            "cwd": str(project_dir),
            "tool_name": "Bash",
            "tool_input": {"command": "mytool x | grep y"},
        }
    )
    out, _ = dispatch.run("claude", "PreToolUse", bash)
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"

    config = project_dir / ".ithaca" / "config.toml"
    config.write_text('[ulysses]\nread_only_commands = ["mytool"]\n', encoding="utf-8")
    assert dispatch.run("claude", "PreToolUse", bash) == ("", 0)


def test_tests_count_as_mutating_when_the_config_says_so(project_dir):
    bash = json.dumps(
        {
            "session_id": "s",
            "cwd": str(project_dir),
            "tool_name": "Bash",
            "tool_input": {"command": "pytest -q"},
        }
    )
    assert dispatch.run("claude", "PreToolUse", bash) == ("", 0)

    config = project_dir / ".ithaca" / "config.toml"
    config.write_text("[ulysses]\ntests_are_read_only = false\n", encoding="utf-8")
    out, _ = dispatch.run("claude", "PreToolUse", bash)
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_an_unreadable_store_denies_mutations_but_lets_reads_through(project_dir):
    (project_dir / ".ithaca" / ".runtime" / "state.db").write_bytes(b"not a database" * 100)
    out, _ = dispatch.run("claude", "PreToolUse", _edit(project_dir))
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "STATE_UNREADABLE" in reason
    assert reason.count("STATE_UNREADABLE") == 1
    assert dispatch.run("claude", "PreToolUse", _read(project_dir)) == ("", 0)
