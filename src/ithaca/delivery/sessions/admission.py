"""Admission: may this caller work on this task now, and how?

The verdict keeps two agents from silently writing the same task. The first rule that
matches wins (docs/delivery.md, "Execution: session and Worker Packets"):

1. no running session for the task → ``spawn`` a new one;
2. the caller's host session owns the running one → ``resume`` it;
3. the caller names the running session and its last heartbeat is over 120 s old (its
   owner went quiet: a restarted host, a new chat) → ``resume`` it;
4. its lease has expired → ``takeover`` (the new session adopts the worktree);
5. otherwise ``abandon``: someone is working on it; do not proceed.

Blockers make an acquire fail whatever the verdict (an unknown task, a task that cannot
run, an open circuit, no usable Git); warnings never do (unfinished dependencies, a plan
that pinned an older contract, a blocked task being picked up again). Admission only
reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.records import changes, tasks
from ithaca.delivery.sessions import leases
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.units import registry
from ithaca.kernel.errors import IthacaError, NotFound, Refused
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

EXECUTABLE = ("pending", "in_progress", "blocked")


@dataclass(frozen=True)
class Caller:
    """Who asks: their host session (from the hook-filled ``session`` field or the
    environment), and the execution session they name, if any."""

    host_session_id: str | None = None
    named_session_id: str | None = None


@dataclass
class Admission:
    verdict: str
    task: Row | None
    change: Row | None
    running: Row | None
    blockers: list[IthacaError] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)

    def view(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "verdict": self.verdict,
            "blockers": [{"code": error.code, "message": error.message} for error in self.blockers],
            "warnings": self.warnings,
        }
        if self.running is not None:
            found["session"] = sessions_rows.view(self.running)
        return found

    def require_clear(self) -> None:
        """Raise the first blocker, if any."""
        if self.blockers:
            raise self.blockers[0]


def admit(
    conn: sqlite3.Connection,
    project: Project,
    task_id: str,
    caller: Caller,
    at_ms: int,
    *,
    git_ready: bool,
) -> Admission:
    """The verdict for ``caller`` on ``task_id``; ``git_ready`` is False when the caller
    wants a worktree and Git cannot make one."""
    task = tasks.find(conn, task_id)
    if task is None:
        missing = NotFound("TASK_NOT_FOUND", f"no task {task_id}", {"task_id": task_id})
        return Admission("spawn", None, None, None, [missing])
    change = None if task["change_id"] is None else changes.find(conn, task["change_id"])
    running = sessions_rows.running_for_task(conn, task_id)
    admission = Admission(_verdict(running, caller, at_ms), task, change, running)
    admission.blockers = _blockers(conn, task, change, git_ready)
    admission.warnings = _warnings(conn, project, task, change)
    return admission


def _verdict(running: Row | None, caller: Caller, at_ms: int) -> str:
    if running is None:
        return "spawn"
    if caller.host_session_id is not None and running["host_session_id"] == caller.host_session_id:
        return "resume"
    if caller.named_session_id == running["id"] and leases.heartbeat_older_than(
        running["heartbeat_at"], leases.STALE_HEARTBEAT_S, at_ms
    ):
        return "resume"
    if leases.expired(running["lease_expires_at"], at_ms):
        return "takeover"
    return "abandon"


def _blockers(
    conn: sqlite3.Connection, task: Row, change: Row | None, git_ready: bool
) -> list[IthacaError]:
    found: list[IthacaError] = []
    if task["status"] not in EXECUTABLE:
        found.append(_not_executable(task, f"task {task['id']} is {task['status']}"))
    if change is not None and change["status"] in ("archived", "cancelled"):
        found.append(_not_executable(task, f"its change {change['id']} is {change['status']}"))
    circuit = sessions_rows.circuit(conn, task["id"])
    if circuit["open"]:
        found.append(
            Refused(
                "CIRCUIT_OPEN",
                f"task {task['id']} failed {circuit['consecutive_failures']} times in a row;"
                " revise its contract, or ask the user to run `ithaca session reset-circuit`",
                {"task_id": task["id"], **circuit},
            )
        )
    if not git_ready:
        found.append(
            Refused(
                "GIT_PREREQUISITE_MISSING",
                "a session worktree needs Git 2.36 or newer; acquire with worktree none",
                {"task_id": task["id"]},
            )
        )
    return found


def _not_executable(task: Row, why: str) -> Refused:
    return Refused(
        "TASK_NOT_EXECUTABLE",
        f"{why}; no session can work on it",
        {"task_id": task["id"], "status": task["status"]},
    )


def _warnings(
    conn: sqlite3.Connection, project: Project, task: Row, change: Row | None
) -> list[Diagnostic]:
    found = []
    waiting = [
        dep
        for dep in task["contract"]["deps"]
        if (dep_row := tasks.find(conn, dep)) is None or dep_row["status"] != "completed"
    ]
    if waiting:
        found.append(
            diagnostic(
                "TASK_DEPENDENCIES_INCOMPLETE",
                "warning",
                f"task {task['id']} depends on unfinished tasks: {', '.join(waiting)}",
                task["id"],
            )
        )
    planned = None if change is None else planned_digest(conn, project, change["id"], task["id"])
    if planned is not None and planned != task["contract_digest"]:
        found.append(
            diagnostic(
                "PLAN_TASK_CONTRACT_STALE",
                "warning",
                f"the accepted plan pinned another contract of task {task['id']}; accept a new"
                " plan checkpoint",
                task["id"],
            )
        )
    if task["status"] == "blocked":
        found.append(
            diagnostic("TASK_WAS_BLOCKED", "warning", f"task {task['id']} was blocked", task["id"])
        )
    return found


def planned_digest(
    conn: sqlite3.Connection, project: Project, change_id: str, task_id: str
) -> str | None:
    """The contract digest the change's plan.json pinned for the task, if it lists it."""
    document = plan_document(conn, project, change_id)
    if document is None:
        return None
    for listed in document.get("tasks", []):
        if listed.get("id") == task_id:
            return str(listed.get("contract_digest"))
    return None


def plan_document(
    conn: sqlite3.Connection, project: Project, change_id: str
) -> dict[str, Any] | None:
    """The change's plan.json as registered (its bytes verified), None without one."""
    path = f"{layout.change_folder(change_id)}/plan.json"
    known = registry.lookup(conn, path)
    if known is None:
        return None
    data = registry.read_verified(
        project.state_root, path, known["digest"], "ARTIFACT_DIGEST_MISMATCH"
    )
    found: dict[str, Any] = json.loads(data)
    return found
