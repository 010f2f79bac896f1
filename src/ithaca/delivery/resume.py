"""What the delivery gate hands a session that starts or comes back from a compaction:
the summary of where delivery stands, rendered as the breadcrumb, and the PreCompact
snapshot a compacted session falls back on when the state database cannot be read.

Only SessionStart and PreCompact load this module: PreToolUse, which runs on every tool
call, needs none of it (``ithaca.delivery.gate`` has the events). The snapshot touches no
table: the file is written atomically by the kernel's file helper in the gate's commit,
and a failure surfaces as the dispatcher's commit error, which never blocks a
compaction. Standard library, the kernel, the breadcrumb renderer and ``sessions.leases``.
"""

from __future__ import annotations

import os

from ithaca.delivery import breadcrumb
from ithaca.kernel import lightjson
from ithaca.kernel.gates import ABSTAIN, GateContext, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

RECOVERY_FOLDER = "recovery"
STAGES = ("research", "plan", "dev", "test", "review", "deliver")
SNAPSHOT_NOTE = (
    "(From the snapshot taken before compaction: the state database could not be read;"
    " run `ithaca doctor`.)"
)

_CHANGE = (
    "SELECT id, kind, status FROM delivery_changes"
    " WHERE status IN ('active', 'blocked', 'ready')"
    " ORDER BY CASE status WHEN 'active' THEN 0 WHEN 'blocked' THEN 1 ELSE 2 END,"
    " updated_at DESC, rowid DESC LIMIT 1"
)
_TASK = (
    "SELECT id, json_extract(contract, '$.title'), status FROM delivery_tasks"
    " WHERE change_id = ? AND status IN ('in_progress', 'blocked', 'pending')"
    " ORDER BY CASE status WHEN 'in_progress' THEN 0 WHEN 'blocked' THEN 1 ELSE 2 END,"
    " updated_at DESC, rowid DESC LIMIT 1"
)
# The newest draft or accepted checkpoint of each stage; a draft without a revision of
# its own is shown as the revision it would become.
_CHECKPOINTS = (
    "SELECT stage, status, coalesce(revision, (SELECT max(prior.revision) + 1"
    " FROM delivery_checkpoints AS prior WHERE prior.stage = c.stage"
    " AND prior.scope_type = 'change' AND prior.scope_id = c.scope_id), 1)"
    " FROM delivery_checkpoints AS c WHERE scope_type = 'change' AND scope_id = ?"
    " AND status IN ('draft', 'accepted') ORDER BY updated_at, id"
)
# Decisions in force for the change: its own and the baseline's, not superseded.
_DECISIONS = (
    "SELECT status, count(*) FROM delivery_decisions AS d"
    " WHERE (scope_type = 'baseline' OR scope_id = ?)"
    " AND NOT EXISTS (SELECT 1 FROM delivery_decisions AS s WHERE s.supersedes_id = d.id)"
    " GROUP BY status"
)
_RECOVERY = "SELECT 1 FROM delivery_fs_intents WHERE status IN ('pending', 'committed') LIMIT 1"
_CIRCUIT = "SELECT open FROM delivery_circuits WHERE task_id = ?"
# A running session and the whole minutes left on its lease.
_LEASE_MINUTES = "CAST(max(0, julianday(lease_expires_at) - julianday(?)) * 1440 AS INTEGER)"
_TASK_SESSION = (
    f"SELECT id, {_LEASE_MINUTES} FROM delivery_sessions WHERE task_id = ? AND status = 'running'"
)
_LATEST_SESSION = (
    f"SELECT id, {_LEASE_MINUTES} FROM delivery_sessions WHERE status = 'running'"
    " ORDER BY updated_at DESC, id DESC LIMIT 1"
)


def snapshot_name(host_session_id: str) -> str:
    return f"precompact-{host_session_id}.json"


def read_summary(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The breadcrumb summary (see ``breadcrumb``), or None when there is no active work."""
    from ithaca.delivery.sessions import leases

    recovery_pending = conn.execute(_RECOVERY).fetchone() is not None
    row = conn.execute(_CHANGE).fetchone()
    now = leases.stamp(leases.now_ms())
    running = None if row is not None else conn.execute(_LATEST_SESSION, (now,)).fetchone()
    if row is None and not recovery_pending and running is None:
        return None
    attention = ["RECOVERY_PENDING"] if recovery_pending else []
    summary: dict[str, Any] = {
        "change": None,
        "task": None,
        "session": None,
        "checkpoints": [],
        "decisions": {"accepted": 0, "deferred": 0},
        "attention": attention,
    }
    if row is None:
        if running is not None:
            summary["session"] = {"id": running[0], "lease_minutes": running[1]}
        return summary
    change_id = row[0]
    summary["change"] = {"id": change_id, "kind": row[1], "status": row[2]}
    task = conn.execute(_TASK, (change_id,)).fetchone()
    if task is not None:
        summary["task"] = {"id": task[0], "title": task[1], "status": task[2]}
        session = conn.execute(_TASK_SESSION, (now, task[0])).fetchone()
        if session is not None:
            summary["session"] = {"id": session[0], "lease_minutes": session[1]}
        circuit = conn.execute(_CIRCUIT, (task[0],)).fetchone()
        if circuit is not None and circuit[0]:
            attention.append("CIRCUIT_OPEN")
    latest = {
        stage: (status, revision)
        for stage, status, revision in conn.execute(_CHECKPOINTS, (change_id,))
    }
    summary["checkpoints"] = [
        {"stage": stage, "revision": latest[stage][1], "status": latest[stage][0]}
        for stage in STAGES
        if stage in latest
    ]
    counts = dict(conn.execute(_DECISIONS, (change_id,)).fetchall())
    summary["decisions"] = {
        "accepted": counts.get("accepted", 0),
        "deferred": counts.get("deferred", 0),
    }
    if summary["decisions"]["deferred"]:
        attention.append("DECISION_DEFERRED")
    return summary


def session_start(ctx: GateContext) -> Opinion:
    try:
        if ctx.conn is None:
            raise LookupError("no state database")
        summary = read_summary(ctx.conn)
    except Exception:  # noqa: BLE001 - any unreadable state: the snapshot, else silence
        if ctx.payload.get("source") != "compact":
            return ABSTAIN
        return from_snapshot(ctx)
    if summary is None:
        return ABSTAIN
    return Opinion("allow", context=breadcrumb.render(summary))


def from_snapshot(ctx: GateContext) -> Opinion:
    if ctx.project is None or ctx.session_id is None:
        return ABSTAIN
    path = os.path.join(ctx.project.runtime, RECOVERY_FOLDER, snapshot_name(ctx.session_id))
    try:
        with open(path, encoding="utf-8") as handle:
            snapshot = lightjson.loads(handle.read())
    except (OSError, ValueError):
        return ABSTAIN
    text = snapshot.get("breadcrumb") if isinstance(snapshot, dict) else None
    if not isinstance(text, str) or snapshot.get("host_session_id") != ctx.session_id:
        return ABSTAIN
    return Opinion("allow", context=breadcrumb.with_note(text, SNAPSHOT_NOTE))


def snapshot(ctx: GateContext, acting: list[str]) -> dict[str, Any] | None:
    """What ``write_snapshot`` writes in the gate's commit, naming the first of the
    ``acting`` execution sessions; None when the host session or the state is unknown."""
    if ctx.session_id is None or ctx.conn is None:
        return None
    try:
        summary = read_summary(ctx.conn)
    except Exception:  # noqa: BLE001 - an unreadable store leaves the last snapshot alone
        return None
    change = (summary or {}).get("change") or {}
    task = (summary or {}).get("task") or {}
    return {
        "host_session_id": ctx.session_id,
        "change_id": change.get("id"),
        "task_id": task.get("id"),
        "session_id": acting[0] if acting else None,
        "envelope_digest": None,
        "breadcrumb": None if summary is None else breadcrumb.render(summary),
    }


def write_snapshot(runtime: str, snapshot: dict[str, Any]) -> None:
    """Write what ``snapshot`` prepared, where ``from_snapshot`` finds it."""
    from ithaca.kernel.files import write_atomic

    write_atomic(
        runtime,
        f"{RECOVERY_FOLDER}/{snapshot_name(snapshot['host_session_id'])}",
        lightjson.dumps(snapshot, sort_keys=True, ensure_ascii=False) + "\n",
        mode=0o600,
    )
