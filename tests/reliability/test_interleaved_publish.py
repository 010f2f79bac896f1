"""Concurrent writers never undo each other (docs/delivery.md, "The team ledger" and
"Recoverable units"), with real processes on one project.

``sync publish`` writes the next ledger generation before the transaction that makes it
this checkout's base commits. Another process that imported that generation in between,
and then saw the file put back when the publish was rolled back, used to take the file
for a branch switched back ("rewound") and apply the older state over the database:
completed tasks went back to ``pending`` with their outcomes erased, and every call
answered success. These tests open that window on purpose — a publisher stopped
(``SIGSTOP``) right after it wrote the file, then killed — and also run four sessions
completing tasks while publishes and imports run, with a helper process holding the
store's write lock in short bursts to stretch every such window.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.command_line import doctor_codes

from ithaca.app import IthacaProject, open_project
from ithaca.delivery.ledger.format import LEDGER_PATH, parse
from ithaca.delivery.sync import tool as sync

SESSIONS = 4
TASKS_PER_SESSION = 6
# Generous: each process only waits for the others' transactions.
RUN_TIMEOUT_S = 150

_COMMON = r"""
import json, sys, time
import ithaca

def record(service, kind, action, data, key, **request):
    entry = {"kind": kind, "action": action, "data": data, "idempotency_key": key}
    return service.record({"entries": [entry], **request})["results"][0]["result"]

def output(task):
    return {"task_id": task, "status": "completed", "summary": "done " + task,
            "changed_files": ["src/" + task + ".py"],
            "verification": {"argv": ["pytest", "-q"], "exit_code": 0}}
"""

# One delivery session after another: start each task, then complete it with its output.
_SESSION = (
    _COMMON
    + r"""
root, name, tasks = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
done = []
for task in tasks:
    project = ithaca.open_project(root)
    service = project.delivery
    started = record(service, "task_outcome", "start", {"task_id": task},
                     name + "-start-" + task, session="host-" + name)
    body = {"task_id": task, "session_id": started["session"]["id"],
            "packet_digest": started["packet"]["digest"], "output": output(task)}
    record(service, "task_outcome", "complete", body, name + "-complete-" + task)
    project.close()
    done.append(task)
print(json.dumps(done))
"""
)

# Complete one task whose session the test started (its auto-publish is the one stopped).
_COMPLETE = (
    _COMMON
    + r"""
root, task, session_id, digest = sys.argv[1:5]
service = ithaca.open_project(root).delivery
body = {"task_id": task, "session_id": session_id, "packet_digest": digest,
        "output": output(task)}
print(json.dumps(record(service, "task_outcome", "complete", body, "complete-" + task)))
"""
)

# ``sync publish`` and ``sync import`` in turn until the stop file appears.
_SYNCER = r"""
import json, os, sys
import ithaca
from ithaca.delivery.sync import tool as sync
from ithaca.kernel.errors import IthacaError
root, stop = sys.argv[1], sys.argv[2]
codes = []
n = 0
while not os.path.exists(stop):
    project = ithaca.open_project(root)
    for action in ("publish", "import"):
        n += 1
        request = {"action": action, "idempotency_key": "syncer-%d" % n}
        try:
            sync.sync(project.project, project.store, project.config, request,
                      units=project.delivery.units)
        except IthacaError as exc:
            codes.append(exc.code)
    project.close()
print(json.dumps({"calls": n, "errors": codes}))
"""

# Hold the store's write lock in short bursts: every writer between its file write and
# its commit waits there, so other processes run inside that window.
_STRETCHER = r"""
import os, sqlite3, sys, time
db, stop = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(db, isolation_level=None, timeout=30)
while not os.path.exists(stop):
    conn.execute("BEGIN IMMEDIATE")
    time.sleep(0.015)
    conn.execute("ROLLBACK")
    time.sleep(0.004)
"""


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _record(project: IthacaProject, kind: str, action: str, data: dict[str, Any], **request: Any):
    entry = {"kind": kind, "action": action, "data": data, "idempotency_key": os.urandom(8).hex()}
    answer = project.delivery.record({"entries": [entry], **request})
    return answer["results"][0]["result"]


def _sync(project: IthacaProject, action: str) -> dict[str, Any]:
    request: dict[str, Any] = {"action": action}
    if action != "inspect":
        request["idempotency_key"] = os.urandom(8).hex()
    return sync.sync(
        project.project, project.store, project.config, request, units=project.delivery.units
    )


def _plan_tasks(root: Path, tasks: list[str]) -> None:
    project = open_project(root)
    try:
        _record(
            project,
            "change_contract",
            "open",
            {
                "id": "add-login",
                "kind": "standard",
                "title": "Add login",
                "intent": "# Add login\n\nUsers sign in with email.\n",
            },
        )
        for task in tasks:
            _record(
                project,
                "task_contract",
                "define",
                {
                    "id": task,
                    "change_id": "add-login",
                    "title": f"task {task}",
                    "verification": {"argv": ["pytest", "-q"]},
                    "files_modified": [f"src/{task}.py"],
                },
            )
        _sync(project, "publish")
    finally:
        project.close()


def _tasks(root: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    conn = sqlite3.connect(Path(root) / ".ithaca/.runtime/state.db")
    try:
        rows = conn.execute("SELECT id, status, outcome FROM delivery_tasks").fetchall()
    finally:
        conn.close()
    return {row[0]: (row[1], json.loads(row[2]) if row[2] else {}) for row in rows}


def _lost(root: Path, completed: list[str]) -> list[str]:
    """The tasks a session completed that are no longer completed with their outcome."""
    now = _tasks(root)
    return [
        f"{task}: {now[task][0]}"
        for task in completed
        if now[task][0] != "completed" or not now[task][1].get("summary")
    ]


def _temps(root: Path) -> list[str]:
    state = root / ".ithaca"
    return sorted(
        str(path.relative_to(state))
        for path in state.rglob(".ithaca-*.tmp")
        if ".runtime" not in path.parts
    )


def _stop_after_ledger_write(child: subprocess.Popen[str], db: Path, ledger: Path) -> bytes:
    """Stop ``child`` (SIGSTOP) once its publish wrote the ledger and before it commits:
    the test takes the store's write lock whenever a publish intent is pending, so the
    commit cannot pass it, and waits there for the file to change. The bytes it wrote."""
    before = ledger.read_bytes()
    conn = sqlite3.connect(db, isolation_level=None, timeout=0)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            assert child.poll() is None, child.communicate()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                continue
            try:
                pending = conn.execute(
                    "SELECT count(*) FROM delivery_fs_intents"
                    " WHERE status = 'pending' AND op = 'sync.publish'"
                ).fetchone()[0]
                while pending and ledger.read_bytes() == before and time.monotonic() < deadline:
                    time.sleep(0.001)  # the publish writes the file; its commit waits on us
                if pending:
                    os.kill(child.pid, signal.SIGSTOP)
                    return ledger.read_bytes()
            finally:
                conn.execute("ROLLBACK")
        raise AssertionError("the publish never wrote the ledger")
    finally:
        conn.close()


def test_a_publish_stopped_then_killed_before_its_commit_undoes_no_completion(
    project_dir: Path,
):
    root = project_dir
    _plan_tasks(root, ["T-1", "T-2"])
    project = open_project(root)
    started = _record(project, "task_outcome", "start", {"task_id": "T-1"}, session="host-a")
    project.close()
    ledger = root / ".ithaca" / LEDGER_PATH
    committed = ledger.read_bytes()

    # T-1 completes (its own unit commits), then its publish writes the next generation.
    child = _python(
        _COMPLETE, str(root), "T-1", started["session"]["id"], started["packet"]["digest"]
    )
    try:
        written = _stop_after_ledger_write(child, root / ".ithaca/.runtime/state.db", ledger)
        assert parse(written).index[("task", "T-1")].body["status"] == "completed"
        assert _tasks(root)["T-1"][0] == "completed"

        # While the publish is stopped: an explicit import, and inspect, in other processes.
        project = open_project(root)
        _sync(project, "import")
        inspected = _sync(project, "inspect")
        assert inspected["status"] == "publishing", inspected
        project.close()
        assert "LEDGER_PUBLISH_IN_PROGRESS" in doctor_codes(root)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
        assert child.returncode == -signal.SIGKILL

    # The file still holds what the dead publish wrote and never committed: importing it
    # now settles the dead unit first (its file put back), and applies nothing of it.
    assert ledger.read_bytes() == written
    assert "LEDGER_UNCOMMITTED" in doctor_codes(root)
    project = open_project(root)
    try:
        assert project.delivery.recovered  # the service recovered the dead writer's unit
        assert ledger.read_bytes() == committed
        answer = _sync(project, "import")
        assert answer.get("applied", 0) == 0, answer
        assert _lost(root, ["T-1"]) == []

        # Another session completes T-2: its import before the call and its publish after
        # it must keep T-1 completed, and the ledger now says so too.
        second = _record(project, "task_outcome", "start", {"task_id": "T-2"}, session="host-b")
        _record(
            project,
            "task_outcome",
            "complete",
            {
                "task_id": "T-2",
                "session_id": second["session"]["id"],
                "packet_digest": second["packet"]["digest"],
                "output": {
                    "task_id": "T-2",
                    "status": "completed",
                    "summary": "done T-2",
                    "changed_files": ["src/T-2.py"],
                    "verification": {"argv": ["pytest", "-q"], "exit_code": 0},
                },
            },
        )
        _sync(project, "import")
        _sync(project, "publish")
        assert _lost(root, ["T-1", "T-2"]) == []
        final = parse(ledger.read_bytes())
        assert final.index[("task", "T-1")].body["status"] == "completed"
        assert final.index[("task", "T-1")].body["outcome"]["summary"] == "done T-1"
        assert _sync(project, "inspect")["status"] == "current"
        assert _temps(root) == []
    finally:
        project.close()


@pytest.mark.slow
def test_sessions_completing_tasks_while_publishes_and_imports_run_lose_nothing(
    project_dir: Path, tmp_path: Path
):
    root = project_dir
    tasks = [f"T-{n}" for n in range(1, SESSIONS * TASKS_PER_SESSION + 1)]
    _plan_tasks(root, tasks)
    stop = tmp_path / "stop"
    db = root / ".ithaca/.runtime/state.db"
    helpers = [_python(_SYNCER, str(root), str(stop)), _python(_STRETCHER, str(db), str(stop))]
    sessions = [
        _python(_SESSION, str(root), f"s{n}", ",".join(tasks[n::SESSIONS])) for n in range(SESSIONS)
    ]
    completed: list[str] = []
    try:
        for child in sessions:
            out, err = child.communicate(timeout=RUN_TIMEOUT_S)
            assert child.returncode == 0, err
            completed += json.loads(out)
    finally:
        stop.touch()
        for child in sessions:
            if child.poll() is None:
                child.kill()
        results = [child.communicate(timeout=RUN_TIMEOUT_S) for child in helpers]
    assert sorted(completed) == sorted(tasks)
    syncer = json.loads(results[0][0])
    assert syncer["calls"] >= 2
    assert set(syncer["errors"]) <= {"LEDGER_CONFLICT", "LEDGER_ACTIVE_TASK_CONFLICT"}

    # Every completion survived, and survives the next import and publish too.
    assert _lost(root, completed) == []
    project = open_project(root)
    try:
        _sync(project, "import")
        _sync(project, "publish")
        assert _lost(root, completed) == []
        published = parse((root / ".ithaca" / LEDGER_PATH).read_bytes())
        assert all(published.index[("task", task)].body["status"] == "completed" for task in tasks)
        assert _sync(project, "inspect")["status"] == "current"
        assert _temps(root) == []
    finally:
        project.close()
