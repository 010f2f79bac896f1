"""The Ithaca plugin for Claude Code: its committed files, its fail-closed hook script, and
how its hooks, its MCP server and ``ithaca install claude`` keep out of each other's way."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ithaca.cli.entry import cli
from ithaca.hosts import dispatch
from ithaca.hosts.claude import plugin
from ithaca.hosts.claude.installer import CLAUDE_EVENTS, install
from ithaca.hosts.install.doctor import check
from ithaca.kernel.errors import Refused
from ithaca.ultragoal.authority import is_reviewer

REPO = Path(__file__).resolve().parents[3]
PLUGIN = REPO / plugin.PLUGIN_RELPATH
HOOK = str(Path(sys.executable).parent / "ithaca-hook")


def test_the_committed_marketplace_and_plugin_are_what_the_installer_code_makes():
    assert plugin.stale(REPO) == [], "run: python -m ithaca.hosts.claude.plugin"
    committed = {
        str(path.relative_to(REPO))
        for folder in (PLUGIN, REPO / ".claude-plugin")
        for path in folder.rglob("*")
        if path.is_file()
    }
    assert committed == set(plugin.plugin_files())  # nothing stale left beside them


def test_the_plugin_hooks_the_installs_events_by_the_plugin_root():
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    assert list(hooks) == [spec.event for spec in CLAUDE_EVENTS]
    for spec in CLAUDE_EVENTS:
        (group,) = hooks[spec.event]
        assert group.get("matcher") == spec.matcher
        assert group["hooks"][0]["timeout"] == spec.timeout
        assert "${CLAUDE_PLUGIN_ROOT}" in group["hooks"][0]["command"]
    servers = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]
    assert servers == {"ithaca": {"command": "ithaca", "args": ["mcp", "--plugin"]}}


def test_the_hook_script_blocks_with_the_fix_on_a_machine_without_ithaca(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    done = subprocess.run(
        ["/bin/sh", str(PLUGIN / plugin.HOOK_SCRIPT), "PreToolUse"],
        input="{}",
        capture_output=True,
        text=True,
        env={"PATH": str(bare)},
    )
    assert done.returncode == 2  # Claude Code blocks the call
    assert "ITHACA_NOT_INSTALLED" in done.stderr and "uv tool install ithaca" in done.stderr


def test_the_hook_script_runs_ithacas_hook_as_the_plugins(project_dir):
    env = {"PATH": f"{Path(HOOK).parent}:/usr/bin:/bin"}
    edit = json.dumps(
        {
            "session_id": "s1",
            "cwd": str(project_dir),
            "tool_name": "Write",
            "tool_input": {"file_path": str(project_dir / "a.py"), "content": "x"},
        }
    )
    done = subprocess.run(
        ["/bin/sh", str(PLUGIN / plugin.HOOK_SCRIPT), "PreToolUse"],
        input=edit,
        capture_output=True,
        text=True,
        env=env,
        cwd=project_dir,
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "no protocols apply yet" in done.stdout  # governed as an install's hook would be


def _prompt(root: Path) -> str:
    return json.dumps({"session_id": "s1", "cwd": str(root), "prompt": "hello"})


def test_the_plugins_hooks_step_aside_for_an_event_the_project_settings_wire(project_dir):
    install(project_dir, profile="unsandboxed")
    assert dispatch.run("claude", "UserPromptSubmit", _prompt(project_dir), plugin=True) == (
        "",
        0,
    )
    out, _ = dispatch.run("claude", "UserPromptSubmit", _prompt(project_dir))
    assert "Ithaca admitted this prompt" in out
    assert "mcp__ithaca__load_protocols" in out


def test_without_an_install_the_plugins_hooks_govern_and_name_its_tools(project_dir):
    out, _ = dispatch.run("claude", "UserPromptSubmit", _prompt(project_dir), plugin=True)
    assert "select:mcp__plugin_ithaca_ithaca__load_protocols" in out
    load = {
        "session_id": "s1",
        "cwd": str(project_dir),
        "tool_name": "mcp__plugin_ithaca_ithaca__load_protocols",
        "tool_input": {"eventId": "evt_x"},
        "tool_use_id": "toolu_1",
    }
    answer, code = dispatch.run("claude", "PreToolUse", json.dumps(load), plugin=True)
    assert (answer, code) == ("", 0)  # Ithaca's own tool, under the plugin's name
    write = {**load, "tool_name": "Write", "tool_input": {"file_path": "a", "content": ""}}
    answer, _ = dispatch.run("claude", "PreToolUse", json.dumps(write), plugin=True)
    assert "deny" in answer


def enable_the_plugin_for_the_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "claude-config"
    user.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(user))
    (user / "settings.json").write_text(json.dumps({"enabledPlugins": {"ithaca@ithaca": True}}))


def test_status_doctor_and_the_session_start_name_the_plugins_weaker_profile(
    project_dir, tmp_path, monkeypatch
):
    enable_the_plugin_for_the_user(tmp_path, monkeypatch)
    status = CliRunner().invoke(cli, ["--project", str(project_dir), "status"])
    assert "claude: profile plugin (text guard only: no OS sandbox), plugin ithaca@ithaca" in (
        status.output
    )
    doctor = CliRunner().invoke(
        cli, ["--project", str(project_dir), "install", "--doctor", "claude"]
    )
    assert doctor.exit_code == 0, doctor.output
    assert "without a sandbox or deny rules" in doctor.output
    assert "claude plugin disable ithaca@ithaca" in doctor.output
    start = json.dumps({"session_id": "s1", "cwd": str(project_dir), "source": "startup"})
    out, _ = dispatch.run("claude", "SessionStart", start, plugin=True)
    assert "[Ithaca profile] unsandboxed" in out


def test_install_refuses_while_the_plugin_wires_the_project(project_dir, tmp_path, monkeypatch):
    enable_the_plugin_for_the_user(tmp_path, monkeypatch)
    with pytest.raises(Refused) as refused:
        install(project_dir, profile="unsandboxed")
    assert refused.value.code == "CLAUDE_PLUGIN_ENABLED"
    assert "claude plugin disable ithaca@ithaca" in refused.value.message
    assert not (project_dir / ".claude").exists() and not (project_dir / ".mcp.json").exists()
    found = check(project_dir, "claude")
    assert (found["installed"], found["profile"], found["plugin"]) == (
        True,
        "plugin",
        "ithaca@ithaca",
    )

    # Disabled for this project only: the install goes ahead, and the doctor still names it.
    local = project_dir / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"enabledPlugins": {"ithaca@ithaca": False}}))
    install(project_dir, profile="unsandboxed")
    assert "plugin" not in check(project_dir, "claude")


def test_the_reviewer_is_known_by_its_plugin_name_too():
    assert is_reviewer("code-reviewer", "code-reviewer")
    assert is_reviewer("ithaca:code-reviewer", "code-reviewer")
    assert not is_reviewer("other:code-reviewer", "code-reviewer")


def test_ithaca_mcp_as_the_plugins_offers_no_tools_beside_the_projects_own_server(project_dir):
    from ithaca.mcp.server import STEPPED_ASIDE, build_server

    assert build_server(str(project_dir), plugin=True)._tool_manager.list_tools()
    shutil.copy(REPO / plugin.PLUGIN_RELPATH / ".mcp.json", project_dir / ".mcp.json")
    aside = build_server(str(project_dir), plugin=True)
    assert aside._tool_manager.list_tools() == []
    assert aside.instructions == STEPPED_ASIDE
    assert build_server(str(project_dir))._tool_manager.list_tools()  # not as the plugin's
