"""Which scope a Context Envelope describes (docs/delivery.md, "context").

The order is fixed so that an agent asking "what am I working on?" without naming
anything gets the same answer every time: a named task (its change must agree, else
``SCOPE_MISMATCH``), a named change, the task of the acting execution session (which
``context.execution.acting`` finds; only the ``context`` tool passes it, so envelopes
stored as snapshots never depend on the process asking), the latest change by status
(active, then blocked, then ready) with its latest task by status (in progress, then
blocked, then pending), the baseline when one exists, else the bare project. "Latest"
is the most recently updated row; ties fall to the larger id, so the choice never
depends on row order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ithaca.delivery.records import changes, tasks
from ithaca.kernel.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

_CHANGE_ORDER = (
    "SELECT id FROM delivery_changes WHERE status IN ('active', 'blocked', 'ready')"
    " ORDER BY CASE status WHEN 'active' THEN 0 WHEN 'blocked' THEN 1 ELSE 2 END,"
    " updated_at DESC, rowid DESC LIMIT 1"
)
_TASK_ORDER = (
    "SELECT id FROM delivery_tasks WHERE change_id = ?"
    " AND status IN ('in_progress', 'blocked', 'pending')"
    " ORDER BY CASE status WHEN 'in_progress' THEN 0 WHEN 'blocked' THEN 1 ELSE 2 END,"
    " updated_at DESC, rowid DESC LIMIT 1"
)


@dataclass(frozen=True)
class Scope:
    """The resolved scope: its type, the change and task rows, and how it was chosen."""

    type: str
    change: Row | None
    task: Row | None
    resolved_by: str

    def view(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "change_id": None if self.change is None else self.change["id"],
            "task_id": None if self.task is None else self.task["id"],
            "resolved_by": self.resolved_by,
        }


def resolve(conn: sqlite3.Connection, asked: dict[str, Any], acting: Row | None = None) -> Scope:
    """The scope for the request's ``scope`` object (``{change_id?, task_id?}``), falling
    back to the task of the ``acting`` session row when it names neither."""
    task_id, change_id = asked.get("task_id"), asked.get("change_id")
    if task_id is not None:
        task = tasks.load(conn, task_id)
        if change_id is not None and task["change_id"] != change_id:
            raise InvalidInput(
                "SCOPE_MISMATCH",
                f"task {task_id} belongs to change {task['change_id']}, not {change_id}",
                {"task_id": task_id, "change_id": change_id, "task_change": task["change_id"]},
            )
        change = None if task["change_id"] is None else changes.load(conn, task["change_id"])
        return Scope("task", change, task, "task_id")
    if change_id is not None:
        return Scope("change", changes.load(conn, change_id), None, "change_id")
    if acting is not None:
        task = tasks.load(conn, acting["task_id"])
        change = None if task["change_id"] is None else changes.load(conn, task["change_id"])
        return Scope("task", change, task, "session")
    latest = conn.execute(_CHANGE_ORDER).fetchone()
    if latest is not None:
        change = changes.load(conn, latest[0])
        task_row = conn.execute(_TASK_ORDER, (change["id"],)).fetchone()
        if task_row is None:
            return Scope("change", change, None, "latest")
        return Scope("task", change, tasks.load(conn, task_row[0]), "latest")
    if conn.execute("SELECT 1 FROM delivery_baselines LIMIT 1").fetchone() is not None:
        return Scope("baseline", None, None, "baseline")
    return Scope("project", None, None, "project")
