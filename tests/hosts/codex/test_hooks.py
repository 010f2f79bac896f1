"""Ithaca behind Codex's hooks, fed the JSON Codex sends (fixtures/codex/)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.accepted import accept
from tests.refusals import gate_reason

from ithaca import init_project, open_project
from ithaca.hosts import HOSTS, codex, dispatch
from ithaca.hosts.codex.installer import hook_command
from ithaca.kernel.classify import classify_call
from ithaca.kernel.gates import Opinion

FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex"
HOOK = str(Path(sys.executable).parent / "ithaca-hook")
SESSION = "019d036d-c7fa-72d2-b6fd-78878bfe34e4"


def payload(name: str, cwd: Path, **changes: Any) -> dict[str, Any]:
    text = (FIXTURES / f"{name}.json").read_text().replace("__CWD__", str(cwd))
    return {**json.loads(text), **changes}


def answer(event: str, body: dict[str, Any]) -> dict[str, Any]:
    out, code = dispatch.run("codex", event, json.dumps(body))
    assert code == 0
    return json.loads(out) if out else {}


def denial(body: dict[str, Any]) -> str:
    output = answer("PreToolUse", body)["hookSpecificOutput"]
    assert output["hookEventName"] == "PreToolUse"
    assert output["permissionDecision"] == "deny"
    return str(output["permissionDecisionReason"])


def test_codex_is_a_host_of_the_hook_command():
    assert HOSTS["codex"] == "ithaca.hosts.codex"
    done = subprocess.run([HOOK, "codex", "SessionEnd"], capture_output=True, text=True)
    assert done.returncode == 2  # Codex has no SessionEnd
    assert "codex" in subprocess.run([HOOK], capture_output=True, text=True).stderr


# --- PreToolUse -----------------------------------------------------------------------


def test_a_shell_write_under_the_state_folder_given_as_argv_is_denied(project_dir):
    reason = denial(payload("pre-tool-use-exec-command-argv", project_dir))
    assert ".ithaca/config.toml is under .ithaca/" in reason


def test_an_apply_patch_moving_a_file_into_the_state_folder_is_denied(project_dir):
    reason = denial(payload("pre-tool-use-apply-patch", project_dir))
    assert ".ithaca/knowledge/todo.md is under .ithaca/" in reason


def test_an_apply_patch_outside_the_state_folder_is_allowed_with_silence(project_dir):
    (project_dir / ".ithaca" / "config.toml").write_text("[protocols]\nstrict = false\n")
    accept(project_dir)
    body = payload("pre-tool-use-apply-patch", project_dir)
    patch = body["tool_input"]["command"]
    body["tool_input"]["command"] = patch.replace(".ithaca/knowledge/todo.md", "notes/done.md")
    assert dispatch.run("codex", "PreToolUse", json.dumps(body)) == ("", 0)


def test_a_read_only_shell_command_is_answered_with_silence(project_dir):
    out, code = dispatch.run(
        "codex", "PreToolUse", json.dumps(payload("pre-tool-use-bash", project_dir))
    )
    assert (out, code) == ("", 0)


def test_ithaca_mcp_calls_are_left_to_codex_with_a_ticket_for_the_server(project_dir):
    assert answer("PreToolUse", payload("pre-tool-use-mcp-ithaca", project_dir)) == {}
    conn = sqlite3.connect(project_dir / ".ithaca" / ".runtime" / "state.db")
    tickets = conn.execute("SELECT host, host_session_id, tool FROM mcp_call_tickets").fetchall()
    assert tickets == [("codex", SESSION, "ultragoal")]


def test_an_ask_becomes_a_denial_because_codex_cannot_ask():
    out, code = codex.render("PreToolUse", Opinion("ask", "CONFIRM", "Pushing needs a yes."))
    output = json.loads(out)["hookSpecificOutput"]
    assert code == 0
    assert output["permissionDecision"] == "deny"
    assert gate_reason(output["permissionDecisionReason"]).startswith("Pushing needs a yes.")
    assert "cannot ask" in output["permissionDecisionReason"]


def test_pre_tool_use_never_sends_what_codex_rejects():
    # Codex fails a hook (and runs the call) on ``allow`` without a rewrite, on ``ask``
    # and on a deny without a reason.
    assert codex.render("PreToolUse", Opinion("allow")) == ("", 0)
    output = json.loads(codex.render("PreToolUse", Opinion("deny"))[0])["hookSpecificOutput"]
    assert output["permissionDecisionReason"]


# --- prompts and sessions ----------------------------------------------------------------


def test_an_admitted_prompt_tells_the_agent_its_event_and_how_to_reach_the_tool(project_dir):
    output = answer("UserPromptSubmit", payload("user-prompt-submit", project_dir))
    context = output["hookSpecificOutput"]["additionalContext"]
    assert "call load_protocols with" in context
    assert 'call tool_search with {"query": "ithaca load_protocols"}' in context
    assert "mcp__ithaca namespace" in context and "ToolSearch" not in context
    assert "decision" not in output


def test_a_prompt_ithaca_cannot_admit_is_blocked_in_codex_words(project_dir):
    (project_dir / ".ithaca" / "config.toml").write_text("[protocols]\nstrict = 'maybe'\n")
    output = answer("UserPromptSubmit", payload("user-prompt-submit", project_dir))
    assert output["decision"] == "block"
    assert "INVALID_CONFIG" in output["reason"]
    assert "hookSpecificOutput" not in output


def test_session_start_exports_the_session_to_codex_env_file(project_dir, tmp_path):
    env_file = tmp_path / "codex.env"
    done = subprocess.run(
        [HOOK, "codex", "SessionStart"],
        input=json.dumps(payload("session-start", project_dir)),
        capture_output=True,
        text=True,
        env={**os.environ, "CODEX_ENV_FILE": str(env_file)},
    )
    assert done.returncode == 0
    assert env_file.read_text() == f"export ITHACA_SESSION_ID={SESSION}\n"


# --- Stop ---------------------------------------------------------------------------------


def test_an_allowed_stop_prints_an_empty_object_from_the_console_script(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    project, _ = init_project(root)
    project.close()
    done = subprocess.run(
        [HOOK, "codex", "Stop"],
        input=json.dumps(payload("stop", root)),
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "{}\n", "")


def test_stop_outside_a_project_is_allowed_the_same_way(tmp_path):
    assert dispatch.run("codex", "Stop", json.dumps(payload("stop", tmp_path))) == ("{}", 0)


@pytest.fixture
def pursuing(project_dir: Path) -> Path:
    """The Codex session's Ultragoal pursuit, planned, confirmed and pursuing."""
    project = open_project(project_dir)
    try:
        service = project.ultragoal

        def call(operation: str, **fields: Any) -> None:
            service.dispatch({"operation": operation, "session": SESSION, **fields})

        call("set", phase="planning", outcome="Parse trailing commas", verification_surface="ok")
        story = {
            "id": "A",
            "story": "Accept trailing commas in arrays",
            "acceptance_criteria": ["[1,2,] parses"],
            "verification_surface": "test_arrays passes",
        }
        call("set_stories", stories=[story])
        service.perform({"operation": "confirm_all_stories", "session": SESSION}, actor="user")
        (project_dir / "evidence.txt").write_text("ok\n")
        call("set", phase="pursuing", completion_evidence=["evidence.txt"])
    finally:
        project.close()
    return project_dir


def test_stop_while_pursuing_blocks_with_decision_and_reason(pursuing):
    output = answer("Stop", payload("stop", pursuing))
    assert set(output) == {"decision", "reason"}
    assert output["decision"] == "block"
    assert "[ULTRAGOAL 1/" in output["reason"]
    assert "Current story A: Accept trailing commas in arrays" in output["reason"]


def test_a_stop_that_yields_to_the_user_is_allowed_with_an_empty_object(pursuing):
    body = payload("stop", pursuing, last_assistant_message="Which file? <awaiting-user/>")
    assert dispatch.run("codex", "Stop", json.dumps(body)) == ("{}", 0)


# --- classification of Codex's tools -------------------------------------------------------


def codex_call(tool: str, tool_input: dict[str, Any], root: Path) -> Any:
    return classify_call("codex", tool, tool_input, str(root), project_root=str(root))


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Bash", {"command": "rm -rf .ithaca/knowledge"}),
        ("exec_command", {"cmd": "rm -rf .ithaca/knowledge"}),
        ("shell_command", {"command": "rm -rf .ithaca/knowledge"}),
        ("shell", {"command": ["rm", "-rf", ".ithaca/knowledge"]}),
        ("local_shell", {"command": ["bash", "-lc", "rm -rf .ithaca/knowledge"]}),
    ],
)
def test_every_codex_shell_tool_classifies_as_the_same_shell_line(tmp_path, tool, tool_input):
    call = codex_call(tool, tool_input, tmp_path)
    assert (call.tool_class, call.mutating, call.write_targets) == (
        "shell",
        True,
        (".ithaca/knowledge",),
    )
    assert [command.argv for command in call.commands] == [("rm", "-rf", ".ithaca/knowledge")]


def test_apply_patch_targets_are_read_from_every_file_line(tmp_path):
    patch = (
        "*** Begin Patch\n*** Add File: a.py\n+x\n*** Delete File: b.py\n"
        "*** Update File: c.py\n*** Move to: d/e.py\n@@\n-x\n+y\n*** End Patch\n"
    )
    expected = ("a.py", "b.py", "c.py", "d/e.py")
    for tool_input in ({"command": patch}, {"input": patch}, {"command": ["apply_patch", patch]}):
        call = codex_call("apply_patch", tool_input, tmp_path)
        assert (call.tool_class, call.mutating, call.write_targets) == ("edit", True, expected)
    heredoc = codex_call("Bash", {"command": f"apply_patch <<'EOF'\n{patch}EOF\n"}, tmp_path)
    assert heredoc.write_targets == expected
    argv = codex_call("shell", {"command": ["apply_patch", patch]}, tmp_path)
    assert argv.write_targets == expected


def test_codex_tools_that_only_read_are_not_mutating(tmp_path):
    for tool in ("view_image", "read_mcp_resource", "list_mcp_resources", "update_plan"):
        call = codex_call(tool, {"path": "x.png"}, tmp_path)
        assert (call.tool_class, call.mutating) == ("read", False)
    assert codex_call("spawn_agent", {"message": "go"}, tmp_path).tool_class == "delegate"
    assert codex_call("mcp__ithaca__ultragoal", {}, tmp_path).tool_class == "ithaca"


@pytest.mark.parametrize("fixture", ["pre-tool-use-exec-command-argv", "pre-tool-use-apply-patch"])
def test_a_codex_tool_call_loads_no_slow_standard_module(project_dir, fixture):
    done = subprocess.run(
        ["/bin/sh", "-c", hook_command("PreToolUse")],
        input=json.dumps(payload(fixture, project_dir)),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "imported package" not in line
    }
    assert "ithaca.hosts.codex" in imported
    assert imported.isdisjoint({"re", "json", "shlex", "enum", "importlib"}), sorted(imported)
