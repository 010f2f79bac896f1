"""Sessions as the other tools see them (reference §5, §10, §11): ``context`` shows the
acting session and its Worker Packet; ``doctor`` ends orphaned sessions as crashed and
removes what a spawn that crashed before its commit left; ``archive`` and ``cancel`` wait
for a run-plan at work on the change."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.sessions import leases, packets, worktrees
from ithaca.kernel import ids
from ithaca.kernel.errors import Conflict

_KEYS = itertools.count(1)


def git(root: Path | str, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def task(project_dir: Path, record: Any, new_change: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Task T-1 of change add-login in a repository with a first commit."""
    monkeypatch.delenv("ITHACA_DELIVERY_SESSION", raising=False)
    git(project_dir, "config", "user.email", "dev@example.com")
    git(project_dir, "config", "user.name", "Dev")
    (project_dir / "app.py").write_text("print('hi')\n")
    git(project_dir, "add", "-A")
    git(project_dir, "commit", "-qm", "first")
    new_change()
    data = {"id": "T-1", "change_id": "add-login", "title": "t", "verification": {"argv": ["x"]}}
    record("task_contract", "define", data)
    return "T-1"


def acquire(project: IthacaProject, **more: Any) -> dict[str, Any]:
    request = {
        "operation": "acquire",
        "task_id": "T-1",
        "strategy": "spawn",
        "worktree": "none",
        "idempotency_key": f"acq-{next(_KEYS)}",
        **more,
    }
    return project.delivery.session(request)


def sql(project: IthacaProject, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with project.store.write() as conn:
        return conn.execute(query, args).fetchall()


def dead_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def findings(project: IthacaProject) -> set[tuple[str, str]]:
    report = project.delivery.doctor({"operation": "inspect"})
    return {(found["code"], found["subject"]) for found in report["findings"]}


def repair(project: IthacaProject) -> list[str]:
    return list(project.delivery.doctor({"operation": "repair"})["repaired"])


# --- context ------------------------------------------------------------------------------


def test_context_shows_the_session_bound_to_the_host_session(
    project: IthacaProject, task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    acquired = acquire(project, session="host-a")
    unnamed = project.delivery.context({"scope": {"change_id": "add-login"}})
    assert unnamed["execution"] == {"session": None, "worker_packet": None}

    monkeypatch.setenv("ITHACA_SESSION_ID", "host-a")
    envelope = project.delivery.context({})

    assert envelope["scope"]["resolved_by"] == "session"
    assert envelope["scope"]["task_id"] == "T-1"
    session, packet = envelope["execution"]["session"], envelope["execution"]["worker_packet"]
    assert (session["id"], session["status"], session["acting"]) == (
        acquired["session"]["id"],
        "running",
        True,
    )
    assert session["lease_expires_at"] == acquired["session"]["lease_expires_at"]
    assert (packet["id"], packet["digest"], packet["path"]) == (
        acquired["packet"]["id"],
        acquired["packet"]["digest"],
        acquired["packet"]["path"],
    )


def test_the_delivery_session_variable_names_the_acting_session(
    project: IthacaProject, task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    acquired = acquire(project)
    monkeypatch.setenv("ITHACA_SESSION_ID", "someone-else")
    monkeypatch.setenv("ITHACA_DELIVERY_SESSION", acquired["session"]["id"])
    execution = project.delivery.context({})["execution"]
    assert execution["session"]["id"] == acquired["session"]["id"]
    assert execution["session"]["acting"] is True


def test_a_scoped_tasks_session_shows_without_acting(project: IthacaProject, task: str) -> None:
    acquired = acquire(project, session="host-a")
    execution = project.delivery.context({"scope": {"task_id": "T-1"}})["execution"]
    assert execution["session"]["id"] == acquired["session"]["id"]
    assert execution["session"]["acting"] is False


def test_a_heartbeat_moves_the_lease_shown_but_not_the_digest(
    project: IthacaProject, task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    acquired = acquire(project)
    session_id = acquired["session"]["id"]
    monkeypatch.setenv("ITHACA_DELIVERY_SESSION", session_id)
    earlier = leases.stamp(leases.now_ms(), 60)
    sql(project, "UPDATE delivery_sessions SET lease_expires_at = ?", earlier)
    before = project.delivery.context({})

    project.delivery.session({"operation": "heartbeat", "session_id": session_id})
    after = project.delivery.context({})

    assert before["execution"]["session"]["lease_expires_at"] == earlier
    assert after["execution"]["session"]["lease_expires_at"] > earlier
    assert after["digest"] == before["digest"]


# --- doctor: orphaned sessions ------------------------------------------------------------


def test_doctor_ends_a_run_plan_session_whose_worker_died(
    project: IthacaProject, task: str
) -> None:
    session_id = acquire(project)["session"]["id"]
    sql(project, "UPDATE delivery_sessions SET owner_pid = ?", dead_pid())
    assert ("LEASE_ORPHANED", session_id) in findings(project)

    done = repair(project)

    assert f"delivery: session {session_id} ended as crashed" in done
    status = sql(project, "SELECT status, close_reason FROM delivery_sessions")
    assert status == [("crashed", "crashed")]
    assert sql(project, "SELECT status FROM delivery_tasks") == [("pending",)]
    assert sql(project, "SELECT consecutive_failures FROM delivery_circuits") == [(1,)]
    assert ("LEASE_ORPHANED", session_id) not in findings(project)


def test_doctor_judges_an_interactive_session_only_by_its_lease(
    project: IthacaProject, task: str
) -> None:
    session_id = acquire(project)["session"]["id"]
    now = leases.now_ms()
    ttl = leases.DEFAULT_TTL_S
    sql(project, "UPDATE delivery_sessions SET lease_expires_at = ?", leases.stamp(now, -ttl))
    assert repair(project) == []  # expired once over: someone may still come back
    assert sql(project, "SELECT status FROM delivery_sessions") == [("running",)]

    sql(project, "UPDATE delivery_sessions SET lease_expires_at = ?", leases.stamp(now, -3 * ttl))
    assert ("LEASE_ORPHANED", session_id) in findings(project)
    repair(project)
    assert sql(project, "SELECT status FROM delivery_sessions") == [("crashed",)]


# --- doctor: what a crashed spawn left ----------------------------------------------------


def test_doctor_removes_worktrees_and_folders_no_session_owns(
    project: IthacaProject, task: str, project_dir: Path
) -> None:
    kept = acquire(project, worktree="create")["session"]
    stray = ids.new("ses")
    branch = worktrees.branch_name("T-1", stray)
    head = worktrees.main_head(project.project)
    path = worktrees.create(project.project, stray, branch, head, link=True)
    output = packets.output_folder(project.project, stray)
    os.makedirs(output)
    # Where a spawn before the work folder made its worktree, crashed there too.
    older = ids.new("ses")
    older_branch = worktrees.branch_name("T-1", older)
    older_path = worktrees.legacy_path_for(project.project, older)
    git(project_dir, "worktree", "add", "-q", "-b", older_branch, older_path, head)
    plan_worktree = worktrees.path_for(project.project, "plan-add-login")
    os.makedirs(plan_worktree)
    assert {
        ("WORKTREE_ORPHANED", f".ithaca-work/worktrees/{stray}"),
        ("SESSION_FOLDER_ORPHANED", f".ithaca-work/outputs/{stray}"),
        ("SESSION_FOLDER_ORPHANED", f".ithaca/.runtime/sessions/{stray}"),
        ("WORKTREE_ORPHANED", f".ithaca/.runtime/worktrees/{older}"),
    } <= findings(project)

    done = repair(project)

    assert f"delivery: removed .ithaca-work/worktrees/{stray}" in done
    assert f"delivery: removed .ithaca/.runtime/worktrees/{older}" in done
    assert not os.path.lexists(path) and not os.path.lexists(older_path)
    assert not os.path.exists(output)
    assert not os.path.exists(os.path.join(project.project.runtime, "sessions", stray))
    listed = git(project_dir, "branch", "--list", "--format=%(refname:short)", "ithaca/*")
    assert listed.split() == [kept["branch"]]
    assert stray not in git(project_dir, "worktree", "list")
    assert os.path.isdir(kept["worktree"]) and os.path.isdir(plan_worktree)
    assert os.path.isdir(packets.output_folder(project.project, kept["id"]))
    assert (Path(project.project.state_root) / "tasks").is_dir()  # the link went first
    assert not {code for code, _ in findings(project)} & {
        "WORKTREE_ORPHANED",
        "SESSION_FOLDER_ORPHANED",
    }


# --- archive and cancel wait for a run-plan at work ---------------------------------------


def open_run(project: IthacaProject, status: str, owner: int | None) -> None:
    sql(
        project,
        "INSERT INTO delivery_plan_runs (id, change_id, checkpoint_id, plan_digest, status,"
        " integration_branch, worktree_path, owner_pid, created_at, updated_at)"
        " VALUES ('run_1', 'add-login', 'cp-1', 'd', ?, 'ithaca/plan/add-login', 'w', ?, 'x', 'x')",
        status,
        owner,
    )


def archive(project: IthacaProject) -> dict[str, Any]:
    return project.delivery.archive(
        {
            "change_id": "add-login",
            "payload": {"summary": "done", "no_baseline_change_reason": "none"},
            "idempotency_key": f"arch-{next(_KEYS)}",
        }
    )


def test_archive_and_cancel_wait_for_a_run_plan_at_work(
    project: IthacaProject, task: str, record: Any
) -> None:
    open_run(project, "running", os.getpid())
    with pytest.raises(Conflict) as archiving:
        archive(project)
    assert archiving.value.code == "ARCHIVE_SESSIONS_RUNNING"
    assert archiving.value.details["plan_run_id"] == "run_1"
    with pytest.raises(Conflict) as cancelling:
        record("change_contract", "cancel", {"id": "add-login", "reason": "no longer needed"})
    assert cancelling.value.code == "SESSIONS_RUNNING"

    sql(project, "UPDATE delivery_plan_runs SET status = 'paused', owner_pid = NULL")
    assert archive(project)["change"]["status"] == "archived"


def test_a_run_whose_runner_died_holds_nothing_up(project: IthacaProject, task: str) -> None:
    open_run(project, "running", dead_pid())
    assert archive(project)["change"]["status"] == "archived"
