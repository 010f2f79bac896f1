"""``session close`` and the circuit breaker
(docs/delivery.md, "Execution: session and Worker Packets").

Closing ends a running session: ``completed`` when its task is, else with the given
reason (``abandoned`` by default, ``failed``; ``crashed`` from recovery and run-plan),
and the task goes back to ``pending`` unless it is blocked or completed. Its packet is
no longer assigned and its write allowances go, in the same transaction.

Failures count: a ``failed`` or ``crashed`` close adds one to the task's consecutive
failures, and the third opens its circuit, so admission refuses the task
(``CIRCUIT_OPEN``) until its contract is revised, it completes, or the user resets the
circuit. An abandoned session is not a failure.

A session a run-plan started is the runner's to close (or the user's):
``SESSION_PARENT_OWNED`` otherwise. The worktree is removed only when asked, clean, and
its HEAD already merged into the target (the main HEAD, or the run's integration
branch); otherwise it stays and the answer says why (``WORKTREE_PRESERVED``). Removal is
Git work, so it happens after the commit. Closing a session that already ended changes
nothing (a completed one may still have its worktree removed); closing one that was
taken over is ``LEASE_LOST``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.idempotency import Guard, Replayed
from ithaca.delivery.records import tasks
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.sessions import worktrees
from ithaca.delivery.units.plans import Stale
from ithaca.kernel import clock, journal
from ithaca.kernel.errors import Conflict, Refused
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

REASONS = ("failed", "abandoned")
COUNTED = ("failed", "crashed")
MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class CloseRequest:
    session_id: str
    reason: str = "abandoned"
    remove_worktree: bool = False
    # The run-plan runner closing a session it started, and the branch its work merges into.
    by_run: bool = False
    target: str | None = None
    actor: str = "agent"


def close_session(
    project: Project, store: Store, request: CloseRequest, guard: Guard | None
) -> tuple[dict[str, Any], bool]:
    """``(answer, replayed)``; the answer is ``{session, task, circuit, worktree,
    diagnostics, journal_seq}``."""
    for _ in range(MAX_ATTEMPTS):
        try:
            with store.read() as conn:
                if guard is not None:
                    guard.check(conn)
                row = sessions_rows.load(conn, request.session_id)
                _require_closable(row, request)
            keep = _worktree_verdict(project, row, request)
            with store.write() as tx:
                answer = _commit(tx, row, request, keep, guard)
            return _remove_worktree(project, row, keep, answer), False
        except Replayed as replay:
            return replay.stored, True
        except Stale:
            continue
    raise Conflict(
        "STORE_BUSY",
        f"closing {request.session_id} kept being overtaken by other writers; try again",
        {"session_id": request.session_id},
    )


def _require_closable(row: Row, request: CloseRequest) -> None:
    if row["status"] == "taken_over":
        raise sessions_rows.lease_lost(row)
    if row["plan_run_id"] is not None and not request.by_run and request.actor != "user":
        raise Refused(
            "SESSION_PARENT_OWNED",
            f"session {row['id']} belongs to run-plan {row['plan_run_id']}; the runner (or the"
            " user) closes it",
            {"session_id": row["id"], "plan_run_id": row["plan_run_id"]},
        )


def _worktree_verdict(project: Project, row: Row, request: CloseRequest) -> str | None:
    """None to remove the worktree; else why it stays (``kept`` when not asked)."""
    if row["worktree_path"] is None:
        return "none"
    if not request.remove_worktree:
        return "kept"
    target = request.target or worktrees.head(project.root) or "HEAD"
    return worktrees.preserved_reason(row["worktree_path"], target)


def _commit(
    tx: sqlite3.Connection,
    row: Row,
    request: CloseRequest,
    keep: str | None,
    guard: Guard | None,
) -> dict[str, Any]:
    if guard is not None:
        guard.check(tx)
    task = tasks.load(tx, row["task_id"])
    notes = _worktree_notes(row, keep)
    if row["status"] != "running":
        answer = _answer(row, task, sessions_rows.circuit(tx, task["id"]), keep, notes, None)
        answer["unchanged"] = True
    else:
        if not sessions_rows.unchanged_since(tx, row):
            raise Stale(row["id"])
        seq = end_session(tx, row, task, request.reason, request.actor)
        ended = sessions_rows.load(tx, row["id"])
        task = tasks.load(tx, row["task_id"])
        answer = _answer(ended, task, sessions_rows.circuit(tx, task["id"]), keep, notes, seq)
    if guard is not None:
        guard.seal(tx, answer)
    return answer


def end_session(tx: sqlite3.Connection, row: Row, task: Row, reason: str, actor: str) -> int:
    """End the running session ``row`` inside the caller's transaction: its status, its
    task's status, the circuit; returns the last journal seq."""
    status = "completed" if task["status"] == "completed" else reason
    sessions_rows.end(tx, row, status, reason)
    task_status = task["status"]
    if task["status"] == "in_progress":
        tasks.require_transition(task, "pending")
        tx.execute(
            "UPDATE delivery_tasks SET status = 'pending', updated_at = ? WHERE id = ?",
            (clock.now(), task["id"]),
        )
        task_status = "pending"
    seq = journal.append(
        tx,
        actor=actor,
        kind="delivery.session_closed",
        subject=row["id"],
        payload={
            "session_id": row["id"],
            "task_id": task["id"],
            "status": status,
            "reason": reason,
            "task_status": task_status,
        },
    )
    if status in COUNTED:
        seq = sessions_rows.count_failure(tx, task["id"], actor) or seq
    return seq


def _worktree_notes(row: Row, keep: str | None) -> list[Diagnostic]:
    if keep not in ("dirty", "not_integrated"):
        return []
    why = "has uncommitted changes" if keep == "dirty" else "holds commits not yet merged"
    return [
        diagnostic(
            "WORKTREE_PRESERVED",
            "warning",
            f"{row['worktree_path']} {why}, so it was kept ({keep})",
            row["id"],
        )
    ]


def _answer(
    row: Row,
    task: Row,
    circuit: dict[str, Any],
    keep: str | None,
    notes: list[Diagnostic],
    seq: int | None,
) -> dict[str, Any]:
    worktree = None
    if row["worktree_path"] is not None:
        worktree = {"path": row["worktree_path"], "removed": keep is None}
        if keep is not None:
            worktree["preserved"] = keep
    return {
        "session": sessions_rows.view(row),
        "task": {"id": task["id"], "status": task["status"]},
        "circuit": circuit,
        "worktree": worktree,
        "diagnostics": notes,
        "journal_seq": seq,
    }


def _remove_worktree(
    project: Project, row: Row, keep: str | None, answer: dict[str, Any]
) -> dict[str, Any]:
    """After the commit: remove the worktree the verdict let go; a Git failure keeps it."""
    if keep is not None or row["worktree_path"] is None:
        return answer
    try:
        worktrees.remove(project, row["worktree_path"], row["branch"])
    except (worktrees.GitFailed, OSError) as exc:
        answer["worktree"] = {"path": row["worktree_path"], "removed": False, "error": str(exc)}
    return answer


def reset_circuit(store: Store, task_id: str) -> dict[str, Any]:
    """The user's ``session reset-circuit``: the task may be admitted again."""
    with store.write() as tx:
        task = tasks.load(tx, task_id)
        reset = sessions_rows.reset_circuit(tx, task["id"])
        seq = None
        if reset:
            seq = journal.append(
                tx,
                actor="user",
                kind="delivery.circuit_reset",
                subject=task["id"],
                payload={"task_id": task["id"], "by": "user"},
            )
        circuit = sessions_rows.circuit(tx, task["id"])
    return {"task_id": task["id"], "circuit": circuit, "reset": reset, "journal_seq": seq}
