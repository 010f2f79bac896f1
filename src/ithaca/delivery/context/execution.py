"""The ``execution`` section of a Context Envelope: the acting session and its packet
(docs/delivery.md, "context").

The acting session is the execution session this process works for:
``ITHACA_DELIVERY_SESSION`` (set for a run-plan worker, or by hand), else the running
session bound to the host session in ``ITHACA_SESSION_ID`` (the newest, should there be
several). When nothing names one, the section shows the session running the scoped
task, so an agent sees that someone holds it. The acting session's task also becomes
the scope when the request names none (``resolved_by: session``).

This section is the checkout's runtime, not the team's authority: a lease moves with
every heartbeat, and which session acts depends on the asking process. So it stays out
of the envelope's digest, like its time: the same authority keeps the same digest, and
its cursors stay valid, while leases are renewed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ithaca.delivery.context.scope import Scope
from ithaca.delivery.sessions import packets
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.sessions.env import SESSION_VARIABLE
from ithaca.kernel import ids
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

HOST_SESSION_VARIABLE = "ITHACA_SESSION_ID"
_BOUND = (
    "SELECT id FROM delivery_sessions WHERE host_session_id = ? AND status = 'running'"
    " ORDER BY updated_at DESC, id DESC LIMIT 1"
)


def acting(conn: sqlite3.Connection, environ: Mapping[str, str] = os.environ) -> Row | None:
    """The session row this process acts for, None when the environment names none."""
    named = environ.get(SESSION_VARIABLE)
    if named is not None and ids.matches("ses", named):
        return sessions_rows.find(conn, named)
    host = environ.get(HOST_SESSION_VARIABLE)
    if not ids.is_session_id(host):
        return None
    bound = conn.execute(_BOUND, (host,)).fetchone()
    return None if bound is None else sessions_rows.find(conn, bound[0])


def section(
    project: Project, conn: sqlite3.Connection, acting_row: Row | None, scope: Scope
) -> dict[str, Any]:
    """``{session, worker_packet}`` for the acting session, else the scoped task's."""
    row = acting_row
    if row is None and scope.task is not None:
        row = sessions_rows.running_for_task(conn, scope.task["id"])
    if row is None:
        return {"session": None, "worker_packet": None}
    session = {
        "id": row["id"],
        "task_id": row["task_id"],
        "status": row["status"],
        "acting": acting_row is not None,
        "lease_expires_at": row["lease_expires_at"],
        "worktree": row["worktree_path"],
    }
    packet = sessions_rows.packet(conn, row["packet_id"])
    if packet is None:
        return {"session": session, "worker_packet": None}
    return {
        "session": session,
        "worker_packet": {
            "id": packet["id"],
            "digest": packet["digest"],
            "status": packet["status"],
            "path": packets.packet_path(project, row["id"]),
            "output_path": packet["output_path"],
        },
    }
