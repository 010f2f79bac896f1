"""The user-only authority model, proven through a real pseudo-terminal.

Each test spawns the installed ``ithaca`` console script with the pty as its terminal,
waits (bounded, with ``select``) for the confirmation prompt, and types an answer.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ithaca import open_project
from ithaca.app import IthacaProject
from ithaca.hosts import dispatch
from ithaca.kernel import clock, journal
from ithaca.protocols import approvals

ITHACA = Path(sys.executable).parent / "ithaca"
WAIT_SECONDS = 60
CREATE = (
    "protocols",
    "create",
    "--id",
    "team.pty",
    "--name",
    "Typed",
    "--description",
    "Created from a terminal.",
    "--priority",
    "5",
    "--selector",
    '{"workflow": "coding"}',
    "--rule",
    "Say what you changed.",
)


@pytest.fixture
def project(project_dir: Path) -> Iterator[IthacaProject]:
    opened = open_project(project_dir)
    yield opened
    opened.close()


def child_environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb", **extra}


class Terminal:
    """The ``ithaca`` CLI running on a pseudo-terminal."""

    def __init__(self, project_dir: Path, args: tuple[str, ...], env: dict[str, str]):
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [str(ITHACA), "--project", str(project_dir), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.output = ""
        self.deadline = time.monotonic() + WAIT_SECONDS

    def read_until(self, text: str) -> str:
        while text not in self.output:
            if not self._read_some():
                raise AssertionError(f"never saw {text!r}; output so far:\n{self.output}")
        return self.output

    def type(self, line: str) -> None:
        os.write(self.master, f"{line}\n".encode())

    def finish(self) -> tuple[int, str]:
        while self._read_some():
            pass
        code = self.process.wait(timeout=max(self.deadline - time.monotonic(), 1))
        os.close(self.master)
        return code, self.output

    def _read_some(self) -> bool:
        """Read what the child wrote next; false once it closed the terminal."""
        remaining = self.deadline - time.monotonic()
        ready, _, _ = select.select([self.master], [], [], max(remaining, 0))
        if not ready:
            self.process.kill()
            raise AssertionError(f"timed out; output so far:\n{self.output}")
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # EIO: the child closed its side of the terminal
            return False
        self.output += chunk.decode(errors="replace")
        return bool(chunk)


def journal_length(project: IthacaProject) -> int:
    return int(project.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0])


def test_create_with_the_typed_id_succeeds_and_is_journaled_as_the_user(
    project_dir: Path, project: IthacaProject
) -> None:
    terminal = Terminal(project_dir, CREATE, child_environment())
    terminal.read_until("type team.pty and press Enter: ")
    terminal.type("team.pty")
    code, output = terminal.finish()

    assert code == 0, output
    assert "Created team.pty" in output
    created = journal.query(project.store.connection(), kind="protocols.created")
    assert [(entry["actor"], entry["subject"]) for entry in created] == [("user", "team.pty")]
    assert project.protocols.get_protocol("team.pty")["rules"] == ["Say what you changed."]


def test_a_wrong_typed_id_is_a_confirmation_mismatch_and_changes_nothing(
    project_dir: Path, project: IthacaProject
) -> None:
    before = journal_length(project)

    terminal = Terminal(project_dir, CREATE, child_environment())
    terminal.read_until("type team.pty and press Enter: ")
    terminal.type("team.other")
    code, output = terminal.finish()

    assert code == 1
    assert "error USER_ONLY" in output
    assert "the confirmation did not match" in output
    assert journal_length(project) == before
    assert [p["id"] for p in project.protocols.list_protocols(scope="user")] == []


def test_an_agent_environment_is_refused_even_on_a_terminal(
    project_dir: Path, project: IthacaProject
) -> None:
    before = journal_length(project)

    terminal = Terminal(project_dir, CREATE, child_environment(CLAUDECODE="1"))
    code, output = terminal.finish()

    assert code == 1
    assert "error USER_ONLY" in output
    assert "coding agent's environment (CLAUDECODE)" in output
    assert "press Enter" not in output
    assert journal_length(project) == before


def test_without_a_terminal_the_command_is_refused_no_terminal(
    project_dir: Path, project: IthacaProject
) -> None:
    before = journal_length(project)

    result = subprocess.run(
        [str(ITHACA), "--project", str(project_dir), *CREATE],
        input="team.pty\n",
        capture_output=True,
        text=True,
        env=child_environment(),
        timeout=WAIT_SECONDS,
    )

    assert result.returncode == 1
    assert "error USER_ONLY" in result.stderr
    assert "no interactive terminal" in result.stderr
    assert journal_length(project) == before


def test_approve_shows_the_action_and_its_protocols_then_grants_on_the_typed_id(
    project_dir: Path, project: IthacaProject
) -> None:
    project.protocols.create_protocol(
        {
            "id": "team.deploys",
            "name": "Deploys need a person",
            "description": "Production deploys run only with the user's approval.",
            "priority": 100,
            "selector": {},
            "rules": ["Ask before deploying."],
            "constraints": [
                {
                    "kind": "require_approval",
                    "commands": ["make deploy"],
                    "reason": "Deploys reach production.",
                }
            ],
        }
    )
    event = project.protocols.admit_event(connector="test", host_session_id="sess-pty")
    with project.store.write() as conn:
        approval_id = approvals.request_id(conn, "sess-pty", "d" * 64, clock.now())
        approvals.request(
            conn,
            approval_id=approval_id,
            session_id="sess-pty",
            event_id=event["id"],
            action_digest="d" * 64,
            action={
                "tool": "Bash",
                "input": {"command": "make deploy ENV=prod"},
                "cwd": str(project_dir),
            },
            protocol_ids=["team.deploys"],
            now=clock.now(),
            ttl_seconds=900,
        )

    terminal = Terminal(project_dir, ("protocols", "approve", approval_id), child_environment())
    shown = terminal.read_until(f"type {approval_id} and press Enter: ")
    terminal.type(approval_id)
    code, output = terminal.finish()

    assert "make deploy ENV=prod" in shown
    assert "team.deploys" in shown
    assert "Deploys reach production." in shown
    assert code == 0, output
    assert project.protocols.get_approval(approval_id)["status"] == "granted"
    granted = journal.query(project.store.connection(), kind="protocols.approval_granted")
    assert [(entry["actor"], entry["subject"]) for entry in granted] == [("user", approval_id)]


def test_a_terminal_the_agent_made_is_refused_though_its_environment_is_clean(
    project_dir: Path, project: IthacaProject
) -> None:
    """The test's parent process plays the host: a SessionStart hook run from here records
    it. A terminal opened below it, as ``script`` or ``pty.spawn`` would, is the agent's."""
    dispatch.run(
        "claude",
        "SessionStart",
        json.dumps({"session_id": "s-pty", "cwd": str(project_dir)}),
    )
    before = journal_length(project)

    terminal = Terminal(project_dir, CREATE, child_environment())
    code, output = terminal.finish()

    assert code == 1
    assert "error USER_ONLY" in output and "the terminal descends from process" in output
    assert journal_length(project) == before
    assert [p["id"] for p in project.protocols.list_protocols(scope="user")] == []
