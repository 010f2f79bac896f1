"""The end-of-turn critic (``require_verification``) through the hook, as each host calls it.

A coding turn that changes the project is held at Stop until a verification command
passed after its last change; an honest ``UNVERIFIED:`` ending, a turn that changed
nothing and a project that switched the critic off all end; each verdict is journaled.
On Codex, whose hooks see no exit status, Ithaca runs the verification itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import open_project
from ithaca.hosts import dispatch
from ithaca.kernel import journal

VERIFY = "python3 -m pytest"
# A verification whose outcome is decided by a file the test writes.
CHECK = "python3 -c \"import sys; sys.exit(open('ok.txt').read() != 'yes')\""


class Turn:
    """One host session's coding turn in a project, through the in-process hook."""

    def __init__(self, root: Path, hook: Any, host: str = "claude", session: str = "s1"):
        self.root, self.hook, self.host, self.session = root, hook, host, session

    def begin(self, prompt: str = "::workflow coding\nFix the parser.") -> None:
        event_id = self.hook.admit(prompt, self.session) if self.host == "claude" else None
        if event_id is None:
            answer = self.call("UserPromptSubmit", prompt=prompt)
            event_id = self.hook.event_id_of(answer)
        project = open_project(self.root)
        project.protocols.load_protocols({"eventId": event_id})
        project.close()

    def call(self, event: str, **fields: Any) -> dict[str, Any]:
        payload = {"session_id": self.session, "cwd": str(self.root), "hook_event_name": event}
        if self.host == "codex":
            payload["turn_id"] = "t-1"
        out, code = dispatch.run(self.host, event, json.dumps({**payload, **fields}))
        assert code == 0, out
        return json.loads(out) if out.strip() else {}

    def edit(self, name: str, text: str, **fields: Any) -> None:
        """The agent's Write, allowed by the hook and then done."""
        answer = self.call(
            "PreToolUse",
            tool_name="Write",
            tool_input={"file_path": str(self.root / name), "content": text},
            **fields,
        )
        assert answer.get("hookSpecificOutput", {}).get("permissionDecision") != "deny", answer
        (self.root / name).write_text(text)

    def shell(self, command: str, *, passed: bool) -> None:
        """A shell command the agent ran; Claude Code reports PostToolUse only for exit 0."""
        given = {"command": command}
        self.call("PreToolUse", tool_name="Bash", tool_input=given)
        if passed or self.host == "codex":
            response: Any = {"stdout": "", "stderr": "", "interrupted": False}
            self.call("PostToolUse", tool_name="Bash", tool_input=given, tool_response=response)

    def stop(self, said: str = "Done.") -> dict[str, Any]:
        return self.call("Stop", stop_hook_active=False, last_assistant_message=said)

    def verdicts(self) -> list[dict[str, Any]]:
        project = open_project(self.root)
        try:
            found = journal.query(project.store.connection(), kind="critic.verdict")
        finally:
            project.close()
        return [event["payload"] for event in found]


def blocked(answer: dict[str, Any]) -> str:
    assert answer.get("decision") == "block", answer
    return str(answer["reason"])


@pytest.fixture
def turn(governed_dir: Path, hook: Any) -> Turn:
    hook.configure(f'[verification]\ncommands = ["{VERIFY}"]\nmax_blocks = 2\n')
    return Turn(governed_dir, hook)


def test_a_turn_that_changed_the_project_and_never_verified_is_held_at_stop(turn):
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")

    reason = blocked(turn.stop())

    assert "VERIFICATION_REQUIRED" in reason and f"Run `{VERIFY}`" in reason
    assert "UNVERIFIED:" in reason
    assert turn.verdicts()[-1]["verdict"] == "blocked"


def test_a_verification_that_passed_after_the_last_change_lets_the_turn_end(turn):
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")
    turn.shell(f"{VERIFY} -q tests/", passed=True)

    assert turn.stop() == {}
    assert turn.verdicts()[-1] == {
        "event": turn.verdicts()[-1]["event"],
        "verdict": "verified",
        "command": VERIFY,
    }


def test_a_failed_verification_or_a_change_after_a_passing_one_holds_the_turn(turn):
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")
    turn.shell(VERIFY, passed=False)
    blocked(turn.stop())
    turn.shell(VERIFY, passed=True)
    turn.edit("parser.py", "def parse(): return 1\n")

    assert "VERIFICATION_REQUIRED" in blocked(turn.stop())


def test_a_shell_command_that_is_not_the_verification_proves_nothing(turn):
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")
    turn.shell("echo python3 -m pytest passed", passed=True)

    blocked(turn.stop())


def test_an_honest_unverified_ending_is_allowed_and_shown_to_the_user_as_unverified(turn):
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")

    answer = turn.stop("Files changed: parser.py\nUNVERIFIED: the parser has no tests yet")

    assert answer.get("decision") != "block"
    assert "UNVERIFIED" in answer["systemMessage"] and "no tests yet" in answer["systemMessage"]
    assert turn.verdicts()[-1]["verdict"] == "unverified"
    assert turn.verdicts()[-1]["why"] == "the parser has no tests yet"


def test_after_its_block_cap_the_critic_lets_the_turn_end_as_unverified(turn):
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")
    blocked(turn.stop())
    blocked(turn.stop())

    answer = turn.stop()

    assert answer.get("decision") != "block" and "UNVERIFIED" in answer["systemMessage"]
    assert [v["verdict"] for v in turn.verdicts()] == ["blocked", "blocked", "unverified"]


def test_a_turn_that_only_read_ends(turn):
    turn.begin()
    turn.call("PreToolUse", tool_name="Read", tool_input={"file_path": str(turn.root / "x")})

    assert turn.stop() == {}
    assert turn.verdicts() == []


def test_a_turn_whose_allowed_edit_changed_no_file_ends_as_unchanged(turn):
    turn.begin()
    allowed = turn.call(
        "PreToolUse",
        tool_name="Write",
        tool_input={"file_path": str(turn.root / "never.txt"), "content": "x"},
    )
    assert allowed.get("hookSpecificOutput", {}).get("permissionDecision") != "deny"

    assert turn.stop().get("decision") != "block"  # the host never ran the write
    assert turn.verdicts()[-1]["verdict"] == "unchanged"


def test_a_file_put_back_by_hand_is_still_a_change(turn):
    kept = turn.root / "keep.txt"
    kept.write_text("before\n")
    before = kept.stat()
    turn.begin()
    turn.edit("keep.txt", "after\n")
    kept.write_text("before\n")
    os.utime(kept, ns=(before.st_atime_ns, before.st_mtime_ns))  # the change time moved

    blocked(turn.stop())


def test_a_verification_in_a_pipeline_or_list_or_that_runs_nothing_proves_nothing(turn):
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")
    for line in (
        f"{VERIFY} -q 2>&1 | tail -5",
        f"{VERIFY} || true",
        f"{VERIFY}; echo done",
        f"{VERIFY} --help",
        f"{VERIFY} --collect-only",
        f"{VERIFY} &",
    ):
        turn.shell(line, passed=True)
        assert "VERIFICATION_REQUIRED" in blocked(turn.stop()), line
        turn.begin("::workflow coding\nGo on.")
        turn.edit("parser.py", f"# {line}\n")


def test_a_subagents_change_counts_toward_its_parent_turn(turn):
    turn.begin()
    turn.edit("sub.txt", "from the worker\n", agent_id="agent-1", agent_type="general-purpose")

    blocked(turn.stop())


def test_a_project_that_switched_the_critic_off_ends_and_status_says_so(governed_dir, hook):
    from click.testing import CliRunner

    from ithaca.cli.entry import cli

    hook.configure("[verification]\nrequire = false\n")
    turn = Turn(governed_dir, hook)
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")

    assert turn.stop().get("decision") != "block"
    shown = CliRunner().invoke(cli, ["--project", str(governed_dir), "status"])
    assert "verification critic OFF" in shown.output


def test_without_a_known_command_the_turn_ends_unverified_with_the_fix(governed_dir, hook):
    turn = Turn(governed_dir, hook)  # no pyproject.toml, package.json, ...: no default
    turn.begin()
    turn.edit("notes.txt", "hello\n")

    answer = turn.stop()

    assert "[verification] commands" in answer["systemMessage"]
    assert turn.verdicts()[-1]["verdict"] == "unverified"


def test_on_codex_ithaca_runs_the_verification_itself_in_the_sandbox(governed_dir, hook):
    hook.configure(f"[verification]\ncommands = [{json.dumps(CHECK)}]\n")
    turn = Turn(governed_dir, hook, host="codex", session="01a23692-be4e-7680-a5a0-b8dd035dd63a")
    turn.begin()
    turn.edit("ok.txt", "no")
    turn.shell(CHECK, passed=True)  # Codex reports the output, not whether it passed

    reason = blocked(turn.stop())

    assert f"Ithaca ran `{CHECK}` itself and it failed" in reason
    turn.edit("ok.txt", "yes")
    assert turn.stop().get("decision") != "block"
    assert turn.verdicts()[-1]["verdict"] == "verified"
    assert turn.verdicts()[-1]["measured"] == "ithaca"


def test_the_default_verification_is_the_projects_test_runner(tmp_path):
    from ithaca.protocols.verification import commands

    assert commands(str(tmp_path), []) == []
    (tmp_path / "package.json").write_text("{}")
    assert commands(str(tmp_path), [])[0] == "npm test"
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert commands(str(tmp_path), [])[0] == "python -m pytest"
    assert commands(str(tmp_path), ["tox -e py"]) == ["tox -e py"]
    assert commands(str(tmp_path), ["tox -e py"], ["make check"]) == ["make check"]


def test_a_verification_whose_quoted_code_holds_a_semicolon_counts(governed_dir, hook):
    hook.configure(f"[verification]\ncommands = [{json.dumps(CHECK)}]\n")
    turn = Turn(governed_dir, hook)
    turn.begin()
    turn.edit("ok.txt", "yes")
    turn.shell(CHECK, passed=True)

    assert turn.stop().get("decision") != "block"


def test_the_critic_stays_below_claude_codes_own_stop_cap(turn, monkeypatch):
    monkeypatch.setenv("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "2")  # the host overrides the 2nd
    turn.begin()
    turn.edit("parser.py", "def parse(): ...\n")
    blocked(turn.stop())

    answer = turn.stop()

    assert answer.get("decision") != "block" and "UNVERIFIED" in answer["systemMessage"]
    assert [v["verdict"] for v in turn.verdicts()] == ["blocked", "unverified"]
