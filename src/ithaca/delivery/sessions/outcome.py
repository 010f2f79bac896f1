"""``record task_outcome start|complete|block|reopen``: a task's progress, bound to its
session (docs/delivery.md, "The record tool").

``complete`` is the one way to ``completed``, and it takes evidence, never a claim: the
named session must be the task's running session (``SESSION_NOT_RUNNING``; the owner of
a session that was taken over gets ``LEASE_LOST``) with an assigned packet
(``NO_ASSIGNED_PACKET``) whose digest the caller echoes (``PACKET_DIGEST_MISMATCH``);
the packet is re-verified from its blob, and the file at its ``output.path`` must exist
(``OUTPUT_MISSING``) and satisfy its ``output.schema`` (``OUTPUT_SCHEMA_INVALID``). A
given ``data.output`` is written there first. One recoverable unit then completes the
task with outcome ``{summary, output_digest}``, copies the output into the change folder
as a ``task_outcome`` artifact (``delivery/outcomes/<task>.json``; ``reports/outcomes/``
for a task of no change), consumes the packet, completes the session, resets the
circuit, stores ``completion_commit`` (``data.commit``, else the worktree's HEAD) and
completes an expanded parent whose children are now all done. A process's exit status
is never evidence.

``start`` acquires a session without a worktree, with the admitted verdict (spawn or
resume). ``block`` moves the task to ``blocked`` and ends a running session as
abandoned (not a failure); ``reopen`` moves a completed task back to ``in_progress``
(completing it again needs a new session) and a blocked one back to ``pending``.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.idempotency import Guard, Replayed
from ithaca.delivery.records import changes, tasks
from ithaca.delivery.schemas.dialect import Schema, obj, text
from ithaca.delivery.schemas.ids import DIGEST, TASK_ID
from ithaca.delivery.sessions import leases, packets, worktrees
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.sessions import tool as sessions
from ithaca.delivery.sessions.acquire import AcquireRequest, acquire_session
from ithaca.delivery.sessions.admission import admit
from ithaca.delivery.sessions.close import end_session
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import canon, clock, config, ids, journal
from ithaca.kernel.errors import Conflict, Refused
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

OUTCOMES_FOLDER = "outcomes"
_REASON = text(2000)
DATA_SCHEMAS: dict[tuple[str, str], Schema] = {
    ("task_outcome", "start"): obj({"task_id": TASK_ID}, {"runtime": sessions.RUNTIME}),
    ("task_outcome", "complete"): obj(
        {"task_id": TASK_ID, "session_id": sessions.SESSION_ID, "packet_digest": DIGEST},
        {"output": {}, "commit": {"type": "string", "pattern": r"^[0-9a-f]{7,64}$"}},
    ),
    ("task_outcome", "block"): obj({"task_id": TASK_ID, "reason": _REASON}),
    ("task_outcome", "reopen"): obj({"task_id": TASK_ID, "reason": _REASON}),
}


def run(
    store: Store,
    project: Project,
    units: Units,
    action: str,
    data: dict[str, Any],
    guard: Guard,
    host_session: str | None,
) -> tuple[dict[str, Any], bool]:
    """One ``task_outcome`` entry: ``(answer, replayed)`` in the record answer shape."""
    if action == "start":
        return _start(store, project, data, guard, host_session)
    prepare = {"complete": _complete, "block": _block, "reopen": _reopen}[action]
    return units.run_keyed(
        guard,
        lambda conn: prepare(conn, project, data),
        f"task_outcome.{action}",
        {"operation": f"task_outcome.{action}"},
    )


# --- start -----------------------------------------------------------------------------


def _start(
    store: Store,
    project: Project,
    data: dict[str, Any],
    guard: Guard,
    host_session: str | None,
) -> tuple[dict[str, Any], bool]:
    who = sessions.caller(host_session, None)
    try:
        with store.read() as conn:
            guard.check(conn)  # a replay answers before the verdict is asked again
            verdict = admit(conn, project, data["task_id"], who, leases.now_ms(), git_ready=True)
    except Replayed as replay:
        return replay.stored, True
    verdict.require_clear()
    if verdict.verdict not in ("spawn", "resume"):
        raise Conflict(
            "ADMISSION_MISMATCH",
            f"task {data['task_id']} admits {verdict.verdict}: another session holds it; use"
            " `session admission` and `session acquire`",
            {"task_id": data["task_id"], "verdict": verdict.verdict},
        )
    request = AcquireRequest(
        task_id=data["task_id"],
        strategy=verdict.verdict,
        caller=who,
        runtime=data.get("runtime", "agent"),
        worktree="none",
        ttl_s=leases.ttl_s(config.load(project.state_root)),
        shape=_as_record_answer,
    )
    return acquire_session(project, store, request, guard)


def _as_record_answer(answer: dict[str, Any]) -> dict[str, Any]:
    result = {k: v for k, v in answer.items() if k not in ("diagnostics", "journal_seq")}
    return {
        "result": result,
        "diagnostics": answer["diagnostics"],
        "journal_seq": answer["journal_seq"],
    }


# --- complete --------------------------------------------------------------------------


def _complete(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    task = tasks.load(conn, data["task_id"])
    if task["change_id"] is not None:
        changes.writable(conn, task["change_id"])
    session = _running_session_of(conn, task, data["session_id"])
    tasks.require_transition(task, "completed")
    packet_row = sessions_rows.packet(conn, session["packet_id"])
    if packet_row is None or packet_row["status"] != "assigned":
        raise Refused(
            "NO_ASSIGNED_PACKET",
            f"session {session['id']} holds no assigned Worker Packet; resume it to get one",
            {"session_id": session["id"]},
        )
    if packet_row["digest"] != data["packet_digest"]:
        raise Refused(
            "PACKET_DIGEST_MISMATCH",
            f"packet_digest is not the digest of the packet assigned to session {session['id']};"
            " echo the digest of the packet you worked from",
            {"session_id": session["id"], "given": data["packet_digest"]},
        )
    packet = packets.load(project, packet_row["digest"], session["id"])
    if "output" in data:
        body, value = packets.output_bytes(data["output"]), data["output"]
    else:
        body, value = packets.read_output(packet)
    packets.check_output(packet, value)
    commit_id = data.get("commit") or worktrees.head(session["worktree_path"] or project.root)
    outcome = {
        "summary": value.get("summary", "") if isinstance(value, dict) else "",
        "output_digest": canon.digest_bytes(body),
    }
    copy = TrackedWrite(_outcome_path(task), body, "artifact", "task", task["id"])

    def commit(tx: sqlite3.Connection) -> Outcome:
        current = tasks.find(tx, task["id"])
        if current is None or (current["status"], current["revision"]) != (
            task["status"],
            task["revision"],
        ):
            raise Stale(task["id"])
        if not sessions_rows.unchanged_since(tx, session):
            raise Stale(session["id"])
        tx.execute(
            "UPDATE delivery_tasks SET status = 'completed', outcome = ?, completion_commit = ?,"
            " updated_at = ? WHERE id = ?",
            (canon.canonical_text(outcome), commit_id, clock.now(), task["id"]),
        )
        sessions_rows.end(tx, session, "completed", "task completed")
        sessions_rows.reset_circuit(tx, task["id"])
        artifact_id = _bind_outcome(tx, copy)
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.task_completed",
            subject=task["id"],
            payload={
                "id": task["id"],
                "session_id": session["id"],
                "packet_digest": packet_row["digest"],
                "output_digest": outcome["output_digest"],
                "completion_commit": commit_id,
                "artifact_id": artifact_id,
            },
        )
        if task["parent_id"] is not None:
            seq = tasks.settle_parent(tx, task["parent_id"]) or seq
        result = {
            "task": {**tasks.view(task), "status": "completed"},
            "outcome": outcome,
            "completion_commit": commit_id,
            "artifact": {"id": artifact_id, "path": copy.path, "digest": copy.digest},
            "session": {"id": session["id"], "status": "completed"},
        }
        return Outcome(result, seq)

    plan = Plan("task_outcome.complete", commit, (copy,), [])
    if "output" in data:
        plan.before = lambda: packets.write_output(project, packet, body)
    return plan


def _running_session_of(conn: sqlite3.Connection, task: Row, session_id: str) -> Row:
    session = sessions_rows.find(conn, session_id)
    if session is not None and session["task_id"] == task["id"]:
        if session["status"] == "running":
            return session
        if session["status"] == "taken_over":
            raise sessions_rows.lease_lost(session)
    raise Refused(
        "SESSION_NOT_RUNNING",
        f"{session_id} is not the running session of task {task['id']}",
        {"task_id": task["id"], "session_id": session_id},
    )


def _outcome_path(task: Row) -> str:
    if task["change_id"] is None:
        return f"reports/{OUTCOMES_FOLDER}/{task['id']}.json"
    return f"{layout.change_folder(task['change_id'])}/delivery/{OUTCOMES_FOLDER}/{task['id']}.json"


def _bind_outcome(tx: sqlite3.Connection, copy: TrackedWrite) -> str:
    """The output copy as the task's current ``task_outcome`` artifact."""
    artifact_id = ids.new("art")
    tx.execute(
        "UPDATE delivery_artifacts SET status = 'superseded', superseded_by = ?"
        " WHERE mode = 'copy' AND path = ? AND status = 'current'",
        (artifact_id, copy.path),
    )
    tx.execute(
        "INSERT INTO delivery_artifacts (id, kind, scope_type, scope_id, path, digest, bytes,"
        " mode, status, role, created_at)"
        " VALUES (?, 'task_outcome', 'task', ?, ?, ?, ?, 'copy', 'current', 'worker_outcome', ?)",
        (artifact_id, copy.scope_id, copy.path, copy.digest, len(copy.data), clock.now()),
    )
    return artifact_id


# --- block and reopen ------------------------------------------------------------------


def _block(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    task = tasks.load(conn, data["task_id"])
    if task["change_id"] is not None:
        changes.writable(conn, task["change_id"])
    tasks.require_transition(task, "blocked")
    running = sessions_rows.running_for_task(conn, task["id"])

    def commit(tx: sqlite3.Connection) -> Outcome:
        _require_unchanged(tx, task)
        if running is not None:
            if not sessions_rows.unchanged_since(tx, running):
                raise Stale(running["id"])
            end_session(tx, running, task, "abandoned", "agent")
        elif sessions_rows.running_for_task(tx, task["id"]) is not None:
            raise Stale(task["id"])
        _set_status(tx, task["id"], "blocked")
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.task_blocked",
            subject=task["id"],
            payload={
                "id": task["id"],
                "reason": data["reason"],
                "session_id": None if running is None else running["id"],
            },
        )
        return Outcome({"task": {**tasks.view(task), "status": "blocked"}}, seq)

    return Plan("task_outcome.block", commit, (), [])


def _reopen(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    task = tasks.load(conn, data["task_id"])
    if task["change_id"] is not None:
        changes.writable(conn, task["change_id"])
    target = {"completed": "in_progress", "blocked": "pending"}.get(task["status"])
    if target is None:
        raise Refused(
            "TASK_TRANSITION_INVALID",
            f"task {task['id']} is {task['status']}; only completed or blocked tasks reopen",
            {"task_id": task["id"], "from": task["status"], "to": "reopened"},
        )

    def commit(tx: sqlite3.Connection) -> Outcome:
        _require_unchanged(tx, task)
        _set_status(tx, task["id"], target)
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.task_reopened",
            subject=task["id"],
            payload={
                "id": task["id"],
                "reason": data["reason"],
                "from": task["status"],
                "to": target,
            },
        )
        return Outcome({"task": {**tasks.view(task), "status": target}}, seq)

    return Plan("task_outcome.reopen", commit, (), [])


def _require_unchanged(tx: sqlite3.Connection, task: Row) -> None:
    current = tasks.find(tx, task["id"])
    if current is None or (current["status"], current["revision"]) != (
        task["status"],
        task["revision"],
    ):
        raise Stale(task["id"])


def _set_status(tx: sqlite3.Connection, task_id: str, status: str) -> None:
    tx.execute(
        "UPDATE delivery_tasks SET status = ?, updated_at = ? WHERE id = ?",
        (status, clock.now(), task_id),
    )
