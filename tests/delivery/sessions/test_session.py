"""The ``session`` tool (reference §9.1–9.5): admission verdicts, acquire, heartbeat,
close, the circuit breaker, and one running session per task under racing processes.

Time is moved by editing lease values in the database, never by sleeping."""

from __future__ import annotations

import itertools
import multiprocessing
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.sessions import leases
from ithaca.delivery.sessions.acquire import AcquireRequest, acquire_session
from ithaca.delivery.sessions.tool import session
from ithaca.kernel import config as config_loader
from ithaca.kernel.errors import Conflict, IthacaError, NotFound, Refused
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

_KEYS = itertools.count(1)
FORK = multiprocessing.get_context("fork")
WAIT_S = 60


def git(root: Path | str, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def task(project_dir: Path, define_task: Any) -> str:
    """Task T-1 of change add-login, in a repository whose first commit holds the team's
    tracked ``.ithaca/`` files next to the code."""
    git(project_dir, "config", "user.email", "dev@example.com")
    git(project_dir, "config", "user.name", "Dev")
    (project_dir / "src").mkdir()
    (project_dir / "src" / "app.py").write_text("print('hi')\n")
    git(project_dir, "add", "-A")
    git(project_dir, "commit", "-qm", "first")
    return str(define_task())


def call(project: IthacaProject, **request: Any) -> dict[str, Any]:
    return session(project.project, project.store, project.config, request)


def take(project: IthacaProject, strategy: str = "spawn", **more: Any) -> dict[str, Any]:
    more.setdefault("task_id", "T-1")
    return call(
        project,
        operation="acquire",
        strategy=strategy,
        idempotency_key=f"acq-{next(_KEYS)}",
        **more,
    )


def verdict(project: IthacaProject, **more: Any) -> str:
    return str(call(project, operation="admission", task_id="T-1", **more)["verdict"])


def db(project: IthacaProject) -> sqlite3.Connection:
    return sqlite3.connect(project.project.db_path, isolation_level=None)


def age(project: IthacaProject, session_id: str, *, heartbeat_s: float, expires_in_s: float):
    """Pretend the last heartbeat was ``heartbeat_s`` ago and the lease ends in
    ``expires_in_s`` (negative: it has ended)."""
    now = leases.now_ms()
    with db(project) as conn:
        conn.execute(
            "UPDATE delivery_sessions SET heartbeat_at = ?, lease_expires_at = ? WHERE id = ?",
            (leases.stamp(now, -heartbeat_s), leases.stamp(now, expires_in_s), session_id),
        )


def row(project: IthacaProject, session_id: str) -> dict[str, Any]:
    with db(project) as conn:
        conn.row_factory = sqlite3.Row
        return dict(
            conn.execute("SELECT * FROM delivery_sessions WHERE id = ?", (session_id,)).fetchone()
        )


def task_status(project: IthacaProject, task_id: str = "T-1") -> str:
    with db(project) as conn:
        return str(
            conn.execute("SELECT status FROM delivery_tasks WHERE id = ?", (task_id,)).fetchone()[0]
        )


def refusal(run: Any, *args: Any, **kwargs: Any) -> IthacaError:
    with pytest.raises(IthacaError) as caught:
        run(*args, **kwargs)
    return caught.value


# --- admission ------------------------------------------------------------------------


def test_an_idle_task_admits_spawn_and_admission_writes_nothing(project, task, count_events):
    before = count_events()
    answer = call(project, operation="admission", task_id=task)
    assert answer["verdict"] == "spawn"
    assert answer["blockers"] == [] and "session" not in answer
    assert count_events() == before


def test_the_owner_resumes_and_anyone_else_abandons_a_live_lease(project, task):
    held = take(project, session="host-a")
    assert verdict(project, session="host-a") == "resume"
    assert verdict(project, session="host-b") == "abandon"
    answer = call(project, operation="admission", task_id=task, session="host-b")
    assert answer["session"]["id"] == held["session"]["id"]


def test_naming_a_quiet_session_resumes_it_from_another_host_session(project, task):
    held = take(project, session="host-a")
    sid = held["session"]["id"]
    assert verdict(project, session="host-b", session_id=sid) == "abandon"
    age(project, sid, heartbeat_s=121, expires_in_s=600)
    assert verdict(project, session="host-b", session_id=sid) == "resume"


def test_an_expired_lease_admits_takeover(project, task):
    held = take(project, session="host-a")
    age(project, held["session"]["id"], heartbeat_s=1900, expires_in_s=-1)
    assert verdict(project, session="host-b") == "takeover"


def test_blockers_name_what_stops_an_acquire(project, task, record):
    missing = call(project, operation="admission", task_id="T-404")
    assert [b["code"] for b in missing["blockers"]] == ["TASK_NOT_FOUND"]
    assert isinstance(refusal(take, project, task_id="T-404"), NotFound)

    record("change_contract", "cancel", {"id": "add-login", "reason": "dropped"})
    cancelled = call(project, operation="admission", task_id=task)
    assert [b["code"] for b in cancelled["blockers"]] == ["TASK_NOT_EXECUTABLE"]
    error = refusal(take, project)
    assert isinstance(error, Refused) and error.code == "TASK_NOT_EXECUTABLE"


def test_warnings_never_block(project, task, record):
    record(
        "task_contract",
        "define",
        {
            "id": "T-2",
            "change_id": "add-login",
            "title": "After",
            "verification": {"argv": ["true"]},
            "deps": ["T-1"],
            "files_modified": ["src/other.py"],
        },
    )
    answer = call(project, operation="admission", task_id="T-2")
    assert answer["verdict"] == "spawn"
    assert [note["code"] for note in answer["warnings"]] == ["TASK_DEPENDENCIES_INCOMPLETE"]
    assert take(project, task_id="T-2")["session"]["status"] == "running"


def test_acquire_must_use_the_admitted_strategy(project, task):
    take(project, session="host-a")
    error = refusal(take, project, "spawn", session="host-b")
    assert isinstance(error, Conflict) and error.code == "ADMISSION_MISMATCH"
    assert error.details["verdict"] == "abandon"


# --- spawn, the worktree and the packet -------------------------------------------------


def test_spawn_leases_the_task_in_a_clean_worktree_linked_to_the_central_state(project, task):
    answer = take(project)
    worktree = Path(answer["worktree"])
    state_root = Path(project.project.state_root)
    assert task_status(project) == "in_progress"
    assert answer["session"]["lease_epoch"] == 1
    assert (worktree / ".ithaca").is_symlink()
    assert (worktree / ".ithaca").resolve() == state_root.resolve()
    assert (worktree / "src" / "app.py").read_text() == "print('hi')\n"
    assert git(worktree, "status", "--porcelain") == ""
    assert answer["session"]["branch"] == f"ithaca/T-1/{answer['session']['id']}"
    assert answer["env"]["ITHACA_DELIVERY_SESSION"] == answer["session"]["id"]
    assert "ITHACA_SESSION_ID" not in answer["env"]
    packet = Path(answer["packet"]["path"])
    assert packet.is_file() and answer["packet"]["id"].startswith("wp-")


def test_the_worktree_and_output_lie_in_the_work_folder_and_git_status_stays_clean(project, task):
    root = Path(project.project.root)
    exclude = root / ".git" / "info" / "exclude"
    before = exclude.read_text().splitlines()
    exclude.write_text("\n".join([*before, "# mine", "*.log"]))  # the last line unfinished
    answer = take(project, session="host-a")
    sid = answer["session"]["id"]
    assert Path(answer["worktree"]) == root / ".ithaca-work" / "worktrees" / sid
    output = Path(answer["packet"]["output_path"])
    assert output == root / ".ithaca-work" / "outputs" / sid / "output.json"
    assert output.parent.is_dir() and not output.exists()
    assert answer["env"]["ITHACA_OUTPUT_PATH"] == str(output)
    packet = Path(answer["packet"]["path"])
    assert packet == Path(project.project.runtime) / "sessions" / sid / "packet.json"
    assert not (Path(project.project.runtime) / "worktrees").exists()
    output.write_text("{}\n")
    (Path(answer["worktree"]) / "scratch.txt").write_text("work in progress\n")
    shown = git(root, "status", "--porcelain", "--untracked-files=all")
    assert ".ithaca-work" not in shown and ".ithaca/" in shown  # team files still show
    lines = exclude.read_text().splitlines()
    assert lines[: len(before) + 2] == [*before, "# mine", "*.log"]
    assert lines.count("/.ithaca-work/") == 1
    take(project, "resume", session="host-a")
    assert exclude.read_text().splitlines().count("/.ithaca-work/") == 1


def test_worker_commits_never_contain_ithaca(project, task):
    worktree = Path(take(project)["worktree"])
    (worktree / "src" / "app.py").write_text("print('login')\n")
    (worktree / "notes.txt").write_text("new\n")
    git(worktree, "add", "-A")
    git(worktree, "commit", "-qm", "work")
    changed = git(worktree, "show", "--name-only", "--format=", "HEAD").split()
    assert changed == ["notes.txt", "src/app.py"]
    assert git(worktree, "status", "--porcelain") == ""


def test_a_running_session_allows_writes_to_its_worktree_and_output_only(project, task):
    answer = take(project)
    with db(project) as conn:
        allowed = {path for (path,) in conn.execute("SELECT path FROM write_allowances")}
    assert allowed == {answer["worktree"], str(Path(answer["packet"]["output_path"]).parent)}
    with db(project) as conn:
        owners = {owner for (owner,) in conn.execute("SELECT owner FROM write_allowances")}
    assert owners == {f"delivery:{answer['session']['id']}"}
    call(project, operation="close", session_id=answer["session"]["id"], idempotency_key="c-1")
    with db(project) as conn:
        assert conn.execute("SELECT count(*) FROM write_allowances").fetchone()[0] == 0


def test_a_replayed_acquire_returns_the_same_session(project, task, count_events):
    first = call(project, operation="acquire", task_id=task, strategy="spawn", idempotency_key="k")
    events = count_events()
    again = call(project, operation="acquire", task_id=task, strategy="spawn", idempotency_key="k")
    assert again["replayed"] is True
    assert again["session"]["id"] == first["session"]["id"]
    assert count_events() == events


# --- resume and takeover -----------------------------------------------------------------


def test_resume_by_the_owner_keeps_session_worktree_and_packet(project, task):
    first = take(project, session="host-a")
    again = take(project, "resume", session="host-a")
    assert again["session"]["id"] == first["session"]["id"]
    assert again["session"]["lease_epoch"] == 2
    assert again["worktree"] == first["worktree"]
    assert again["packet"]["digest"] == first["packet"]["digest"]
    assert again["packet_replaced"] is False


def test_resume_by_a_new_host_session_rebinds_the_owner(project, task):
    sid = take(project, session="host-a")["session"]["id"]
    age(project, sid, heartbeat_s=300, expires_in_s=300)
    resumed = take(project, "resume", session="host-b", session_id=sid)
    assert resumed["session"]["host_session_id"] == "host-b"
    assert verdict(project, session="host-b") == "resume"
    assert verdict(project, session="host-a") == "abandon"


def test_resume_after_a_contract_change_replaces_the_packet(project, task, record):
    first = take(project, session="host-a")
    record(
        "change_contract",
        "revise",
        {"id": "add-login", "patch": {"contract": {"outcome": "Users sign in with a passkey"}}},
    )
    again = take(project, "resume", session="host-a")
    assert again["packet_replaced"] is True
    assert again["packet"]["digest"] != first["packet"]["digest"]
    with db(project) as conn:
        statuses = dict(conn.execute("SELECT digest, status FROM delivery_packets"))
    assert statuses == {
        first["packet"]["digest"]: "abandoned",
        again["packet"]["digest"]: "assigned",
    }


def test_takeover_adopts_the_worktree_and_the_old_owner_loses_its_lease(project, task):
    old = take(project, session="host-a")
    worktree = Path(old["worktree"])
    (worktree / "wip.txt").write_text("half done\n")
    age(project, old["session"]["id"], heartbeat_s=2000, expires_in_s=-5)
    new = take(project, "takeover", session="host-b")
    assert new["session"]["id"] != old["session"]["id"]
    assert new["worktree"] == old["worktree"]
    assert new["session"]["branch"] == old["session"]["branch"]
    assert (worktree / "wip.txt").read_text() == "half done\n"
    assert row(project, old["session"]["id"])["status"] == "taken_over"
    for late in (
        lambda: call(project, operation="heartbeat", session_id=old["session"]["id"]),
        lambda: call(
            project, operation="close", session_id=old["session"]["id"], idempotency_key="x"
        ),
    ):
        error = refusal(late)
        assert isinstance(error, Conflict) and error.code == "LEASE_LOST"


def test_only_the_user_takes_over_a_live_lease(project, task):
    take(project, session="host-a")
    assert refusal(take, project, "takeover", session="host-b").code == "ADMISSION_MISMATCH"
    forced = session(
        project.project,
        project.store,
        project.config,
        {"operation": "acquire", "task_id": task, "strategy": "takeover", "idempotency_key": "f"},
        force=True,
    )
    assert forced["session"]["status"] == "running"


# --- heartbeat ------------------------------------------------------------------------


def test_a_heartbeat_moves_the_lease_forward_without_a_journal_event(project, task, count_events):
    sid = take(project)["session"]["id"]
    age(project, sid, heartbeat_s=600, expires_in_s=60)
    events = count_events()
    answer = call(project, operation="heartbeat", session_id=sid)
    assert answer["session"]["lease_expires_at"] > leases.stamp(leases.now_ms(), 1700)
    assert count_events() == events


def test_an_expired_lease_cannot_be_heartbeaten_back(project, task):
    sid = take(project)["session"]["id"]
    age(project, sid, heartbeat_s=2000, expires_in_s=-1)
    error = refusal(call, project, operation="heartbeat", session_id=sid)
    assert isinstance(error, Conflict) and error.code == "LEASE_EXPIRED"


# --- close and the circuit breaker ----------------------------------------------------


def close(project: IthacaProject, sid: str, **more: Any) -> dict[str, Any]:
    return call(
        project, operation="close", session_id=sid, idempotency_key=f"close-{next(_KEYS)}", **more
    )


def test_closing_returns_the_task_to_pending_and_abandoning_is_no_failure(project, task):
    answer = close(project, take(project)["session"]["id"])
    assert answer["session"]["status"] == "abandoned"
    assert answer["task"]["status"] == "pending"
    assert answer["circuit"] == {"consecutive_failures": 0, "open": False}
    assert answer["worktree"]["removed"] is False


def test_three_failures_open_the_circuit_until_the_contract_is_revised(project, task, record):
    for attempt in range(3):
        answer = close(project, take(project)["session"]["id"], reason="failed")
        assert answer["circuit"]["consecutive_failures"] == attempt + 1
    assert answer["circuit"]["open"] is True
    blocked = call(project, operation="admission", task_id=task)
    assert [b["code"] for b in blocked["blockers"]] == ["CIRCUIT_OPEN"]
    assert refusal(take, project).code == "CIRCUIT_OPEN"
    record("task_contract", "revise", {"id": task, "patch": {"title": "Add the login form"}})
    assert take(project)["session"]["status"] == "running"


def test_the_user_resets_a_circuit(project, task):
    from ithaca.delivery.sessions.close import reset_circuit

    for _ in range(3):
        close(project, take(project)["session"]["id"], reason="failed")
    answer = reset_circuit(project.store, task)
    assert answer["reset"] is True and answer["circuit"]["open"] is False
    assert verdict(project) == "spawn"


def test_a_dirty_worktree_is_kept_and_said_so(project, task):
    answer = take(project)
    (Path(answer["worktree"]) / "draft.py").write_text("x = 1\n")
    closed = close(project, answer["session"]["id"], remove_worktree=True)
    assert closed["worktree"] == {
        "path": answer["worktree"],
        "removed": False,
        "preserved": "dirty",
    }
    assert [note["code"] for note in closed["diagnostics"]] == ["WORKTREE_PRESERVED"]
    assert Path(answer["worktree"], "draft.py").exists()


def test_an_unmerged_worktree_is_kept(project, task):
    answer = take(project)
    worktree = Path(answer["worktree"])
    (worktree / "src" / "app.py").write_text("print('login')\n")
    git(worktree, "commit", "-qam", "work")
    closed = close(project, answer["session"]["id"], remove_worktree=True)
    assert closed["worktree"]["preserved"] == "not_integrated"
    assert worktree.is_dir()


def test_a_clean_merged_worktree_goes_and_the_central_state_stays(project, task, project_dir):
    answer = take(project)
    branch = answer["session"]["branch"]
    closed = close(project, answer["session"]["id"], remove_worktree=True)
    assert closed["worktree"]["removed"] is True
    assert not Path(answer["worktree"]).exists()
    assert branch not in git(project_dir, "branch", "--list")
    state_root = Path(project.project.state_root)
    assert (state_root / "changes" / "active" / "add-login" / "intent.md").is_file()
    assert Path(project.project.db_path).is_file()


def test_a_plan_run_session_is_closed_only_by_its_runner(project, task):
    answer, _ = acquire_session(
        project.project,
        project.store,
        AcquireRequest(task_id=task, strategy="spawn", worktree="none", plan_run_id="run_1"),
        None,
    )
    error = refusal(close, project, answer["session"]["id"])
    assert isinstance(error, Refused) and error.code == "SESSION_PARENT_OWNED"


def test_requests_are_checked_per_operation(project, task):
    for request, pointer in (
        ({"operation": "acquire", "task_id": task, "idempotency_key": "k"}, "/strategy"),
        ({"operation": "heartbeat"}, "/session_id"),
        ({"operation": "admission", "task_id": task, "reason": "failed"}, "/reason"),
        ({"operation": "close", "session_id": "ses_x", "idempotency_key": "k"}, "/session_id"),
    ):
        error = refusal(call, project, **request)
        assert error.code == "VALIDATION_ERROR" and error.details["pointer"] == pointer


# --- many processes -----------------------------------------------------------------------


def acquire_in_child(
    project: Project, host: str, worktree: str, barrier: Any, results: Any
) -> None:
    store = Store(project.db_path, migrate=False)
    config = config_loader.load(project.state_root)
    request = {
        "operation": "acquire",
        "task_id": "T-1",
        "strategy": "spawn",
        "worktree": worktree,
        "idempotency_key": f"race-{host}",
        "session": host,
    }
    barrier.wait(WAIT_S)
    try:
        results.put({"session": session(project, store, config, request)["session"]["id"]})
    except IthacaError as exc:
        results.put({"error": exc.code})


@pytest.mark.slow
@pytest.mark.parametrize("worktree", ["create", "none"])
def test_racing_processes_leave_exactly_one_running_session(project, task, worktree):
    racers = 5
    barrier = FORK.Barrier(racers)
    results = FORK.Queue()
    children = [
        FORK.Process(
            target=acquire_in_child,
            args=(project.project, f"host-{n}", worktree, barrier, results),
        )
        for n in range(racers)
    ]
    for child in children:
        child.start()
    answers = [results.get(timeout=WAIT_S) for _ in children]
    for child in children:
        child.join(WAIT_S)
        assert child.exitcode == 0
    winners = [answer["session"] for answer in answers if "session" in answer]
    assert len(winners) == 1
    assert sorted(answer["error"] for answer in answers if "error" in answer) == [
        "ADMISSION_MISMATCH"
    ] * (racers - 1)
    with db(project) as conn:
        running = conn.execute(
            "SELECT id FROM delivery_sessions WHERE status = 'running'"
        ).fetchall()
    assert running == [(winners[0],)]
    made = Path(project.project.root, ".ithaca-work", "worktrees")
    found = [path.name for path in made.iterdir()] if made.exists() else []
    assert found == ([winners[0]] if worktree == "create" else [])
    outputs = Path(project.project.root, ".ithaca-work", "outputs")
    assert [path.name for path in outputs.iterdir()] == [winners[0]]
