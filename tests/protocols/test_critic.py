"""The end-of-turn critic (``require_verification``) through the hook, as each host calls it.

A coding turn that changes the project ends only on a run Ithaca made itself of the
project as it is at Stop (``ithaca.verification``): the critic runs the tests at Stop when
no such run exists, holds the turn on a failing one, and ends it UNVERIFIED when the turn
lost tests it began with or changed the runner's configuration. What the agent ran or
printed counts for nothing. An honest ``UNVERIFIED:`` ending, a turn that changed
nothing and a project that switched the critic off all end; each verdict is journaled.

The project under test is a real unittest project (``calc.py`` and its tests); the runs
are real, in the validator sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.calc_project import BROKEN, CALC, ONE_TEST, TESTS, lay_calc

from ithaca.app import open_project
from ithaca.hosts import dispatch
from ithaca.kernel import deadline, journal

SKIPPED = TESTS.replace("    def test_zero", "    @unittest.skip('later')\n    def test_zero")


class Turn:
    """One host session's coding turn in a project, through the in-process hook."""

    def __init__(self, root: Path, hook: Any, host: str = "claude", session: str = "s1"):
        self.root, self.hook, self.host, self.session = root, hook, host, session

    def begin(self, prompt: str = "::workflow coding\nFix the calculator.") -> None:
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

    def shell(self, command: str) -> None:
        """A shell command the agent ran and its host reported as passed."""
        given = {"command": command}
        self.call("PreToolUse", tool_name="Bash", tool_input=given)
        response: Any = {"stdout": "OK", "stderr": "", "interrupted": False}
        self.call("PostToolUse", tool_name="Bash", tool_input=given, tool_response=response)

    def stop(self, said: str = "Done.") -> dict[str, Any]:
        return self.call("Stop", stop_hook_active=False, last_assistant_message=said)

    def events(self, kind: str) -> list[dict[str, Any]]:
        project = open_project(self.root)
        try:
            found = journal.query(project.store.connection(), kind=kind)
        finally:
            project.close()
        return [event["payload"] for event in found]

    def verdicts(self) -> list[dict[str, Any]]:
        return self.events("critic.verdict")

    def verify(self, **arguments: Any) -> dict[str, Any]:
        """The agent's ``verify`` MCP tool call, with the session the hook would fill."""
        project = open_project(self.root)
        try:
            return project.verification.tool({"session": self.session, **arguments})
        finally:
            project.close()


def blocked(answer: dict[str, Any]) -> str:
    assert answer.get("decision") == "block", answer
    return str(answer["reason"])


@pytest.fixture
def project(governed_dir: Path) -> Path:
    return lay_calc(governed_dir)


@pytest.fixture
def turn(project: Path, hook: Any) -> Turn:
    hook.configure("[verification]\nmax_blocks = 2\n")
    return Turn(project, hook)


def baseline(root: Path) -> dict[str, Any]:
    """The user's own ``ithaca verify`` before the turn."""
    opened = open_project(root)
    try:
        return opened.verification.verify()
    finally:
        opened.close()


def test_an_honest_turn_ends_verified_by_ithacas_own_run_with_no_extra_step(turn):
    turn.begin()
    turn.edit("calc.py", CALC + "\n# tidy\n")

    assert turn.stop() == {}

    (verdict,) = turn.verdicts()
    assert verdict["verdict"] == "verified" and verdict["counts"]["passed"] == 2
    (run,) = turn.events("verify.run")
    assert run["id"] == verdict["run"] and run["runner"] == "unittest"
    assert run["counts"] == {"collected": 2, "passed": 2, "failed": 0, "errors": 0, "skipped": 0}


def test_a_failing_run_holds_the_turn_whatever_the_agent_ran_and_a_fix_ends_it(turn):
    turn.begin()
    turn.edit("calc.py", BROKEN)
    turn.shell("python3 -m unittest")  # the host says it passed: it counts for nothing

    reason = blocked(turn.stop())

    assert "VERIFICATION_REQUIRED" in reason and "unittest failed" in reason
    assert "test_small" in reason  # the failure's own output
    assert "`verify` MCP tool" in reason and "UNVERIFIED:" in reason
    turn.edit("calc.py", CALC + "\n# fixed\n")
    assert turn.stop() == {}
    assert [v["verdict"] for v in turn.verdicts()] == ["blocked", "verified"]


def test_a_change_hidden_from_git_is_still_judged_by_content(turn):
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=turn.root, check=True, capture_output=True)

    git("add", "calc.py", "test_calc.py")
    git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "calc")
    turn.begin()
    turn.edit(".gitignore", "calc.py\n")
    git("update-index", "--assume-unchanged", "calc.py")
    (turn.root / "calc.py").write_text(BROKEN)

    assert "unittest failed" in blocked(turn.stop())


def test_a_file_put_back_by_hand_is_unchanged_by_content(turn):
    turn.begin()
    turn.edit("calc.py", BROKEN)
    (turn.root / "calc.py").write_text(CALC)

    assert turn.stop() == {}
    assert turn.verdicts()[-1]["verdict"] == "unchanged"
    assert turn.events("verify.run") == []


def test_a_run_of_the_same_content_is_reused_not_repeated(turn):
    turn.begin()
    turn.edit("calc.py", CALC + "\n# one\n")
    first = turn.verify()

    assert first["status"] == "passed" and first["verifies_turn"] and not first["reused"]
    assert turn.stop() == {}
    assert turn.verify()["reused"]
    assert len(turn.events("verify.run")) == 1


def test_a_turn_that_drops_a_test_it_began_with_ends_unverified_with_the_list(turn):
    baseline(turn.root)
    turn.begin()
    turn.edit("test_calc.py", ONE_TEST)

    answer = turn.stop()

    assert answer.get("decision") != "block"
    assert "UNVERIFIED" in answer["systemMessage"]
    assert "test_calc.AddTest.test_zero (no longer run)" in answer["systemMessage"]
    assert turn.verdicts()[-1]["verdict"] == "unverified"


def test_a_turn_that_skips_a_test_it_began_with_ends_unverified_with_the_list(turn):
    baseline(turn.root)
    turn.begin()
    turn.edit("test_calc.py", SKIPPED)

    said = turn.stop()["systemMessage"]

    assert "test_calc.AddTest.test_zero (skipped)" in said


def test_a_turn_that_changed_the_runners_configuration_ends_unverified_until_accepted(turn):
    turn.begin()
    turn.edit("sitecustomize.py", "import os\n")

    said = turn.stop()["systemMessage"]

    assert "configuration (sitecustomize.py)" in said and "accept-config" in said
    opened = open_project(turn.root)
    try:
        opened.verification.accept_config()  # the user's, at a terminal
    finally:
        opened.close()
    turn.begin("::workflow coding\nKeep it.")
    turn.edit("calc.py", CALC + "\n# two\n")
    assert turn.stop() == {}


def test_an_honest_unverified_ending_ends_at_once_without_a_run(turn):
    turn.begin()
    turn.edit("calc.py", BROKEN)

    answer = turn.stop("Files changed: calc.py\nUNVERIFIED: subtraction is on purpose")

    assert answer.get("decision") != "block"
    assert "subtraction is on purpose" in answer["systemMessage"]
    assert turn.verdicts()[-1] == {
        "event": turn.verdicts()[-1]["event"],
        "verdict": "unverified",
        "why": "subtraction is on purpose",
    }
    assert turn.events("verify.run") == []


def test_after_its_block_cap_the_critic_lets_the_turn_end_as_unverified(turn):
    turn.begin()
    turn.edit("calc.py", BROKEN)
    blocked(turn.stop())
    blocked(turn.stop())

    answer = turn.stop()

    assert answer.get("decision") != "block" and "UNVERIFIED" in answer["systemMessage"]
    assert [v["verdict"] for v in turn.verdicts()] == ["blocked", "blocked", "unverified"]
    assert len(turn.events("verify.run")) == 1  # the same content is not run again


def test_a_turn_that_only_read_ends(turn):
    turn.begin()
    turn.call("PreToolUse", tool_name="Read", tool_input={"file_path": str(turn.root / "x")})

    assert turn.stop() == {}
    assert turn.verdicts() == []


def test_a_subagents_change_counts_toward_its_parent_turn(turn):
    turn.begin()
    turn.edit("calc.py", BROKEN, agent_id="agent-1", agent_type="general-purpose")

    blocked(turn.stop())


def test_stop_never_starts_a_run_longer_than_the_hook_may_live(turn):
    turn.hook.configure("[verification]\nmax_blocks = 2\ntimeout_s = 600\n")
    (turn.root / "test_slow.py").write_text(
        "import time, unittest\n\n\nclass Slow(unittest.TestCase):\n"
        "    def test_slow(self):\n        time.sleep(int(open('delay').read()))\n"
    )
    (turn.root / "delay").write_text("30")
    opened = open_project(turn.root)
    try:
        opened.verification.verify()  # the suite takes 30 s
    finally:
        opened.close()
    turn.begin()
    turn.edit("delay", "0")

    deadline.start(20)  # as ``ithaca-hook claude Stop --timeout 20`` would
    try:
        reason = blocked(turn.stop())
    finally:
        deadline.clear()

    assert "longer than the Stop hook may run" in reason and "`verify` MCP tool" in reason
    assert len(turn.events("verify.run")) == 1
    assert turn.verify()["status"] == "passed"
    assert turn.stop() == {}


def test_a_project_that_switched_the_critic_off_ends_and_status_says_so(project, hook):
    from click.testing import CliRunner

    from ithaca.cli.entry import cli

    hook.configure("[verification]\nrequire = false\n")
    turn = Turn(project, hook)
    turn.begin()
    turn.edit("calc.py", BROKEN)

    assert turn.stop().get("decision") != "block"
    shown = CliRunner().invoke(cli, ["--project", str(project), "status"])
    assert "verification critic OFF" in shown.output


def test_without_a_runner_the_turn_ends_unverified_with_the_fix(governed_dir, hook):
    turn = Turn(governed_dir, hook)  # no tests, no runner's files
    turn.begin()
    turn.edit("notes.txt", "hello\n")

    answer = turn.stop()

    assert "[verification] runner" in answer["systemMessage"]
    assert turn.verdicts()[-1]["verdict"] == "unverified"


def test_on_codex_the_critic_runs_the_tests_the_same_way(project, hook):
    turn = Turn(project, hook, host="codex", session="01a23692-be4e-7680-a5a0-b8dd035dd63a")
    turn.begin()
    turn.edit("calc.py", BROKEN)

    assert "unittest failed" in blocked(turn.stop())
    turn.edit("calc.py", CALC + "\n# fixed\n")
    assert turn.stop().get("decision") != "block"
    assert turn.verdicts()[-1]["verdict"] == "verified"


def test_the_critic_stays_below_claude_codes_own_stop_cap(turn, monkeypatch):
    monkeypatch.setenv("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "2")  # the host overrides the 2nd
    turn.begin()
    turn.edit("calc.py", BROKEN)
    blocked(turn.stop())

    answer = turn.stop()

    assert answer.get("decision") != "block" and "UNVERIFIED" in answer["systemMessage"]
    assert [v["verdict"] for v in turn.verdicts()] == ["blocked", "unverified"]


PYPROJECT = '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'


def test_a_shared_file_counts_as_runner_configuration_only_in_the_runners_sections(
    governed_dir, hook
):
    """pyproject.toml configures pytest in ``[tool.pytest…]``: a dependency added elsewhere
    ends the turn verified, a change there ends it UNVERIFIED (and its run used the old)."""
    lay_calc(governed_dir)
    (governed_dir / "pyproject.toml").write_text(PYPROJECT)
    interpreter = Path(sys.executable).parent  # has pytest; the user's file names it
    user = Path(os.environ["ITHACA_HOME"]) / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(f'[validators]\npath = "{interpreter}:/usr/bin:/bin"\n')
    turn = Turn(governed_dir, hook)
    turn.begin()
    turn.edit(
        "pyproject.toml", PYPROJECT.replace('name = "calc"', 'name = "calc"\ndependencies = []')
    )

    assert turn.stop() == {}
    assert turn.verdicts()[-1]["verdict"] == "verified"
    turn.begin("::workflow coding\nAnd quieter.")
    deselect = PYPROJECT.replace('addopts = "-q"', 'addopts = "-q -k nothing_matches"')
    turn.edit("pyproject.toml", deselect)

    said = turn.stop()["systemMessage"]

    assert "configuration (pyproject.toml)" in said
    (run,) = [r for r in turn.events("verify.run") if r["status"] == "passed"][-1:]
    assert run["counts"]["passed"] == 2  # the run read the configuration the turn began with
