"""``ithaca run-plan`` (reference §9.6) with a real worker: a small Python program that
reports what it was given and, depending on its mode, does its task (writes the declared
file, commits, writes its output and runs ``ithaca record task_outcome complete``), exits
0 without doing anything, writes a file another task writes too, talks too much, hangs,
or leaves a process behind."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ithaca.app import IthacaProject
from ithaca.cli.commands.run_plan import command as run_plan_command
from ithaca.delivery.run_plan import worker as run_plan_worker
from ithaca.delivery.run_plan.dispatcher import run_plan
from ithaca.delivery.sessions import acquire as sessions_acquire
from ithaca.delivery.sessions import worktrees
from ithaca.delivery.units import owners as processes
from ithaca.kernel.config import defaults
from ithaca.kernel.errors import InvalidInput, IthacaError, Refused

WORKER = """
import json, os, subprocess, sys

mode = sys.argv[1]
task = os.environ["ITHACA_TASK_ID"]
with open(os.path.join(os.environ["REPORT_DIR"], task + ".json"), "w") as out:
    json.dump({"argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd()}, out)
if mode == "idle":
    sys.exit(0)
if mode == "chatty":
    print("x" * 5000)
    sys.exit(0)
if mode == "hang":
    import time
    time.sleep(60)
if mode in ("orphan", "deaf-orphan"):
    deaf = ["sh", "-c", "trap '' TERM; exec sleep 60"]
    quiet = subprocess.DEVNULL if mode == "deaf-orphan" else None
    left = subprocess.Popen(
        deaf if mode == "deaf-orphan" else ["sleep", "60"], stdout=quiet, stderr=quiet
    )
    with open(os.path.join(os.environ["REPORT_DIR"], task + "." + mode), "w") as out:
        out.write(str(left.pid))
    sys.exit(0)
with open(os.environ["ITHACA_PACKET_PATH"]) as packet_file:
    packet = json.load(packet_file)
target = "shared.txt" if mode == "clash" else packet["task"]["files_modified"][0]
os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
with open(target, "w") as out:
    out.write("written by " + task + "\\n")
subprocess.run(["git", "add", "-A"], check=True)
subprocess.run(["git", "commit", "-qm", task], check=True)
result = {"task_id": task, "status": "completed", "summary": task + " done",
          "changed_files": [target], "verification": {"argv": ["true"], "exit_code": 0}}
with open(os.environ["ITHACA_OUTPUT_PATH"], "w") as out:
    json.dump(result, out)
data = {"task_id": task, "session_id": os.environ["ITHACA_DELIVERY_SESSION"],
        "packet_digest": os.environ["ITHACA_PACKET_DIGEST"]}
subprocess.run([sys.executable, "-m", "ithaca", "record", "task_outcome", "complete",
                "--data", json.dumps(data)], check=True)
"""
NOT_A_SHELL = "$HOME;echo hacked"


def git(root: Path | str, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def change(project_dir: Path, record: Any, new_change: Any, service: Any) -> str:
    """Change add-login: T-1 (src/a.py) and T-2 (src/b.py) side by side, then T-3
    (src/c.py) after both; its plan is accepted."""
    git(project_dir, "config", "user.email", "dev@example.com")
    git(project_dir, "config", "user.name", "Dev")
    (project_dir / "README.md").write_text("app\n")
    git(project_dir, "add", "-A")
    git(project_dir, "commit", "-qm", "first")
    new_change()
    for task_id, path, deps in (
        ("T-1", "src/a.py", []),
        ("T-2", "src/b.py", []),
        ("T-3", "src/c.py", ["T-1", "T-2"]),
    ):
        record(
            "task_contract",
            "define",
            {
                "id": task_id,
                "change_id": "add-login",
                "title": f"Write {path}",
                "verification": {"argv": ["true"]},
                "files_modified": [path],
                "deps": deps,
            },
        )
    accept_plan(service)
    return "add-login"


def accept_plan(service: Any, key: str = "plan-1") -> None:
    answer = service.checkpoint(
        {
            "stage": "plan",
            "scope": {"change_id": "add-login"},
            "payload": {"summary": "three tasks"},
            "idempotency_key": key,
        }
    )
    assert answer["accepted"] is True


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    return folder


@pytest.fixture
def settings(tmp_path: Path, reports: Path) -> Any:
    """``settings(mode)``: the configuration with a worker in that mode."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)

    def make(mode: str = "work", **run_plan: Any) -> dict[str, Any]:
        config = defaults()
        config["run_plan"].update(
            {
                "worker": [sys.executable, str(script), mode, NOT_A_SHELL],
                "env": {"REPORT_DIR": str(reports)},
                "timeout_s": 120,
                **run_plan,
            }
        )
        return config

    return make


def run(project: IthacaProject, config: dict[str, Any], **options: Any) -> dict[str, Any]:
    return run_plan(
        project.project, project.store, {**project.config, **config}, "add-login", **options
    )


def db(project: IthacaProject) -> sqlite3.Connection:
    return sqlite3.connect(project.project.db_path, isolation_level=None)


def statuses(project: IthacaProject) -> dict[str, str]:
    with db(project) as conn:
        return dict(conn.execute("SELECT id, status FROM delivery_tasks ORDER BY id"))


def report(reports: Path, task_id: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((reports / f"{task_id}.json").read_text())
    return found


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
