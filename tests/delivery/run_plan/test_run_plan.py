"""``ithaca run-plan`` (reference §9.6) with a real worker (``conftest.WORKER``): refusals,
waves merged into the integration branch, pauses that name the worker log, timeouts and
what a worker leaves behind, and the progress each step reports."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.delivery.run_plan.conftest import (
    NOT_A_SHELL,
    configure,
    db,
    git,
    report,
    run,
    statuses,
)

from ithaca.cli.commands.run_plan import command as run_plan_command
from ithaca.delivery.run_plan import progress as run_plan_progress
from ithaca.delivery.run_plan import worker as run_plan_worker
from ithaca.delivery.run_plan.dispatcher import run_plan
from ithaca.delivery.sessions import acquire as sessions_acquire
from ithaca.delivery.sessions import worktrees
from ithaca.delivery.units import owners as processes
from ithaca.kernel.errors import InvalidInput, IthacaError, Refused

# --- refusals -------------------------------------------------------------------------------


def test_without_a_configured_worker_nothing_runs(project, change, count_events):
    events = count_events()
    with pytest.raises(Refused) as caught:
        run(project, {})
    assert caught.value.code == "WORKER_NOT_CONFIGURED"
    assert count_events() == events


def test_the_worker_env_cannot_set_ithaca_variables(project, change, settings):
    config = settings()
    config["run_plan"]["env"]["ITHACA_DIR"] = "/elsewhere"
    with pytest.raises(InvalidInput) as caught:
        run(project, config)
    assert caught.value.code == "WORKER_ENV_RESERVED"


def test_the_plan_must_be_accepted_and_current(project, change, settings, record, service):
    record(
        "task_contract",
        "define",
        {
            "id": "T-4",
            "change_id": "add-login",
            "title": "Late",
            "verification": {"argv": ["x"]},
            "files_modified": ["src/d.py"],
        },
    )
    with pytest.raises(Refused) as caught:
        run(project, settings())
    assert caught.value.code == "PLAN_STALE" and caught.value.details["tasks"] == ["T-4"]
    record("task_contract", "remove", {"id": "T-4", "reason": "not needed"})
    record("task_contract", "revise", {"id": "T-1", "patch": {"title": "Write a.py"}})
    with pytest.raises(Refused) as caught:
        run(project, settings())
    assert caught.value.code == "PLAN_STALE" and caught.value.details["tasks"] == ["T-1"]


def test_a_change_without_a_plan_is_refused(project, project_dir, new_change, settings):
    new_change("no-plan")
    with pytest.raises(Refused) as caught:
        run_plan(project.project, project.store, settings(), "no-plan")
    assert caught.value.code == "PLAN_NOT_ACCEPTED"


def test_a_dry_run_only_reads(project, change, settings, count_events):
    events = count_events()
    answer = run(project, settings(), dry_run=True)
    assert [[task["id"] for task in wave["tasks"]] for wave in answer["waves"]] == [
        ["T-1", "T-2"],
        ["T-3"],
    ]
    assert {task["verdict"] for wave in answer["waves"] for task in wave["tasks"]} == {"spawn"}
    assert count_events() == events


# --- running --------------------------------------------------------------------------------


def test_workers_complete_the_plan_into_the_integration_branch(
    project, project_dir, change, settings
):
    answer = run(project, settings())
    assert answer["status"] == "completed"
    assert statuses(project) == {"T-1": "completed", "T-2": "completed", "T-3": "completed"}
    assert {task["status"] for wave in answer["waves"] for task in wave["tasks"]} == {"integrated"}
    branch = answer["run"]["integration_branch"]
    assert branch == "ithaca/plan/add-login"
    for task_id, path in (("T-1", "src/a.py"), ("T-2", "src/b.py"), ("T-3", "src/c.py")):
        assert git(project_dir, "show", f"{branch}:{path}") == f"written by {task_id}\n"
    assert not (project_dir / "src").exists()  # the user's branch is the user's to merge
    merges = git(project_dir, "log", "--merges", "--format=%s", branch).splitlines()
    assert len(merges) == 3
    sessions_left = Path(project.project.root, ".ithaca-work", "worktrees")
    assert [path.name for path in sessions_left.iterdir()] == ["plan-add-login"]
    assert not Path(project.project.runtime, "worktrees").exists()
    assert ".ithaca-work" not in git(project_dir, "status", "--porcelain", "-uall")


def test_an_integration_worktree_from_before_the_work_folder_is_used_where_it_is(
    project, project_dir, change, settings
):
    older = worktrees.legacy_path_for(project.project, "plan-add-login")
    head = worktrees.main_head(project.project)
    git(project_dir, "worktree", "add", "-q", "-b", "ithaca/plan/add-login", older, head)
    answer = run(project, settings())
    assert answer["status"] == "completed"
    assert answer["run"]["worktree"] == older
    assert not Path(worktrees.path_for(project.project, "plan-add-login")).exists()
    assert git(older, "log", "--merges", "--format=%s").count("\n") == 3


def test_a_worker_gets_the_reserved_environment_and_no_shell(
    project, change, settings, reports, monkeypatch
):
    monkeypatch.setenv("SECRET_TOKEN", "do-not-leak")
    monkeypatch.setenv("ITHACA_SESSION_ID", "host-of-the-runner")
    run(project, settings("idle"), max_parallel=1)
    seen = report(reports, "T-1")
    with db(project) as conn:
        session_id, worktree, packet = conn.execute(
            "SELECT s.id, s.worktree_path, p.digest FROM delivery_sessions s"
            " JOIN delivery_packets p ON p.session_id = s.id WHERE s.task_id = 'T-1'"
        ).fetchone()
    env = seen["env"]
    assert env["ITHACA_DELIVERY_SESSION"] == session_id
    assert env["ITHACA_TASK_ID"] == "T-1"
    assert env["ITHACA_PACKET_DIGEST"] == packet
    assert env["ITHACA_WORKTREE"] == worktree == seen["cwd"]
    assert env["ITHACA_DIR"] == project.project.state_root
    assert env["ITHACA_OUTPUT_PATH"] == str(
        Path(project.project.root, ".ithaca-work", "outputs", session_id, "output.json")
    )
    assert env["REPORT_DIR"]
    assert "SECRET_TOKEN" not in env and "ITHACA_SESSION_ID" not in env
    assert seen["argv"][-1] == NOT_A_SHELL
    log = Path(project.project.runtime, "sessions", session_id, "worker.log")
    assert log.is_file()


def test_exit_zero_without_completion_pauses_and_a_rerun_resumes(project, change, settings):
    paused = run(project, settings("idle"))
    assert paused["status"] == "paused"
    assert paused["pause"]["reason"] == "TASK_NOT_CONVERGED"
    assert paused["pause"]["exit_code"] == 0
    assert statuses(project) == {"T-1": "pending", "T-2": "pending", "T-3": "pending"}
    assert [task["status"] for task in paused["waves"][1]["tasks"]] == ["pending"]
    with db(project) as conn:
        failures = dict(conn.execute("SELECT task_id, consecutive_failures FROM delivery_circuits"))
        closed = {status for (status,) in conn.execute("SELECT status FROM delivery_sessions")}
    assert failures == {"T-1": 1, "T-2": 1}
    assert closed == {"failed"}

    resumed = run(project, settings())
    assert resumed["run"]["id"] == paused["run"]["id"]
    assert resumed["run"]["how"] == "resumed"
    assert resumed["status"] == "completed"
    assert statuses(project) == {"T-1": "completed", "T-2": "completed", "T-3": "completed"}


def test_a_worker_past_its_timeout_is_stopped_and_the_run_pauses(
    project, change, settings, monkeypatch
):
    monkeypatch.setattr(run_plan_worker, "TERM_GRACE_S", 1.0)
    answer = run(project, settings("hang", timeout_s=1), max_parallel=1)
    assert answer["pause"]["reason"] == "WORKER_TIMED_OUT"
    assert statuses(project)["T-1"] == "pending"


def test_what_a_worker_leaves_running_is_stopped_with_it(project, change, settings, reports):
    answer = run(project, settings("orphan"), max_parallel=1)
    assert answer["pause"]["reason"] == "TASK_NOT_CONVERGED"
    left = int((reports / "T-1.orphan").read_text())
    assert not processes.is_alive(left, None)  # a zombie nobody reaps counts as gone


def test_a_left_over_that_closed_its_output_and_ignores_sigterm_is_killed(
    project, change, settings, reports, monkeypatch
):
    monkeypatch.setattr(run_plan_worker, "TERM_GRACE_S", 1.0)
    answer = run(project, settings("deaf-orphan"), max_parallel=1)
    assert answer["pause"]["reason"] == "TASK_NOT_CONVERGED"
    left = int((reports / "T-1.deaf-orphan").read_text())
    assert not processes.is_alive(left, None)


def test_the_worker_log_is_capped(project, change, settings, monkeypatch):
    monkeypatch.setattr(run_plan_worker, "LOG_CAP_BYTES", 100)
    answer = run(project, settings("chatty"), max_parallel=1)
    session_id = answer["waves"][0]["tasks"][0]["session_id"]
    log = Path(project.project.runtime, "sessions", session_id, "worker.log").read_bytes()
    assert log == b"x" * 100 + run_plan_worker.TRUNCATED


def test_a_merge_conflict_pauses_the_wave(project, change, settings):
    answer = run(project, settings("clash"))
    assert answer["status"] == "paused"
    assert answer["pause"]["reason"] == "WAVE_INTEGRATION_CONFLICT"
    first_wave = {task["id"]: task["status"] for task in answer["waves"][0]["tasks"]}
    assert sorted(first_wave.values()) == ["integrated", "paused"]
    assert statuses(project)["T-3"] == "pending"
    assert git(answer["run"]["worktree"], "status", "--porcelain") == ""


def test_an_authority_change_before_spawn_pauses_without_a_failure(
    project, change, settings, record, monkeypatch
):
    create = sessions_acquire.worktrees.create

    def revised_meanwhile(project_arg: Any, name: str, branch: str, base: str, *, link: bool):
        if "/T-1/" in branch:
            record("task_contract", "revise", {"id": "T-1", "patch": {"title": "Write a.py"}})
        return create(project_arg, name, branch, base, link=link)

    monkeypatch.setattr(sessions_acquire.worktrees, "create", revised_meanwhile)
    answer = run(project, settings(), max_parallel=1)
    assert answer["status"] == "paused"
    assert answer["pause"]["reason"] == "AUTHORITY_CHANGED"
    assert statuses(project)["T-1"] == "pending"
    with db(project) as conn:
        assert conn.execute("SELECT count(*) FROM delivery_sessions").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM delivery_circuits").fetchone()[0] == 0
    assert [p.name for p in Path(project.project.work_dir, "worktrees").iterdir()] == [
        "plan-add-login"
    ]
    with pytest.raises(IthacaError) as caught:
        run(project, settings())
    assert caught.value.code == "PLAN_STALE"


def test_the_cli_reads_the_worker_from_the_local_config(project, project_dir, change, settings):
    worker = settings("idle")["run_plan"]
    config = Path(project.project.runtime, "config.toml")
    config.write_text(
        "[run_plan]\n"
        f"worker = {json.dumps(worker['worker'])}\n"
        f"env = {{ REPORT_DIR = {json.dumps(worker['env']['REPORT_DIR'])} }}\n"
    )
    result = CliRunner().invoke(
        run_plan_command, ["add-login", "--json"], obj={"project_path": str(project_dir)}
    )
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["pause"]["reason"] == "TASK_NOT_CONVERGED"


# --- progress and stopping --------------------------------------------------------------------


def events(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [
        record.ithaca_progress
        for record in caplog.records
        if record.name == run_plan_progress.LOGGER and hasattr(record, "ithaca_progress")
    ]


def test_each_wave_and_task_is_reported_as_it_goes(project, change, settings, caplog):
    caplog.set_level(logging.INFO, logger=run_plan_progress.LOGGER)
    answer = run(project, settings(), max_parallel=1)
    assert answer["status"] == "completed"
    seen = [
        (found["event"], found.get("wave"), found.get("task_id"), found.get("outcome"))
        for found in events(caplog)
        if found["event"] != "waiting"
    ]
    assert seen == [
        ("run_started", None, None, None),
        ("wave_started", 1, None, None),
        ("task_started", 1, "T-1", None),
        ("task_finished", 1, "T-1", "integrated"),
        ("task_started", 1, "T-2", None),
        ("task_finished", 1, "T-2", "integrated"),
        ("wave_finished", 1, None, "completed"),
        ("wave_started", 2, None, None),
        ("task_started", 2, "T-3", None),
        ("task_finished", 2, "T-3", "integrated"),
        ("wave_finished", 2, None, "completed"),
    ]
    started = [found for found in events(caplog) if found["event"] == "task_started"]
    assert all(Path(found["log"]).is_file() for found in started)
    assert all(found["log"].endswith(f"{found['session_id']}/worker.log") for found in started)


def test_nothing_is_reported_when_nobody_listens(project, change, settings, caplog):
    run(project, settings("idle"), max_parallel=1)
    assert events(caplog) == []


def test_a_pause_names_the_worker_log_to_read(project, change, settings):
    answer = run(project, settings("chatty"), max_parallel=1)
    pause = answer["pause"]
    assert pause["reason"] == "TASK_NOT_CONVERGED" and pause["task_id"] == "T-1"
    log = Path(pause["log"])
    assert log == Path(project.project.runtime, "sessions", pause["session_id"], "worker.log")
    assert log.read_text().startswith("x" * 100)
    first = answer["waves"][0]["tasks"][0]
    assert first["log"] == pause["log"]


def test_the_cli_shows_plain_progress_lines_off_a_terminal(
    project, project_dir, change, settings, monkeypatch
):
    configure(project, settings("idle"))
    monkeypatch.chdir(project_dir)
    result = CliRunner().invoke(
        run_plan_command,
        ["add-login", "--max-parallel", "1"],
        obj={"project_path": str(project_dir)},
    )
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("run-plan add-login: started run run_")
    assert "wave 1/2: T-1, T-2" in lines
    session_id = next(line for line in lines if "T-1 started" in line).split()[3].rstrip(");")
    log = os.path.join(".ithaca", ".runtime", "sessions", session_id, "worker.log")
    assert Path(log).is_file()
    assert f"  T-1 started (session {session_id}); log: {log}" in lines
    paused = f"  T-1 paused: TASK_NOT_CONVERGED (worker exit 0); read its worker log: {log}"
    assert paused in lines
    assert "wave 1/2 paused: TASK_NOT_CONVERGED" in lines
    assert not any(char in result.stderr for char in "\r\x1b\b")
    assert f"  read the worker log: {log}" in result.stdout
    assert "fix it, then run again: ithaca run-plan add-login --max-parallel 1" in result.stdout


def test_json_prints_the_answer_only(project, project_dir, change, settings):
    configure(project, settings("idle"))
    result = CliRunner().invoke(
        run_plan_command, ["add-login", "--json"], obj={"project_path": str(project_dir)}
    )
    assert result.exit_code == 1
    answer = json.loads(result.stdout)
    assert answer["pause"]["log"].endswith("worker.log")
    # run from elsewhere, the command names the project
    assert answer["resume"] == f"ithaca --project {project_dir} run-plan add-login"
    assert result.stderr == ""


DEAF = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 300"])
print(child.pid, flush=True)
while True:
    time.sleep(1)
"""


def test_stopping_all_workers_kills_each_whole_group_after_the_grace(tmp_path):
    launched = []
    for number, script in enumerate((DEAF, "import time; time.sleep(300)")):
        launched.append(
            run_plan_worker.launch(
                (sys.executable, "-c", script),
                {"PATH": "/usr/bin:/bin"},
                str(tmp_path),
                str(tmp_path / f"{number}.log"),
                session_id=f"s{number}",
                task_id=f"T-{number}",
                timeout_s=600,
            )
        )
    deaf_log = tmp_path / "0.log"
    deadline = time.monotonic() + 60
    while not deaf_log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)  # until the deaf worker has started its child
    child = int(deaf_log.read_text())

    run_plan_worker.stop_all(launched, grace_s=0.5)

    assert all(not processes.group_is_alive(worker.process.pid) for worker in launched)
    assert not processes.is_alive(child, None)
    assert [worker.process.returncode for worker in launched] == [-9, -15]
