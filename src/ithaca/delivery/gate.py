"""Delivery inside host hooks: breadcrumb, compaction snapshot, managed files
(docs/delivery.md, "Hooks").

SessionStart: when there is active work (an open change, a running execution session, or
a file intent waiting for recovery) the agent gets a short breadcrumb naming the change,
its current task and that task's session with the minutes left on its lease, the latest
checkpoint of each stage, the decisions and what needs attention. A compacted
session whose state database cannot be read falls back to the snapshot its PreCompact
hook left.

PreCompact: the breadcrumb, with the change and task it names, is written to
``.runtime/recovery/precompact-<host session>.json``. Deciding never writes: the file is
written in the dispatcher's commit phase (``commit``). Both events' reading and writing
live in ``ithaca.delivery.resume``, loaded only for them.

PreToolUse: for delivery's managed files, which file a call would change and which tool
changes it (``ithaca.delivery.writes``).

PreToolUse also keeps each execution session's places its own: a write into the work
folder ``.ithaca-work/`` outside the places of the sessions acting for this call (below)
is ``SESSION_WRITE_DENIED`` (``ithaca.delivery.writes`` too). The same ownership
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
kernel, ``writes``, ``resume`` and ``leases``, each where an event needs it.
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
        from ithaca.delivery import resume

        return resume.session_start(ctx)
    if ctx.event == "PreToolUse" and call is not None:
        return _judge_writes(call, ctx)
    if ctx.event == "PreCompact" and ctx.conn is not None:
        from ithaca.delivery import resume

        found = resume.snapshot(ctx, _acting_sessions(ctx, ctx.conn))
        if found is not None:
            ctx.scratch.setdefault(NAME, {})["snapshot"] = found
    if ctx.event in HEARTBEAT_EVENTS and ctx.conn is not None:
        _prepare_heartbeat(ctx)
    return ABSTAIN


def _judge_writes(call: Call, ctx: GateContext) -> Opinion:
    """A call's writes into the work folder and into managed files (``writes``, loaded
    only for the calls that can write: every import costs every hook call)."""
    if not call.write_targets and call.tool_class not in ("edit", "shell"):
        return ABSTAIN
    from ithaca.delivery import writes

    if call.write_targets:
        denied = writes.judge_work_folder(call, ctx)
        if denied is not None:
            return denied
    if call.tool_class not in ("edit", "shell"):
        return ABSTAIN
    return writes.judge_managed_files(call, ctx)


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    """Bind and heartbeat what ``decide`` found, then write the PreCompact snapshot
    (``resume``)."""
    prepared = ctx.scratch.get(NAME) or {}
    if ctx.conn is not None and (prepared.get("heartbeat") or prepared.get("bind")):
        _renew(ctx, ctx.conn, prepared.get("bind", []), prepared.get("heartbeat", []))
    snapshot = prepared.get("snapshot")
    if ctx.event != "PreCompact" or snapshot is None or ctx.project is None:
        return None
    from ithaca.delivery import resume

    resume.write_snapshot(ctx.project.runtime, snapshot)
    return None


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


def _json() -> ModuleType:
    from ithaca.kernel import lightjson

    return lightjson
