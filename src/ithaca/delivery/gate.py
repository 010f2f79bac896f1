"""Delivery inside host hooks (reference §12): breadcrumb, compaction snapshot, managed files.

SessionStart: when there is active work (an open change, a running execution session, or
a file intent waiting for recovery) the agent gets a short breadcrumb naming the change,
its current task and that task's session with the minutes left on its lease, the latest
checkpoint of each stage, the decisions and what needs attention. A compacted
session whose state database cannot be read falls back to the snapshot its PreCompact
hook left.

PreCompact: the breadcrumb, with the change and task it names, is written to
``.runtime/recovery/precompact-<host session>.json``. Deciding never writes: the file is
written in the dispatcher's commit phase (``commit``).

PreToolUse: for delivery's managed files, which file a call would change and which tool
changes it (``ithaca.delivery.managed_files``).

PreToolUse also keeps each execution session's places its own: a write into the work
folder ``.ithaca-work/`` outside the places of the sessions acting for this call (below)
is ``SESSION_WRITE_DENIED`` (``ithaca.delivery.sessions.places``). The same ownership
holds for the allowances the kernel guard honours under ``.ithaca/`` (the places of
sessions from before the work folder): this gate registers ``acting_holders`` with
``ithaca.kernel.allowances``, and the guard counts a ``delivery:<sid>`` allowance only
when ``<sid>`` acts for the call. The kernel asks through that registry and never
imports delivery; the dispatcher imports every gate before it asks any, so the
registration is in place.

PostToolUse and Stop (and PreCompact): the acting execution session's lease is renewed
(``leases.renew``), at most once a minute, so an interactive session that keeps working
keeps its task past the 30-minute TTL. The acting sessions are the one named by
``ITHACA_DELIVERY_SESSION`` in the hook's environment, else the running sessions bound to
the hook's host session, else the one whose worktree holds ``cwd``. After an Ithaca
``session acquire`` (the MCP tool, or ``ithaca session acquire``) whose answer names a
running session no host session owns yet, that session is bound to this host session
first. Both writes happen in ``commit``, inside the dispatcher's transaction but under
their own savepoint: a failure is reported on standard error and never changes the
host's flow or the other gates' writes.

Reads are SQL with ``json_extract``; the module imports only the standard library, the
kernel, ``managed_files``, ``sessions.places``, the standard-library-only breadcrumb
renderer and ``leases``.
"""

from __future__ import annotations

import os
import sys

from ithaca.kernel import allowances, ids
from ithaca.kernel.gates import ABSTAIN, GateContext, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from types import ModuleType
    from typing import Any

    from ithaca.kernel.call import Call

EVENTS = ("SessionStart", "PreCompact", "PreToolUse", "PostToolUse", "Stop")
HEARTBEAT_EVENTS = ("PreCompact", "PostToolUse", "Stop")
SESSION_VARIABLE = "ITHACA_DELIVERY_SESSION"
SESSION_PREFIX = "ses_"
SESSION_ID_LENGTH = len(SESSION_PREFIX) + 26  # a prefix and a ULID (kernel.ids)
NAME = "delivery"
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
_RUNNING = "SELECT 1 FROM delivery_sessions WHERE id = ? AND status = 'running'"
_BOUND = (
    "SELECT id FROM delivery_sessions WHERE host_session_id = ? AND status = 'running' ORDER BY id"
)
_WORKTREES = (
    "SELECT id, worktree_path FROM delivery_sessions"
    " WHERE status = 'running' AND worktree_path IS NOT NULL ORDER BY id"
)
_UNBOUND = (
    "SELECT 1 FROM delivery_sessions WHERE id = ? AND status = 'running'"
    " AND host_session_id IS NULL"
)
_BIND = (
    "UPDATE delivery_sessions SET host_session_id = ?, updated_at = ?"
    " WHERE id = ? AND status = 'running' AND host_session_id IS NULL"
)


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if ctx.project is None:
        return ABSTAIN
    if ctx.event == "SessionStart":
        return _session_start(ctx)
    if ctx.event == "PreToolUse" and call is not None:
        return _judge_writes(call, ctx)
    if ctx.event == "PreCompact":
        _prepare_snapshot(ctx)
    if ctx.event in HEARTBEAT_EVENTS and ctx.conn is not None:
        _prepare_heartbeat(ctx)
    return ABSTAIN


def _judge_writes(call: Call, ctx: GateContext) -> Opinion:
    """A call's writes into the work folder and into managed files; each check is loaded
    only for the calls it can concern (every import costs every hook call)."""
    if call.write_targets:
        from ithaca.delivery.sessions import places

        denied = places.judge(call, ctx)
        if denied is not None:
            return denied
    if call.tool_class not in ("edit", "shell"):
        return ABSTAIN
    from ithaca.delivery import managed_files

    return managed_files.judge(call, ctx)


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    """Bind and heartbeat what ``decide`` found, then write the PreCompact snapshot.

    The snapshot touches no table: the file is written atomically by the kernel's file
    helper, and a failure surfaces as the dispatcher's commit error, which never blocks
    a compaction.
    """
    prepared = ctx.scratch.get(NAME) or {}
    if ctx.conn is not None and (prepared.get("heartbeat") or prepared.get("bind")):
        _renew(ctx, ctx.conn, prepared.get("bind", []), prepared.get("heartbeat", []))
    snapshot = prepared.get("snapshot")
    if ctx.event != "PreCompact" or snapshot is None or ctx.project is None:
        return None
    from ithaca.kernel.files import write_atomic

    write_atomic(
        ctx.project.runtime,
        f"{RECOVERY_FOLDER}/{snapshot_name(snapshot['host_session_id'])}",
        _json().dumps(snapshot, sort_keys=True, ensure_ascii=False) + "\n",
        mode=0o600,
    )
    return None


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


def _session_start(ctx: GateContext) -> Opinion:
    try:
        if ctx.conn is None:
            raise LookupError("no state database")
        summary = read_summary(ctx.conn)
    except Exception:  # noqa: BLE001 - any unreadable state: the snapshot, else silence
        if ctx.payload.get("source") != "compact":
            return ABSTAIN
        return _from_snapshot(ctx)
    if summary is None:
        return ABSTAIN
    return Opinion("allow", context=_breadcrumb().render(summary))


def _from_snapshot(ctx: GateContext) -> Opinion:
    if ctx.project is None or ctx.session_id is None:
        return ABSTAIN
    path = os.path.join(ctx.project.runtime, RECOVERY_FOLDER, snapshot_name(ctx.session_id))
    try:
        with open(path, encoding="utf-8") as handle:
            snapshot = _json().loads(handle.read())
    except (OSError, ValueError):
        return ABSTAIN
    text = snapshot.get("breadcrumb") if isinstance(snapshot, dict) else None
    if not isinstance(text, str) or snapshot.get("host_session_id") != ctx.session_id:
        return ABSTAIN
    return Opinion("allow", context=_breadcrumb().with_note(text, SNAPSHOT_NOTE))


def _prepare_snapshot(ctx: GateContext) -> None:
    """What ``commit`` writes; nothing when the host session or the state is unknown."""
    if ctx.session_id is None or ctx.conn is None:
        return
    try:
        summary = read_summary(ctx.conn)
    except Exception:  # noqa: BLE001 - an unreadable store leaves the last snapshot alone
        return
    change = (summary or {}).get("change") or {}
    task = (summary or {}).get("task") or {}
    acting = _acting_sessions(ctx, ctx.conn)
    ctx.scratch.setdefault(NAME, {})["snapshot"] = {
        "host_session_id": ctx.session_id,
        "change_id": change.get("id"),
        "task_id": task.get("id"),
        "session_id": acting[0] if acting else None,
        "envelope_digest": None,
        "breadcrumb": None if summary is None else _breadcrumb().render(summary),
    }


# ---- leases --------------------------------------------------------------------------


def _prepare_heartbeat(ctx: GateContext) -> None:
    """Which sessions ``commit`` binds to this host session and heartbeats."""
    assert ctx.conn is not None
    bind = [
        session_id
        for session_id in _acquired_sessions(ctx)
        if ctx.session_id and ctx.conn.execute(_UNBOUND, (session_id,)).fetchone()
    ]
    acting = _acting_sessions(ctx, ctx.conn)
    prepared = ctx.scratch.setdefault(NAME, {})
    prepared["bind"] = bind
    prepared["heartbeat"] = acting + [found for found in bind if found not in acting]


def _acting_sessions(ctx: GateContext, conn: sqlite3.Connection) -> list[str]:
    """The execution sessions this hook call acts for (see the module docstring)."""
    named = os.environ.get(SESSION_VARIABLE, "")
    if ids.matches("ses", named) and conn.execute(_RUNNING, (named,)).fetchone():
        return [named]
    if ctx.session_id:
        bound = [row[0] for row in conn.execute(_BOUND, (ctx.session_id,))]
        if bound:
            return bound
    cwd = ctx.payload.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        return []
    here = os.path.realpath(cwd)
    for session_id, worktree in conn.execute(_WORKTREES):
        if here == worktree or here.startswith(worktree.rstrip(os.sep) + os.sep):
            return [session_id]
    return []


def acting_holders(ctx: GateContext) -> list[str]:
    """The execution sessions acting for this hook call: the holders whose allowances
    count for it (registered with ``ithaca.kernel.allowances``)."""
    if ctx.conn is None:
        return []
    return _acting_sessions(ctx, ctx.conn)


allowances.register(NAME, acting_holders)


def _acquired_sessions(ctx: GateContext) -> list[str]:
    """The session ids named in the answer to an Ithaca ``session acquire`` call."""
    if ctx.event != "PostToolUse" or not _is_acquire(ctx.payload):
        return []
    response = ctx.payload.get("tool_response")
    text = response if isinstance(response, str) else _json().dumps(response)
    found: list[str] = []
    start = text.find(SESSION_PREFIX)
    while start != -1:
        candidate = text[start : start + SESSION_ID_LENGTH]
        if ids.matches("ses", candidate) and candidate not in found:
            found.append(candidate)
        start = text.find(SESSION_PREFIX, start + 1)
    return found


def _is_acquire(payload: dict[str, Any]) -> bool:
    tool = payload.get("tool_name")
    given = payload.get("tool_input")
    if not isinstance(tool, str) or not isinstance(given, dict):
        return False
    if tool.startswith("mcp__") and tool.endswith("__session"):
        return given.get("operation") == "acquire"
    command = given.get("command")
    if not isinstance(command, str):
        return False
    named_ithaca = False
    words = command.split()
    for index, word in enumerate(words):
        if "ithaca" in word:
            named_ithaca = True
        elif named_ithaca and words[index : index + 2] == ["session", "acquire"]:
            return True
    return False


def _renew(ctx: GateContext, conn: sqlite3.Connection, bind: list[str], beat: list[str]) -> None:
    """Bind, then heartbeat, under a savepoint of the dispatcher's transaction."""
    from ithaca.delivery.sessions import leases

    conn.execute("SAVEPOINT delivery_leases")
    try:
        at_ms = leases.now_ms()
        for session_id in bind:
            if conn.execute(_BIND, (ctx.session_id, ctx.now, session_id)).rowcount:
                from ithaca.kernel import journal

                journal.append(
                    conn,
                    actor="hook",
                    kind="delivery.session_bound",
                    subject=session_id,
                    payload={"session_id": session_id, "host_session_id": ctx.session_id},
                )
        for session_id in beat:
            leases.renew(conn, session_id, at_ms, quiet_s=leases.HOOK_QUIET_S)
    except Exception as exc:  # noqa: BLE001 - a lease write never changes the host's flow
        conn.execute("ROLLBACK TO delivery_leases")
        print(f"Ithaca delivery: the session heartbeat failed: {exc}", file=sys.stderr)
    conn.execute("RELEASE delivery_leases")


def _breadcrumb() -> ModuleType:
    """The renderer, loaded only by the events that print a breadcrumb: PreToolUse, which
    runs on every tool call, never needs it."""
    from ithaca.delivery import breadcrumb

    return breadcrumb


def _json() -> ModuleType:
    from ithaca.kernel import lightjson

    return lightjson
