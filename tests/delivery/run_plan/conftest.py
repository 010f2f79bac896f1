"""Shared by the run-plan tests (``tests/cli/delivery`` and the doctor's star-import it
too): a project with change add-login whose plan is accepted, and a real worker, a small
Python program that reports what it was given and, depending on its mode, does its task
(writes the declared file, commits, writes its output and runs ``ithaca record
task_outcome complete``), exits 0 without doing anything, writes a file another task
writes too, talks too much, hangs, leaves a process behind, commits half its work and
stops (``half``), or starts a child and waits (``sleepy``; ``deaf-sleepy`` ignores
SIGTERM, it and its child)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.run_plan.dispatcher import run_plan
from ithaca.kernel.config import defaults

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
if mode in ("sleepy", "deaf-sleepy"):
    import signal, time
    deaf = mode == "deaf-sleepy"
    if deaf:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = ["sh", "-c", "trap '' TERM; exec sleep 300"] if deaf else ["sleep", "300"]
    left = subprocess.Popen(child)
    with open(os.path.join(os.environ["REPORT_DIR"], task + ".pids"), "w") as out:
        out.write(str(os.getpid()) + " " + str(left.pid))
    print("worker of " + task + " waits", flush=True)
    while True:
        time.sleep(1)
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
if mode == "half":  # committed some work, left more uncommitted, never completed
    with open("README.md", "a") as out:
        out.write("half done\\n")
    with open("notes.txt", "w") as out:
        out.write("what is left\\n")
    sys.exit(0)
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


def configure(project: IthacaProject, config: dict[str, Any]) -> None:
    """Write the worker of ``config`` into the local config file the CLI reads."""
    worker = config["run_plan"]
    Path(project.project.runtime, "config.toml").write_text(
        "[run_plan]\n"
        f"worker = {json.dumps(worker['worker'])}\n"
        f"env = {{ REPORT_DIR = {json.dumps(worker['env']['REPORT_DIR'])} }}\n"
    )
