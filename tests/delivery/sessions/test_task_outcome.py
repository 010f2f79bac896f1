"""``record task_outcome`` (reference §6.1, §6.5): start, the evidence gates of complete,
block and reopen, and a property test that nothing reaches ``completed`` without the
assigned packet's digest and an output its schema accepts."""

from __future__ import annotations

import itertools
import json
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ithaca.app import IthacaProject, init_project, open_project
from ithaca.delivery.service import DeliveryService
from ithaca.delivery.sessions.tool import session
from ithaca.kernel.errors import Conflict, IthacaError, Refused

OTHER_SESSION = "ses_01JB0000000000000000000000"
_KEYS = itertools.count(1)


@pytest.fixture
def task(define_task: Any) -> str:
    return str(define_task())


def outcome(
    service: DeliveryService,
    action: str,
    data: dict[str, Any],
    key: str | None = None,
    **request: Any,
) -> dict[str, Any]:
    entry = {
        "kind": "task_outcome",
        "action": action,
        "data": data,
        "idempotency_key": key or f"{action}-{next(_KEYS)}",
    }
    result: dict[str, Any] = service.record({"entries": [entry], **request})["results"][0]
    return result


def start(service: DeliveryService, **request: Any) -> dict[str, Any]:
    started: dict[str, Any] = outcome(service, "start", {"task_id": "T-1"}, **request)["result"]
    return started


def output(**changes: Any) -> dict[str, Any]:
    return {
        "task_id": "T-1",
        "status": "completed",
        "summary": "login form added",
        "changed_files": ["src/app.py"],
        "verification": {"argv": ["pytest", "-q"], "exit_code": 0},
        **changes,
    }


def complete(service: DeliveryService, started: dict[str, Any], **data: Any) -> dict[str, Any]:
    body = {
        "task_id": "T-1",
        "session_id": started["session"]["id"],
        "packet_digest": started["packet"]["digest"],
        **data,
    }
    return outcome(service, "complete", body)


def refusal(run: Any, *args: Any, **kwargs: Any) -> IthacaError:
    with pytest.raises(IthacaError) as caught:
        run(*args, **kwargs)
    return caught.value


def db(project: IthacaProject) -> sqlite3.Connection:
    return sqlite3.connect(project.project.db_path, isolation_level=None)


def status_of(project: IthacaProject, task_id: str = "T-1") -> str:
    with db(project) as conn:
        found = conn.execute("SELECT status FROM delivery_tasks WHERE id = ?", (task_id,))
        return str(found.fetchone()[0])


# --- start ---------------------------------------------------------------------------------


def test_start_spawns_a_session_without_a_worktree(project, service, task):
    started = start(service)
    assert started["verdict"] == "spawn"
    assert started["worktree"] is None and started["session"]["worktree"] is None
    assert status_of(project) == "in_progress"
    assert Path(started["packet"]["path"]).is_file()


def test_start_again_resumes_for_the_owner_and_is_refused_to_others(project, service, task):
    first = start(service, session="host-a")
    again = outcome(service, "start", {"task_id": "T-1", "runtime": "codex"}, session="host-a")
    assert again["result"]["verdict"] == "resume"
    assert again["result"]["session"]["id"] == first["session"]["id"]
    error = refusal(outcome, service, "start", {"task_id": "T-1"}, session="host-b")
    assert isinstance(error, Conflict) and error.code == "ADMISSION_MISMATCH"


def test_a_replayed_start_answers_the_same(project, service, task):
    first = outcome(service, "start", {"task_id": "T-1"}, key="start-once")
    again = outcome(service, "start", {"task_id": "T-1"}, key="start-once")
    assert again["status"] == "replayed"
    assert again["result"] == first["result"]


# --- complete ------------------------------------------------------------------------------


def test_complete_needs_the_running_session(project, service, task):
    started = start(service)
    stranger = {**started, "session": {"id": OTHER_SESSION}}
    error = refusal(complete, service, stranger, output=output())
    assert isinstance(error, Refused) and error.code == "SESSION_NOT_RUNNING"
    assert status_of(project) == "in_progress"


def test_complete_needs_the_assigned_packet_digest(project, service, task, count_events):
    started = start(service)
    events = count_events()
    wrong = {**started, "packet": {"digest": "0" * 64}}
    error = refusal(complete, service, wrong, output=output())
    assert isinstance(error, Refused) and error.code == "PACKET_DIGEST_MISMATCH"
    assert count_events() == events
    assert not Path(started["packet"]["output_path"]).exists()


def test_complete_needs_an_assigned_packet(project, service, task):
    started = start(service)
    with db(project) as conn:
        conn.execute("UPDATE delivery_packets SET status = 'abandoned'")
    error = refusal(complete, service, started, output=output())
    assert error.code == "NO_ASSIGNED_PACKET"


def test_complete_needs_the_output_file_and_a_valid_output(project, service, task):
    started = start(service)
    assert refusal(complete, service, started).code == "OUTPUT_MISSING"
    Path(started["packet"]["output_path"]).write_text(json.dumps(output(summary=7)))
    error = refusal(complete, service, started)
    assert error.code == "OUTPUT_SCHEMA_INVALID" and error.details["field"] == "/summary"
    error = refusal(complete, service, started, output=output(status="blocked"))
    assert error.code == "OUTPUT_SCHEMA_INVALID"
    assert status_of(project) == "in_progress"


def test_complete_from_the_worker_output_file(project, service, task, state_root):
    started = start(service)
    written = json.dumps(output(), indent=1).encode()
    Path(started["packet"]["output_path"]).write_bytes(written)
    done = complete(service, started)["result"]
    assert status_of(project) == "completed"
    assert done["outcome"]["summary"] == "login form added"
    copy = state_root / done["artifact"]["path"]
    assert done["artifact"]["path"] == "changes/active/add-login/delivery/outcomes/T-1.json"
    assert copy.read_bytes() == written
    with db(project) as conn:
        assert conn.execute("SELECT status FROM delivery_packets").fetchall() == [("consumed",)]
        assert conn.execute("SELECT status FROM delivery_sessions").fetchall() == [("completed",)]
        assert conn.execute("SELECT count(*) FROM write_allowances").fetchone()[0] == 0
        kind = conn.execute(
            "SELECT kind FROM delivery_artifacts WHERE id = ?", (done["artifact"]["id"],)
        )
        assert kind.fetchone() == ("task_outcome",)
        registered = conn.execute(
            "SELECT digest FROM delivery_files WHERE path = ?", (done["artifact"]["path"],)
        )
        assert registered.fetchone() == (done["artifact"]["digest"],)


def test_a_given_output_is_written_first(project, service, task):
    started = start(service)
    complete(service, started, output=output())
    assert json.loads(Path(started["packet"]["output_path"]).read_text()) == output()


def test_completion_commit_is_the_worktree_head_unless_given(project, service, task, project_dir):
    for args in (("config", "user.email", "d@example.com"), ("config", "user.name", "D")):
        subprocess.run(["git", "-C", str(project_dir), *args], check=True)
    (project_dir / "app.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(project_dir), "add", "app.py"], check=True)
    subprocess.run(["git", "-C", str(project_dir), "commit", "-qm", "first"], check=True)
    acquired = session(
        project.project,
        project.store,
        project.config,
        {"operation": "acquire", "task_id": "T-1", "strategy": "spawn", "idempotency_key": "a"},
    )
    worktree = Path(acquired["worktree"])
    (worktree / "app.py").write_text("x = 2\n")
    subprocess.run(["git", "-C", str(worktree), "commit", "-qam", "work"], check=True)
    head = subprocess.run(
        ["git", "-C", str(worktree), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    done = complete(service, acquired, output=output())["result"]
    assert done["completion_commit"] == head


def test_the_owner_of_a_taken_over_session_gets_lease_lost(project, service, task):
    started = start(service, session="host-a")
    with db(project) as conn:
        conn.execute("UPDATE delivery_sessions SET lease_expires_at = '2000-01-01T00:00:00.000Z'")
    session(
        project.project,
        project.store,
        project.config,
        {
            "operation": "acquire",
            "task_id": "T-1",
            "strategy": "takeover",
            "worktree": "none",
            "idempotency_key": "take",
        },
    )
    error = refusal(complete, service, started, output=output())
    assert isinstance(error, Conflict) and error.code == "LEASE_LOST"


def test_completing_the_last_child_completes_the_parent(project, service, task, record):
    for child in ("T-1a", "T-1b"):
        record(
            "task_contract",
            "define",
            {"id": child, "parent_id": "T-1", "title": child, "verification": {"argv": ["true"]}},
        )
    assert status_of(project) == "expanded"
    for child in ("T-1a", "T-1b"):
        started = outcome(service, "start", {"task_id": child})["result"]
        outcome(
            service,
            "complete",
            {
                "task_id": child,
                "session_id": started["session"]["id"],
                "packet_digest": started["packet"]["digest"],
                "output": output(task_id=child),
            },
        )
    assert status_of(project) == "completed"


# --- block and reopen ------------------------------------------------------------------------


def test_block_ends_the_session_without_counting_a_failure(project, service, task):
    started = start(service)
    blocked = outcome(service, "block", {"task_id": "T-1", "reason": "waiting for design"})
    assert blocked["result"]["task"]["status"] == "blocked"
    with db(project) as conn:
        assert conn.execute("SELECT status FROM delivery_sessions").fetchall() == [("abandoned",)]
        assert conn.execute("SELECT count(*) FROM delivery_circuits").fetchone()[0] == 0
    assert refusal(complete, service, started, output=output()).code == "SESSION_NOT_RUNNING"
    reopened = outcome(service, "reopen", {"task_id": "T-1", "reason": "design arrived"})
    assert reopened["result"]["task"]["status"] == "pending"


def test_reopening_a_completed_task_needs_a_new_session_to_complete(project, service, task):
    first = start(service)
    complete(service, first, output=output())
    outcome(service, "reopen", {"task_id": "T-1", "reason": "a bug"})
    assert status_of(project) == "in_progress"
    second = start(service)
    assert second["verdict"] == "spawn" and second["session"]["id"] != first["session"]["id"]
    complete(service, second, output=output(summary="fixed"))
    assert status_of(project) == "completed"


def test_reopen_only_moves_completed_or_blocked_tasks(project, service, task):
    error = refusal(outcome, service, "reopen", {"task_id": "T-1", "reason": "why"})
    assert error.code == "TASK_TRANSITION_INVALID"


# --- the property ------------------------------------------------------------------------------

# ``complete`` is listed thrice so that sequences often try it, right and wrong.
ACTIONS = ("start", "complete", "complete", "complete", "heartbeat", "close", "block", "reopen")
STEP = st.tuples(
    st.sampled_from(ACTIONS),
    st.sampled_from(("assigned", "other")),  # which packet digest complete echoes
    st.sampled_from(("valid", "invalid", "none")),  # which output complete gives
)
STEPS = st.lists(STEP, min_size=1, max_size=10).map(lambda steps: [("start", "", ""), *steps])


def _running(service: DeliveryService) -> tuple[str, str] | None:
    found = (
        service.store.connection()
        .execute(
            "SELECT s.id, p.digest FROM delivery_sessions s JOIN delivery_packets p"
            " ON p.session_id = s.id AND p.status = 'assigned' WHERE s.status = 'running'"
        )
        .fetchone()
    )
    return None if found is None else (found[0], found[1])


def _status(service: DeliveryService) -> str:
    found = service.store.connection().execute("SELECT status FROM delivery_tasks WHERE id = 'T-1'")
    return str(found.fetchone()[0])


def _step(service: DeliveryService, number: int, action: str, echo: str, given: str) -> None:
    running = _running(service)
    session_id = running[0] if running else OTHER_SESSION
    data: dict[str, Any] = {"task_id": "T-1"}
    if action == "complete":
        data["session_id"] = session_id
        data["packet_digest"] = running[1] if running and echo == "assigned" else "f" * 64
        if given != "none":
            data["output"] = output() if given == "valid" else output(changed_files="all")
    if action in ("block", "reopen"):
        data["reason"] = "because"
    if action in ("heartbeat", "close"):
        request = {"operation": action, "session_id": session_id}
        if action == "close":
            request["idempotency_key"] = f"close-{number}"
        session(service.project, service.store, service.config, request)
        return
    entry = {"kind": "task_outcome", "action": action, "data": data}
    service.record({"entries": [{**entry, "idempotency_key": f"step-{number}"}]})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_nothing_reaches_completed_without_the_packet_digest_and_a_valid_output(steps):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        made, _ = init_project(root)
        made.close()
        project = open_project(root)
        try:
            service = project.delivery
            service.record(
                {
                    "entries": [
                        {
                            "kind": "task_contract",
                            "action": "define",
                            "idempotency_key": "def",
                            "data": {"id": "T-1", "title": "T", "verification": {"argv": ["true"]}},
                        },
                    ]
                }
            )
            for number, (action, echo, given_output) in enumerate(steps):
                before, running = _status(service), _running(service)
                try:
                    _step(service, number, action, echo, given_output)
                except IthacaError:
                    pass
                after = _status(service)
                legitimate = (
                    action == "complete"
                    and echo == "assigned"
                    and given_output == "valid"
                    and running is not None
                    and before == "in_progress"
                )
                if before != "completed" and after == "completed":
                    assert legitimate, (action, echo, given_output, before)
                if legitimate:
                    assert after == "completed"
                    event("a task completed")
        finally:
            project.close()
