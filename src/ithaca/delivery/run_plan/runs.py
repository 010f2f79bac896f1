"""Plan runs: the durable progress of ``ithaca run-plan`` over one accepted plan
(docs/delivery.md, "ithaca run-plan").

A run is what makes run-plan resumable. It pins the accepted plan checkpoint it runs and
records, per task, where that task stands in the run (``pending``, ``running``,
``integrated`` into the integration branch, ``paused`` with the reason, ``skipped`` with
the reason). A change has at most one open run (``running`` or ``paused``): running the
command again resumes it, and a newer accepted plan supersedes it. A run whose owner (the
runner process) still lives is not taken from it: ``PLAN_RUN_ACTIVE``. A run stopped by a
signal (SIGINT, SIGTERM) is paused with the reason ``INTERRUPTED``, and so are the tasks
whose workers were stopped; it resumes like any paused run.

Every change here is one transaction with its journal event: ``plan_run_started``,
``plan_run_resumed``, ``plan_run_superseded``, ``plan_run_task`` (a task's state in the
run), ``wave_completed``, ``wave_paused`` with ``plan_paused``, ``plan_interrupted``,
``plan_completed``.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery import rows
from ithaca.delivery.units import owners as processes
from ithaca.kernel import clock, ids, journal
from ithaca.kernel.errors import Conflict
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

RUN_COLUMNS = (
    "id",
    "change_id",
    "checkpoint_id",
    "plan_digest",
    "status",
    "integration_branch",
    "worktree_path",
    "owner_pid",
    "owner_start",
    "pause_reason",
)
TASK_COLUMNS = ("run_id", "task_id", "wave", "status", "session_id", "reason", "exit_code")


def open_run(conn: sqlite3.Connection, change_id: str) -> Row | None:
    found = conn.execute(
        f"SELECT {', '.join(RUN_COLUMNS)} FROM delivery_plan_runs"
        " WHERE change_id = ? AND status IN ('running', 'paused')",
        (change_id,),
    ).fetchone()
    return rows.loaded(found, RUN_COLUMNS, ())


def run_tasks(conn: sqlite3.Connection, run_id: str) -> dict[str, Row]:
    found = conn.execute(
        f"SELECT {', '.join(TASK_COLUMNS)} FROM delivery_plan_run_tasks WHERE run_id = ?",
        (run_id,),
    ).fetchall()
    loaded = [rows.loaded(values, TASK_COLUMNS, ()) for values in found]
    return {row["task_id"]: row for row in loaded if row is not None}


def begin(
    store: Store,
    change_id: str,
    checkpoint: Row,
    document: dict[str, Any],
    branch: str,
    worktree: str,
) -> tuple[Row, str]:
    """The run to work on and how it was reached: ``started``, ``resumed``, or
    ``superseded`` (an older plan's open run gave way to a new one)."""
    pid, start = processes.current_owner()
    with store.write() as tx:
        current = open_run(tx, change_id)
        if current is not None and current["checkpoint_id"] == checkpoint["id"]:
            _require_unowned(current, pid)
            now = clock.now()
            tx.execute(
                "UPDATE delivery_plan_runs SET status = 'running', owner_pid = ?, owner_start = ?,"
                " pause_reason = NULL, updated_at = ? WHERE id = ?",
                (pid, start, now, current["id"]),
            )
            _event(tx, "delivery.plan_run_resumed", current["id"], {"change_id": change_id})
            return {**current, "status": "running", "owner_pid": pid, "owner_start": start}, (
                "resumed"
            )
        how = "started"
        if current is not None:
            _require_unowned(current, pid)
            tx.execute(
                "UPDATE delivery_plan_runs SET status = 'superseded', updated_at = ? WHERE id = ?",
                (clock.now(), current["id"]),
            )
            _event(
                tx,
                "delivery.plan_run_superseded",
                current["id"],
                {"change_id": change_id, "by_checkpoint": checkpoint["id"]},
            )
            how = "superseded"
        run: Row = {
            "id": ids.new("run"),
            "change_id": change_id,
            "checkpoint_id": checkpoint["id"],
            "plan_digest": document["digest"],
            "status": "running",
            "integration_branch": branch,
            "worktree_path": worktree,
            "owner_pid": pid,
            "owner_start": start,
            "pause_reason": None,
        }
        now = clock.now()
        tx.execute(
            f"INSERT INTO delivery_plan_runs ({', '.join(RUN_COLUMNS)}, created_at, updated_at)"
            f" VALUES ({', '.join('?' * (len(RUN_COLUMNS) + 2))})",
            (*rows.stored(run, RUN_COLUMNS, ()), now, now),
        )
        for wave in document["waves"]:
            for task_id in wave["tasks"]:
                tx.execute(
                    "INSERT INTO delivery_plan_run_tasks (run_id, task_id, wave, status,"
                    " updated_at) VALUES (?, ?, ?, 'pending', ?)",
                    (run["id"], task_id, wave["index"], now),
                )
        _event(
            tx,
            "delivery.plan_run_started",
            run["id"],
            {
                "change_id": change_id,
                "checkpoint_id": checkpoint["id"],
                "plan_digest": document["digest"],
                "integration_branch": branch,
            },
        )
        return run, how


def _require_unowned(run: Row, pid: int) -> None:
    owner = run["owner_pid"]
    live = owner not in (None, pid) and processes.is_alive(owner, run["owner_start"])
    if run["status"] == "running" and live:
        raise Conflict(
            "PLAN_RUN_ACTIVE",
            f"run-plan is already running change {run['change_id']} (pid {owner})",
            {"run_id": run["id"], "owner_pid": owner},
        )


def mark_task(
    store: Store,
    run_id: str,
    task_id: str,
    status: str,
    *,
    session_id: str | None = None,
    reason: str | None = None,
    exit_code: int | None = None,
    worker: tuple[int, str | None] | None = None,
) -> int:
    """Record where a task stands in the run; ``worker`` (pid, start) becomes the owner
    of its session, so recovery can tell whether the worker still lives."""
    with store.write() as tx:
        tx.execute(
            "UPDATE delivery_plan_run_tasks SET status = ?, session_id = coalesce(?, session_id),"
            " reason = ?, exit_code = ?, updated_at = ? WHERE run_id = ? AND task_id = ?",
            (status, session_id, reason, exit_code, clock.now(), run_id, task_id),
        )
        if worker is not None and session_id is not None:
            tx.execute(
                "UPDATE delivery_sessions SET owner_pid = ?, owner_start = ?, updated_at = ?"
                " WHERE id = ?",
                (worker[0], worker[1], clock.now(), session_id),
            )
        return _event(
            tx,
            "delivery.plan_run_task",
            run_id,
            {
                "task_id": task_id,
                "status": status,
                "session_id": session_id,
                "reason": reason,
                "exit_code": exit_code,
                "worker_pid": None if worker is None else worker[0],
            },
        )


def wave_completed(store: Store, run: Row, wave: int) -> int:
    with store.write() as tx:
        return _event(tx, "delivery.wave_completed", run["id"], {"wave": wave})


def pause(store: Store, run: Row, wave: int, reason: str, details: dict[str, Any]) -> int:
    """The wave and the run pause; later waves stay pending until the next run-plan."""
    with store.write() as tx:
        tx.execute(
            "UPDATE delivery_plan_runs SET status = 'paused', pause_reason = ?, updated_at = ?"
            " WHERE id = ?",
            (reason, clock.now(), run["id"]),
        )
        _event(tx, "delivery.wave_paused", run["id"], {"wave": wave, "reason": reason, **details})
        return _event(tx, "delivery.plan_paused", run["id"], {"wave": wave, "reason": reason})


def interrupt(
    store: Store, run: Row, wave: int, signal_name: str, stopped: list[str], resume: str
) -> int:
    """A stop signal ended the run: the run and the tasks whose workers were stopped are
    paused (``INTERRUPTED``), with one ``plan_interrupted`` event saying how to resume."""
    with store.write() as tx:
        now = clock.now()
        tx.execute(
            "UPDATE delivery_plan_runs SET status = 'paused', pause_reason = 'INTERRUPTED',"
            " updated_at = ? WHERE id = ?",
            (now, run["id"]),
        )
        tx.executemany(
            "UPDATE delivery_plan_run_tasks SET status = 'paused', reason = 'INTERRUPTED',"
            " updated_at = ? WHERE run_id = ? AND task_id = ? AND status = 'running'",
            [(now, run["id"], task_id) for task_id in stopped],
        )
        return _event(
            tx,
            "delivery.plan_interrupted",
            run["id"],
            {
                "change_id": run["change_id"],
                "wave": wave,
                "signal": signal_name,
                "stopped": stopped,
                "resume": resume,
            },
        )


def complete(store: Store, run: Row) -> int:
    with store.write() as tx:
        tx.execute(
            "UPDATE delivery_plan_runs SET status = 'completed', pause_reason = NULL,"
            " updated_at = ? WHERE id = ?",
            (clock.now(), run["id"]),
        )
        return _event(tx, "delivery.plan_completed", run["id"], {"change_id": run["change_id"]})


def _event(tx: sqlite3.Connection, kind: str, run_id: str, payload: dict[str, Any]) -> int:
    return journal.append(
        tx, actor="system", kind=kind, subject=run_id, payload={"run_id": run_id, **payload}
    )
