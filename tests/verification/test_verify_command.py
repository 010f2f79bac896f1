"""``ithaca verify`` in a terminal: Ithaca runs the project's tests itself, says what it
counted, journals the run, shows it in ``log`` and ``status``, and reuses it while the
project's content is unchanged.

The project is a real unittest project; the runs are real, in the validator sandbox.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.calc_project import CALC, lay_calc
from tests.command_line import ITHACA, ithaca


def code_of(done: subprocess.CompletedProcess[str]) -> str:
    """The code of the error ``--json`` printed."""
    return str(json.loads(done.stderr)["error"]["code"])


@pytest.fixture
def calc(project_dir: Path) -> Path:
    return lay_calc(project_dir)


def test_verify_runs_the_tests_counts_them_and_reuses_the_run_of_the_same_content(calc):
    first = ithaca(calc, "verify")

    assert first.returncode == 0, first.stdout + first.stderr
    assert "passed: unittest — 2 passed, 0 failed, 0 errors, 0 skipped of 2" in first.stdout
    again = json.loads(ithaca(calc, "verify", "--json").stdout)
    assert again["reused"] and again["status"] == "passed"
    (calc / "calc.py").write_text(CALC.replace("+", "-"))
    failed = subprocess.run(  # its output holds the failing test's own traceback
        [ITHACA, "verify"], cwd=calc, capture_output=True, text=True, check=False
    )
    assert failed.returncode == 1 and "failed: unittest — 1 passed, 1 failed" in failed.stdout
    assert "test_small" in failed.stdout  # the failure's own output

    log = ithaca(calc, "log").stdout
    assert log.count("verify.run") == 2
    assert "unittest passed: 2 passed, 0 failed, 0 errors, 0 skipped of 2" in log
    status = ithaca(calc, "status").stdout
    assert "verify     unittest (`python3 -m unittest`)" in status
    assert "last run: unittest failed" in status


def test_verify_from_a_coding_agents_shell_is_refused_and_records_nothing(calc):
    refused = ithaca(calc, "verify", "--json", env_extra={"CLAUDECODE": "1"})

    assert refused.returncode != 0
    assert code_of(refused) == "VERIFY_FROM_AGENT_SHELL"
    assert "verify.run" not in ithaca(calc, "log").stdout


def test_accepting_the_runners_configuration_is_the_users(calc):
    refused = ithaca(calc, "verify", "accept-config", "--json", env_extra={"CLAUDECODE": "1"})

    assert code_of(refused) == "USER_ONLY"
    assert "config_accepted" not in ithaca(calc, "log").stdout


def test_a_project_without_a_runner_is_told_how_to_name_one(project_dir):
    answer = ithaca(project_dir, "verify", "--json")

    assert code_of(answer) == "VERIFY_NO_RUNNER"
    assert "[verification] runner" in ithaca(project_dir, "status").stdout
