"""``ithaca session …`` through click: the same service, the same codes, and the user's
operations refused without a terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ithaca.cli.commands.session import group


@pytest.fixture
def task(define_task: Any) -> str:
    return str(define_task(("true",)))


def ithaca_session(project_dir: Path, *args: str, **env: str) -> Result:
    return CliRunner().invoke(group, list(args), obj={"project_path": str(project_dir)}, env=env)


def error_of(result: Result) -> dict[str, Any]:
    """The JSON error on standard error (after any generated-key notice)."""
    found: dict[str, Any] = json.loads(result.stderr.splitlines()[-1])["error"]
    return found


def answer(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_admission_acquire_heartbeat_and_close(project_dir, task):
    verdict = answer(ithaca_session(project_dir, "admission", task, "--no-worktree", "--json"))
    assert verdict["verdict"] == "spawn"
    acquired = answer(
        ithaca_session(
            project_dir,
            "acquire",
            task,
            "--strategy",
            "spawn",
            "--no-worktree",
            "--json",
            ITHACA_SESSION_ID="host-a",
        )
    )
    sid = acquired["session"]["id"]
    assert acquired["session"]["host_session_id"] == "host-a"
    beat = answer(ithaca_session(project_dir, "heartbeat", "--json", ITHACA_DELIVERY_SESSION=sid))
    assert beat["session"]["id"] == sid
    closed = answer(ithaca_session(project_dir, "close", sid, "--reason", "failed", "--json"))
    assert closed["session"]["status"] == "failed"
    assert closed["circuit"]["consecutive_failures"] == 1


def test_acquire_shows_the_variables_to_export(project_dir, task):
    result = ithaca_session(project_dir, "acquire", task, "--strategy", "spawn", "--no-worktree")
    assert result.exit_code == 0, result.output
    assert "export ITHACA_DELIVERY_SESSION=ses_" in result.stdout
    assert "idempotency key: cli-" in result.stderr


def test_a_refusal_carries_its_code(project_dir, task):
    ithaca_session(project_dir, "acquire", task, "--strategy", "spawn", "--no-worktree")
    result = ithaca_session(
        project_dir, "acquire", task, "--strategy", "spawn", "--no-worktree", "--json"
    )
    assert result.exit_code == 1
    assert error_of(result)["code"] == "ADMISSION_MISMATCH"


@pytest.mark.parametrize(
    "args",
    [
        ("acquire", "T-1", "--strategy", "takeover", "--force"),
        ("reset-circuit", "T-1"),
    ],
)
def test_the_users_operations_need_a_terminal(project_dir, task, args):
    result = ithaca_session(project_dir, *args, "--json")
    assert result.exit_code == 1
    error = error_of(result)
    assert error["code"] == "USER_ONLY" and error["details"]["reason"] == "no_terminal"


def test_heartbeat_needs_a_session(project_dir, task):
    result = ithaca_session(project_dir, "heartbeat")
    assert result.exit_code == 2
    assert "ITHACA_DELIVERY_SESSION" in result.output
