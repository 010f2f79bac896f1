"""`ithaca init`, `status`, `log`, `doctor`, `install`/`uninstall` and `hook` through the CLI."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ithaca.cli.entry import cli
from ithaca.kernel.migrations import MIGRATIONS


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin)


def git_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_init_creates_the_planes_and_ignores_the_runtime_folder_once(tmp_path):
    root = git_repo(tmp_path)
    first = run("--project", str(root), "init", "--json")
    assert first.exit_code == 0, first.output
    created = json.loads(first.output)["created"]
    assert ".ithaca/protocols" in created and ".ithaca/.runtime/state.db" in created
    exclude = (root / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.ithaca/.runtime/") == 1

    again = run("--project", str(root), "init", "--json")
    assert json.loads(again.output)["created"] == []
    assert (root / ".git" / "info" / "exclude").read_text() == exclude
    ignored = subprocess.run(
        ["git", "check-ignore", ".ithaca/.runtime/state.db", ".ithaca/protocols/team.x.json"],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert ignored == [".ithaca/.runtime/state.db"]


def test_init_uses_the_projects_own_gitignore_when_it_has_one(tmp_path):
    root = git_repo(tmp_path)
    (root / ".gitignore").write_text("build/")
    run("--project", str(root), "init")
    assert (root / ".gitignore").read_text() == "build/\n/.ithaca/.runtime/\n"


def test_commands_outside_a_project_say_how_to_start(tmp_path):
    for command in ("status", "log", "doctor"):
        result = run("--project", str(tmp_path), command)
        assert result.exit_code == 1
        assert "NOT_INITIALISED" in result.output


def test_status_reports_schema_journal_and_protocols_as_json(project_dir):
    result = run("--project", str(project_dir), "status", "--json")
    info = json.loads(result.output)
    assert info["protocols"]["base"] == 10
    assert info["schemaVersion"] >= 2
    assert info["journalEvents"] >= 2


def test_status_names_the_active_debugging_session(project_dir):
    assert "no active debugging session" in run("--project", str(project_dir), "status").output
    run("--project", str(project_dir), "ulysses", "init", "the cache returns stale rows")

    info = json.loads(run("--project", str(project_dir), "status", "--json").output)

    assert info["ulysses"]["phase"] == "IDLE"
    assert info["ulysses"]["requiredAction"] == "plan"
    assert info["ulysses"]["sessionId"] in run("--project", str(project_dir), "status").output


def test_status_says_when_the_agent_may_confirm_its_own_stories(project_dir):
    def status() -> str:
        return run("--project", str(project_dir), "status").output

    assert "strict approval" not in status()
    (project_dir / ".ithaca" / "config.toml").write_text("[ultragoal]\nstrict_approval = false\n")
    assert "strict approval OFF: the agent may confirm its own stories" in status()
    info = json.loads(run("--project", str(project_dir), "status", "--json").output)
    assert info["strictApproval"] is False


def test_log_filters_by_kind_prefix_and_subject(project_dir):
    entries = json.loads(run("--project", str(project_dir), "log", "--json").output)
    assert [e["kind"] for e in entries][:2] == ["kernel.migrated", "protocols.seeds_reconciled"]
    only = json.loads(
        run("--project", str(project_dir), "log", "--kind", "protocols.", "--json").output
    )
    assert {e["kind"] for e in only} == {"protocols.seeds_reconciled"}
    none = run("--project", str(project_dir), "log", "--subject", "evt_nothing", "--json")
    assert json.loads(none.output) == []


def test_log_with_a_bad_limit_is_a_usage_error(project_dir):
    assert run("--project", str(project_dir), "log", "--limit", "zero").exit_code == 2


def test_doctor_reports_a_hand_edited_journal_row_by_its_seq(project_dir):
    healthy = run("--project", str(project_dir), "doctor", "--json")
    assert healthy.exit_code == 0 and json.loads(healthy.output)["ok"] is True

    conn = sqlite3.connect(project_dir / ".ithaca" / ".runtime" / "state.db")
    conn.execute("UPDATE journal SET actor = 'user' WHERE seq = 2")
    conn.commit()
    conn.close()
    for full in ([], ["--full"]):  # a routine check reads the rows it verified before too
        broken = run("--project", str(project_dir), "doctor", *full, "--json")
        assert broken.exit_code == 1
        findings = json.loads(broken.output)["findings"]
        assert {(f["code"], f.get("seq")) for f in findings} == {("JOURNAL_CHAIN_BROKEN", 2)}


def test_doctor_repair_migrates_an_old_schema_after_a_backup(project_dir):
    db = project_dir / ".ithaca" / ".runtime" / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("PRAGMA foreign_keys = OFF")
    kernel_tables = {"journal", "host_sessions", "gate_state", "write_allowances"}
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        if table not in kernel_tables and not table.startswith("sqlite_"):
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.commit()
    conn.close()
    check = run("--project", str(project_dir), "doctor", "--json")
    assert check.exit_code == 1
    assert "STATE_NEEDS_MIGRATION" in {f["code"] for f in json.loads(check.output)["findings"]}

    repaired = run("--project", str(project_dir), "doctor", "--repair", "--json")
    later = [migration.name for migration in MIGRATIONS if migration.version > 1]
    report = json.loads(repaired.output)
    assert report["repaired"] == later
    assert report["ok"] is True
    taken = Path(report["backup"]["path"])  # the copy taken before migrating, as it was
    assert taken.parent == project_dir / ".ithaca" / ".runtime" / "backups"
    assert json.loads(taken.with_suffix(".json").read_text())["user_version"] == 1


def test_install_and_uninstall_claude_leave_the_users_settings_as_they_were(project_dir):
    settings = project_dir / ".claude" / "settings.json"
    settings.parent.mkdir()
    own = {
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
    }
    settings.write_text(json.dumps(own))

    installed = run("--project", str(project_dir), "install", "claude", "--json")
    assert installed.exit_code == 0, installed.output
    merged = json.loads(settings.read_text())
    assert merged["permissions"]["allow"] == own["permissions"]["allow"]
    assert "Write(/.ithaca/**)" in merged["permissions"]["deny"]
    assert merged["sandbox"]["enabled"] is True
    assert len(merged["hooks"]["Stop"]) == 2
    assert merged["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] == 5
    assert "ithaca" in json.loads((project_dir / ".mcp.json").read_text())["mcpServers"]

    removed = run("--project", str(project_dir), "uninstall", "claude", "--json")
    assert removed.exit_code == 0
    assert json.loads(settings.read_text()) == own


def test_install_of_an_unknown_host_is_a_usage_error(project_dir):
    assert run("--project", str(project_dir), "install", "vim").exit_code == 2


def test_hook_command_answers_host_json(project_dir):
    payload = json.dumps({"session_id": "s1", "cwd": str(project_dir), "prompt": "hello"})
    result = run("hook", "claude", "UserPromptSubmit", stdin=payload)
    assert result.exit_code == 0
    context = json.loads(result.output)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("Ithaca admitted this prompt as event evt_")


@pytest.mark.parametrize("payload", ["{broken", "null", "7"])
def test_log_shows_a_hand_edited_payload_instead_of_crashing(project_dir, payload):
    conn = sqlite3.connect(project_dir / ".ithaca" / ".runtime" / "state.db")
    conn.execute("UPDATE journal SET payload = ? WHERE seq = 2", (payload,))
    conn.commit()
    conn.close()
    text = run("--project", str(project_dir), "log")
    assert text.exit_code == 0
    assert "payload not in its usual shape" in text.output
    entries = json.loads(run("--project", str(project_dir), "log", "--json").output)
    shown = {"unreadablePayload": payload} if payload == "{broken" else json.loads(payload)
    assert entries[1]["payload"] == shown


def test_log_limit_keeps_the_newest_events(project_dir):
    entries = json.loads(run("--project", str(project_dir), "log", "--limit", "1", "--json").output)
    every = json.loads(run("--project", str(project_dir), "log", "--json").output)
    assert len(every) > 1 and entries == every[-1:]


def test_a_fixtures_file_that_is_not_utf8_is_invalid_input(project_dir, tmp_path):
    bad = tmp_path / "fixtures.json"
    bad.write_bytes(b"\xff\xfe not utf-8")
    result = run("--project", str(project_dir), "protocols", "test", str(bad))
    assert result.exit_code == 2
    assert "INVALID_INPUT" in result.output


def test_a_project_folder_that_does_not_exist_is_a_usage_error_and_creates_nothing(tmp_path):
    missing = tmp_path / "missing"
    result = run("--project", str(missing), "init")
    assert result.exit_code == 2
    assert not missing.exists()
