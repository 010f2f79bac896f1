"""A checkpoint's scope: the baseline, the project, a change or a task, found to exist.

Acceptance's first step: the scope must exist, and a task named with a change must lie
inside it (``CHECKPOINT_SCOPE_MISMATCH``). A task's change, given or not, is the one a
checkpoint on the task belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ithaca.delivery.records import changes, tasks
from ithaca.kernel.errors import InvalidInput, NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]


@dataclass(frozen=True)
class Scope:
    """A resolved scope: its type and id, with the change and task rows it lies in."""

    type: str
    id: str | None
    change: Row | None
    task: Row | None

    def envelope_scope(self) -> dict[str, str]:
        """The scope a context envelope is built for."""
        found = {}
        if self.change is not None:
            found["change_id"] = self.change["id"]
        if self.task is not None:
            found["task_id"] = self.task["id"]
        return found


def resolve(conn: sqlite3.Connection, given: dict[str, Any]) -> Scope:
    """The request's ``scope`` found in the store, or why it cannot be."""
    if given.get("baseline"):
        if conn.execute("SELECT 1 FROM delivery_baselines LIMIT 1").fetchone() is None:
            raise _scope_not_found("baseline", "there is no baseline yet; initialize one first")
        return Scope("baseline", None, None, None)
    change = None
    if "change_id" in given:
        if changes.find(conn, given["change_id"]) is None:
            raise _scope_not_found(given["change_id"], f"no change {given['change_id']}")
        change = changes.writable(conn, given["change_id"])
    if "task_id" not in given:
        if change is None:
            return Scope("project", None, None, None)
        return Scope("change", change["id"], change, None)
    task = tasks.find(conn, given["task_id"])
    if task is None:
        raise _scope_not_found(given["task_id"], f"no task {given['task_id']}")
    if change is not None and task["change_id"] != change["id"]:
        raise InvalidInput(
            "CHECKPOINT_SCOPE_MISMATCH",
            f"task {task['id']} does not belong to change {change['id']}",
            {"task_id": task["id"], "change_id": change["id"], "task_change": task["change_id"]},
        )
    if change is None and task["change_id"] is not None:
        change = changes.writable(conn, task["change_id"])
    return Scope("task", task["id"], change, task)


def _scope_not_found(subject: str, message: str) -> NotFound:
    return NotFound("CHECKPOINT_SCOPE_NOT_FOUND", message, {"scope": subject})
