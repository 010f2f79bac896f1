"""``ithaca run-plan`` as a real process: a live status line on a terminal, and a clean
stop on SIGINT (Ctrl-C) or SIGTERM: every worker's whole process group stopped (TERM,
then KILL after a short grace), the run recorded as interrupted, the command that resumes
it printed, and a re-run resuming it."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from tests.delivery.run_plan.conftest import *  # noqa: F403  (fixtures are found by name)
from tests.delivery.run_plan.conftest import configure, db

from ithaca.cli.commands.run_plan import command as run_plan_command
from ithaca.delivery.units import owners as processes

ITHACA = str(Path(sys.executable).parent / "ithaca")
WAIT_S = 60


def start(project_dir: Path) -> subprocess.Popen[str]:
    """``ithaca run-plan add-login`` in the project, in a process group of its own (as a
    shell runs a foreground job)."""
    return subprocess.Popen(
        [ITHACA, "run-plan", "add-login"],
        cwd=project_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def workers_started(reports: Path, tasks: list[str]) -> dict[str, tuple[int, int]]:
    """Wait (bounded) until each task's worker has started its child: task → (worker pid,
    child pid)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        files = [reports / f"{task}.pids" for task in tasks]
        if all(path.exists() and path.read_text().count(" ") == 1 for path in files):
            found = {}
            for task, path in zip(tasks, files, strict=True):
                worker, child = path.read_text().split()
                found[task] = (int(worker), int(child))
            return found
        time.sleep(0.05)
    raise AssertionError(f"the workers of {tasks} did not start")


def assert_recorded_interrupted(project: Any, signal_name: str) -> None:
    with db(project) as conn:
        run = conn.execute("SELECT status, pause_reason FROM delivery_plan_runs").fetchall()
        event = conn.execute(
            "SELECT payload FROM journal WHERE kind = 'delivery.plan_interrupted'"
        ).fetchall()
        sessions = {row[0] for row in conn.execute("SELECT status FROM delivery_sessions")}
        tasks = dict(conn.execute("SELECT id, status FROM delivery_tasks"))
        run_tasks = dict(
            conn.execute("SELECT task_id, reason FROM delivery_plan_run_tasks WHERE wave = 1")
        )
        failures = conn.execute("SELECT count(*) FROM delivery_circuits").fetchone()[0]
    assert run == [("paused", "INTERRUPTED")]
    assert len(event) == 1
    payload = json.loads(event[0][0])
    assert payload["signal"] == signal_name
    assert payload["stopped"] == ["T-1", "T-2"]
    assert payload["resume"] == "ithaca run-plan add-login"
    assert sessions == {"abandoned"}  # the user stopped them: no failure counted
    assert failures == 0
    assert tasks == {"T-1": "pending", "T-2": "pending", "T-3": "pending"}
    assert run_tasks == {"T-1": "INTERRUPTED", "T-2": "INTERRUPTED"}


def test_ctrl_c_stops_every_worker_group_and_records_the_run_as_interrupted(
    project, project_dir, change, settings, reports
):
    configure(project, settings("sleepy"))
    runner = start(project_dir)
    started = workers_started(reports, ["T-1", "T-2"])

    os.killpg(runner.pid, signal.SIGINT)  # what Ctrl-C sends the foreground job
    out, err = runner.communicate(timeout=WAIT_S)

    assert runner.returncode == 130, err
    for worker, child in started.values():
        assert not processes.group_is_alive(worker)
        assert not processes.is_alive(child, None)
    assert "SIGINT: stopping the workers of T-1, T-2" in err
    assert "Traceback" not in out + err
    assert "interrupted by SIGINT: the workers of T-1, T-2 were stopped" in out
    assert out.rstrip().endswith("resume with: ithaca run-plan add-login")
    assert_recorded_interrupted(project, "SIGINT")

    configure(project, settings("work"))
    resumed = CliRunner().invoke(
        run_plan_command, ["add-login", "--json"], obj={"project_path": str(project_dir)}
    )
    assert resumed.exit_code == 0, resumed.output
    answer = json.loads(resumed.stdout)
    assert (answer["run"]["how"], answer["status"]) == ("resumed", "completed")


def test_sigterm_kills_workers_that_ignore_it_after_the_grace(
    project, project_dir, change, settings, reports
):
    configure(project, settings("deaf-sleepy"))
    runner = start(project_dir)
    started = workers_started(reports, ["T-1", "T-2"])

    runner.send_signal(signal.SIGTERM)  # as `kill PID` does
    out, err = runner.communicate(timeout=WAIT_S)

    assert runner.returncode == 128 + signal.SIGTERM, err
    for worker, child in started.values():
        assert not processes.group_is_alive(worker)
        assert not processes.is_alive(child, None)
    assert "resume with: ithaca run-plan add-login" in out
    assert_recorded_interrupted(project, "SIGTERM")


def on_terminal(project_dir: Path) -> tuple[int, str]:
    """Run ``ithaca run-plan add-login`` with a pseudo-terminal as its terminal."""
    master, slave = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "TERM": "dumb"}
    process = subprocess.Popen(
        [ITHACA, "run-plan", "add-login"],
        cwd=project_dir,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + WAIT_S
    while select.select([master], [], [], max(deadline - time.monotonic(), 0))[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    else:
        process.kill()
    os.close(master)
    return process.wait(timeout=WAIT_S), shown.decode(errors="replace")


def test_on_a_terminal_a_live_line_is_rewritten_in_place(project, project_dir, change, settings):
    configure(project, settings("work"))

    code, shown = on_terminal(project_dir)

    assert code == 0, shown
    assert "\r" in shown.replace("\r\n", "")  # a line rewritten, not only line ends
    live = [part for part in shown.replace("\r\n", "\n").split("\r") if "| wave " in part]
    assert live and all(line.startswith("run-plan add-login | wave ") for line in live)
    lines = shown.replace("\r\n", "\n").split("\n")
    finished = [line.split("\r")[-1].strip() for line in lines if "integrated (worker" in line]
    assert sorted(finished) == [
        "T-1 integrated (worker exit 0)",
        "T-2 integrated (worker exit 0)",
        "T-3 integrated (worker exit 0)",
    ]
    assert "merge ithaca/plan/add-login into your branch when you are ready" in shown
