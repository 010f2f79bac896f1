"""The Ulysses gate through the real hook entry point (reference §5, §8 Hooks).

The gate reads the kernel's gate record, which the Ulysses service writes; these tests
write that record directly so that each phase can be set up in one line. Protocols
enforcement is switched off (``strict = false``) so that only the Ulysses opinion and
the kernel guard speak.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.accepted import accept
from tests.refusals import gate_reason

from ithaca.hosts import dispatch

HOOK = str(Path(sys.executable).parent / "ithaca-hook")
PHASES = ("IDLE", "PRIMARY", "RECOVERY", "REFLECT")


@pytest.fixture
def repo(project_dir: Path) -> Path:
    (project_dir / ".ithaca" / "config.toml").write_text("[protocols]\nstrict = false\n")
    accept(project_dir)
    return project_dir


def set_phase(root: Path, phase: str | None) -> None:
    with sqlite3.connect(root / ".ithaca" / ".runtime" / "state.db") as conn:
        conn.execute("DELETE FROM gate_state WHERE part = 'ulysses'")
        if phase is not None:
            conn.execute(
                "INSERT INTO gate_state (part, scope_key, state_json, updated_seq)"
                " VALUES ('ulysses', 'project', ?, 1)",
                (json.dumps({"session_id": "uly_TEST", "phase": phase}),),
            )
    conn.close()


def configure(root: Path, text: str) -> None:
    (root / ".ithaca" / "config.toml").write_text("[protocols]\nstrict = false\n" + text)
    accept(root)


def pre_tool_use(root: Path, tool: str, tool_input: dict[str, Any], **extra: str) -> dict[str, Any]:
    payload = {
        "session_id": "sess-1",
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        **extra,
    }
    out, code = dispatch.run("claude", "PreToolUse", json.dumps(payload))
    assert code == 0
    return json.loads(out) if out else {}


def decision(answer: dict[str, Any]) -> tuple[str, str]:
    specific = answer.get("hookSpecificOutput", {})
    reason = specific.get("permissionDecisionReason")
    return specific.get("permissionDecision", "allow"), gate_reason(reason) if reason else ""


MUTATING_CALLS = [
    ("Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"}),
    ("Write", {"file_path": "a.py", "content": "x"}),
    ("MultiEdit", {"file_path": "a.py", "edits": []}),
    ("NotebookEdit", {"notebook_path": "n.ipynb", "new_source": "x"}),
    ("apply_patch", {"input": "*** Begin Patch\n*** Add File: b.py\n+x\n*** End Patch"}),
    ("Bash", {"command": "rm -f a.py"}),
    ("Bash", {"command": "echo hi > notes.txt"}),
    ("Bash", {"command": "ls | tee out.txt"}),
    ("Bash", {"command": "sed -i s/a/b/ a.py"}),
    ("Bash", {"command": "find . -name '*.pyc' -delete"}),
    ("Bash", {"command": "git -c core.editor=vi status"}),
    ("Bash", {"command": "echo $(touch x)"}),
    ("Bash", {"command": "pytest --snapshot-update"}),
    ("Bash", {"command": "UPDATE_GOLDEN=1 pytest"}),
    ("Bash", {"command": 'python -c \'open("x","w")\''}),
]
READ_ONLY_CALLS = [
    ("Read", {"file_path": "a.py"}),
    ("Grep", {"pattern": "x"}),
    ("Glob", {"pattern": "*.py"}),
    ("WebFetch", {"url": "https://example.com", "prompt": "x"}),
    ("Task", {"description": "look", "prompt": "find the bug"}),
    ("mcp__other__tool", {"x": 1}),
    ("Bash", {"command": "git status && git diff HEAD~1 -- src"}),
    ("Bash", {"command": "grep -rn TODO src | sort | uniq -c"}),
    ("Bash", {"command": "sed -n '1,20p' a.py"}),
    ("Bash", {"command": "pytest -x tests 2>&1 | tail -5"}),
    ("Bash", {"command": "python -m pytest -q > /dev/null"}),
    ("Bash", {"command": "find . -name '*.py' -newer a.py"}),
    ("Bash", {"command": "ithaca ulysses status"}),
    ("mcp__ithaca__ulysses", {"operation": "reflect", "hypothesis": "h", "falsification": "f"}),
]


@pytest.mark.parametrize(("tool", "tool_input"), MUTATING_CALLS)
def test_reflect_denies_every_mutating_call(repo, tool, tool_input):
    set_phase(repo, "REFLECT")
    effect, reason = decision(pre_tool_use(repo, tool, tool_input))
    assert effect == "deny"
    assert reason.startswith("Ulysses: reflection required (S=2, no active step).")


@pytest.mark.parametrize(("tool", "tool_input"), READ_ONLY_CALLS)
def test_reflect_lets_inspection_and_the_protocol_through(repo, tool, tool_input):
    set_phase(repo, "REFLECT")
    assert decision(pre_tool_use(repo, tool, tool_input))[0] == "allow"


def test_idle_requires_a_plan_before_mutation_by_default(repo):
    set_phase(repo, "IDLE")
    effect, reason = decision(pre_tool_use(repo, "Edit", {"file_path": "a.py"}))
    assert (effect, reason) == (
        "deny",
        "Ulysses: record a plan (primary, recovery, validators) before changing anything.",
    )
    configure(repo, "[ulysses]\nrequire_plan_for_mutation = false\n")
    assert decision(pre_tool_use(repo, "Edit", {"file_path": "a.py"}))[0] == "allow"


@pytest.mark.parametrize("phase", ["PRIMARY", "RECOVERY", None])
def test_an_active_step_or_no_session_leaves_mutation_alone(repo, phase):
    set_phase(repo, phase)
    for tool, tool_input in MUTATING_CALLS:
        assert decision(pre_tool_use(repo, tool, tool_input))[0] == "allow", tool_input


def test_tests_count_as_read_only_unless_the_project_says_otherwise(repo):
    set_phase(repo, "REFLECT")
    assert decision(pre_tool_use(repo, "Bash", {"command": "pytest -q"}))[0] == "allow"
    configure(repo, "[ulysses]\ntests_are_read_only = false\n")
    assert decision(pre_tool_use(repo, "Bash", {"command": "pytest -q"}))[0] == "deny"


def test_listed_tools_are_mutating_and_listed_commands_are_not(repo):
    set_phase(repo, "REFLECT")
    assert decision(pre_tool_use(repo, "mcp__db__migrate", {}))[0] == "allow"
    assert decision(pre_tool_use(repo, "Bash", {"command": "mytool --dry"}))[0] == "deny"
    configure(
        repo,
        '[ulysses]\nmutating_tools = ["mcp__db__migrate"]\nread_only_commands = ["mytool"]\n',
    )
    assert decision(pre_tool_use(repo, "mcp__db__migrate", {}))[0] == "deny"
    assert decision(pre_tool_use(repo, "Bash", {"command": "mytool --dry"}))[0] == "allow"


SUBAGENT = {"agent_id": "agent-7", "agent_type": "debugger"}


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("mcp__ithaca__ulysses", {"operation": "plan", "primary": "p", "recovery": "r"}),
        ("Bash", {"command": "ithaca ulysses plan --primary p"}),
        ("Bash", {"command": "ithaca --project . ulysses outcome --observed '{}'"}),
    ],
)
def test_a_subagent_cannot_drive_the_protocol(repo, tool, tool_input):
    set_phase(repo, "IDLE")
    effect, reason = decision(pre_tool_use(repo, tool, tool_input, **SUBAGENT))
    assert effect == "deny"
    assert "only the coordinating agent" in reason
    assert decision(pre_tool_use(repo, tool, tool_input))[0] == "allow"


def test_a_subagent_may_read_the_state_and_listed_agent_types_coordinate(repo):
    set_phase(repo, "IDLE")
    status = ("mcp__ithaca__ulysses", {"operation": "status"})
    assert decision(pre_tool_use(repo, *status, **SUBAGENT))[0] == "allow"
    resume = ("Bash", {"command": "ithaca ulysses resume"})
    assert decision(pre_tool_use(repo, *resume, **SUBAGENT))[0] == "allow"
    plan = ("mcp__ithaca__ulysses", {"operation": "plan"})
    configure(repo, '[ulysses]\ncoordinator_agent_types = ["debugger"]\n')
    assert decision(pre_tool_use(repo, *plan, **SUBAGENT))[0] == "allow"


def test_an_unreadable_gate_record_denies_mutation_only(repo):
    with sqlite3.connect(repo / ".ithaca" / ".runtime" / "state.db") as conn:
        conn.execute(
            "INSERT INTO gate_state VALUES ('ulysses', 'project', '{\"phase\": \"LOST\"}', 1)"
        )
    conn.close()
    effect, reason = decision(pre_tool_use(repo, "Write", {"file_path": "a.py", "content": ""}))
    assert effect == "deny"
    assert "`ithaca doctor`" in reason
    assert decision(pre_tool_use(repo, "Read", {"file_path": "a.py"}))[0] == "allow"


def test_a_corrupt_database_denies_mutation_only(repo):
    (repo / ".ithaca" / ".runtime" / "state.db").write_bytes(b"not a database" * 100)
    assert decision(pre_tool_use(repo, "Edit", {"file_path": "a.py"}))[0] == "deny"
    assert decision(pre_tool_use(repo, "Read", {"file_path": "a.py"}))[0] == "allow"


def test_session_start_names_the_active_session_and_its_next_step(repo):
    payload = json.dumps({"session_id": "sess-1", "cwd": str(repo), "source": "compact"})
    assert dispatch.run("claude", "SessionStart", payload) == ("", 0)
    set_phase(repo, "RECOVERY")
    out, _ = dispatch.run("claude", "SessionStart", payload)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "Ulysses session uly_TEST is active (phase RECOVERY, S=2; next: outcome)" in context
    assert "resume" in context


def test_the_installed_entry_point_answers_with_the_same_deny(repo):
    set_phase(repo, "REFLECT")
    payload = {"session_id": "s", "cwd": str(repo), "tool_name": "Bash"}
    done = subprocess.run(
        [HOOK, "claude", "PreToolUse"],
        input=json.dumps({**payload, "tool_input": {"command": "touch x"}}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_gate_imports_only_the_standard_library_and_the_kernel():
    probe = (
        "import sys, ithaca.ulysses.gate\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('ithaca')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    outside = {
        name
        for name in loaded
        if not name.startswith("ithaca.kernel")
        and name not in ("ithaca", "ithaca.ulysses", "ithaca.ulysses.gate")
    }
    assert not outside, sorted(outside)
