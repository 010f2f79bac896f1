"""``session acquire``: spawn, resume or take over the session that works on a task
(docs/delivery.md, "Execution: session and Worker Packets").

The caller states the strategy it was admitted with; a strategy that is no longer the
verdict is ``ADMISSION_MISMATCH`` (someone else got there first, or a lease expired).
Only the user may take over a lease that is still alive (``force``, from the CLI), which
stops the owner's process when Ithaca launched it.

- **spawn** makes the worktree (unless ``worktree: none``), builds the Worker Packet and
  stores it and its Context Envelope as blobs, all outside any transaction; one
  transaction then re-checks that no session runs the task, inserts the session (lease
  now + TTL, epoch 1) and its assigned packet, moves the task to ``in_progress`` and
  grants the session's write allowances. When that transaction loses a race (the unique
  index allows one running session per task) or fails, the worktree and the session
  folder are removed again, and the request is judged anew: the loser gets
  ``ADMISSION_MISMATCH`` with the winner's verdict.
- **resume** keeps the session and its worktree, raises the lease epoch and rebinds the
  owner to the caller; the packet is kept when nothing it pins changed (task and change
  contracts, decisions, evidence, runtime), else replaced by a new one.
- **takeover** ends the old session as ``taken_over`` and starts a new one in the same
  worktree and branch (work is never discarded) with a new packet; the old owner's later
  writes get ``LEASE_LOST``.

``packet.json`` is written after the commit: the blob is the authority, the file the
worker's copy; the output folder (``.ithaca-work/outputs/<sid>/``) is made then too, so
a folder there always belongs to a session row. The session's write allowances are its
worktree and that output folder, owned by ``delivery:<sid>``: only a host call the
session acts for may use them (``ithaca.delivery.gate``). A run-plan acquire pins the
contract digest its plan selected; when the task's contract changed meanwhile the
acquire stops with ``AUTHORITY_CHANGED`` and nothing is kept.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ithaca.delivery.context import tool as context
from ithaca.delivery.contract import Diagnostic
from ithaca.delivery.idempotency import Guard, Replayed
from ithaca.delivery.records import tasks
from ithaca.delivery.sessions import env as sessions_env
from ithaca.delivery.sessions import leases, packets, worktrees
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.sessions.admission import Admission, Caller, admit
from ithaca.delivery.units.owners import is_alive
from ithaca.delivery.units.plans import Stale
from ithaca.kernel import clock, ids, journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.connection import sqlite
from ithaca.kernel.errors import Conflict
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

STRATEGIES = ("spawn", "resume", "takeover")
MAX_ATTEMPTS = 8
FORCE_GRACE_S = 5.0


@dataclass(frozen=True)
class AcquireRequest:
    task_id: str
    strategy: str
    caller: Caller = field(default_factory=Caller)
    runtime: str = "agent"
    worktree: str = "create"
    ttl_s: int = leases.DEFAULT_TTL_S
    # The user's ``--force``: take over a lease that is still alive.
    force: bool = False
    # Set by run-plan: the run that owns the session, the commit its branch starts from,
    # and the contract digest its plan selected.
    plan_run_id: str | None = None
    base: str | None = None
    expected_contract: str | None = None
    actor: str = "agent"
    # How the answer is stored and returned: ``record task_outcome start`` wraps it in
    # the record shape, so its replays read like every other record entry's.
    shape: Callable[[dict[str, Any]], dict[str, Any]] = lambda answer: answer


@dataclass
class _Prepared:
    admission: Admission
    envelope: dict[str, Any]
    decisions: list[dict[str, Any]]
    evidence: list[dict[str, Any]]
    output_schema: dict[str, Any]
    current_packet: dict[str, Any] | None = None

    @property
    def task(self) -> Row:
        assert self.admission.task is not None
        return self.admission.task

    @property
    def running(self) -> Row:
        assert self.admission.running is not None
        return self.admission.running


def acquire_session(
    project: Project, store: Store, request: AcquireRequest, guard: Guard | None
) -> tuple[dict[str, Any], bool]:
    """``(answer, replayed)``; the answer is ``{verdict, session, packet, worktree, env,
    diagnostics, journal_seq}``."""
    git_ready = request.worktree == "none" or worktrees.git_ready()
    for _ in range(MAX_ATTEMPTS):
        try:
            with store.read() as conn:
                if guard is not None:
                    guard.check(conn)
                prepared = _prepare(conn, project, request, git_ready)
            return _carry_out(project, store, request, prepared, guard), False
        except Replayed as replay:
            return replay.stored, True
        except Stale:
            continue
    raise Conflict(
        "STORE_BUSY",
        f"acquiring task {request.task_id} kept being overtaken by other writers; try again",
        {"task_id": request.task_id},
    )


def authority_changed(task_id: str, expected: str, actual: str | None) -> Conflict:
    return Conflict(
        "AUTHORITY_CHANGED",
        f"task {task_id}'s contract changed after the plan selected it; accept a new plan",
        {"task_id": task_id, "expected": expected, "actual": actual},
    )


def _prepare(
    conn: sqlite3.Connection, project: Project, request: AcquireRequest, git_ready: bool
) -> _Prepared:
    admission = admit(
        conn, project, request.task_id, request.caller, leases.now_ms(), git_ready=git_ready
    )
    admission.require_clear()
    task = admission.task
    assert task is not None
    if request.expected_contract not in (None, task["contract_digest"]):
        raise authority_changed(task["id"], str(request.expected_contract), task["contract_digest"])
    forced = request.force and request.strategy == "takeover" and admission.verdict == "abandon"
    if request.strategy != admission.verdict and not forced:
        raise Conflict(
            "ADMISSION_MISMATCH",
            f"task {task['id']} admits {admission.verdict}, not {request.strategy}; ask"
            " `session admission` again",
            {"task_id": task["id"], "verdict": admission.verdict, "strategy": request.strategy},
        )
    change_id = task["change_id"]
    prepared = _Prepared(
        admission,
        context.envelope(project, conn, stage="dev", scope={"task_id": task["id"]}),
        packets.accepted_decisions(conn, project, change_id),
        packets.evidence_refs(conn, project, task["id"], change_id),
        packets.output_schema(conn, project),
    )
    if request.strategy == "resume":
        row = sessions_rows.packet(conn, prepared.running["packet_id"])
        if row is not None:
            prepared.current_packet = packets.load(project, row["digest"], prepared.running["id"])
    return prepared


def _carry_out(
    project: Project,
    store: Store,
    request: AcquireRequest,
    prepared: _Prepared,
    guard: Guard | None,
) -> dict[str, Any]:
    if request.strategy == "resume":
        return _resume(project, store, request, prepared, guard)
    if request.strategy == "takeover":
        old = prepared.running
        answer = _start(project, store, request, prepared, guard, adopted=old)
        if request.force and old["owner_pid"] is not None:  # only once the takeover committed
            _stop_owner(old["owner_pid"], old["owner_start"])
        return answer
    return _start(project, store, request, prepared, guard, adopted=None)


# --- spawn and takeover ----------------------------------------------------------------


def _start(
    project: Project,
    store: Store,
    request: AcquireRequest,
    prepared: _Prepared,
    guard: Guard | None,
    adopted: Row | None,
) -> dict[str, Any]:
    """A new session: in a new worktree (spawn) or the adopted session's (takeover).
    Spawns that make a worktree take turns, and one that finds the task taken once its
    turn comes is judged again without making one."""
    if adopted is not None or request.worktree != "create":
        return _start_session(project, store, request, prepared, guard, adopted)
    with worktrees.creation_lock(project):
        with store.read() as conn:
            if sessions_rows.running_for_task(conn, prepared.task["id"]) is not None:
                raise Stale(prepared.task["id"])
        return _start_session(project, store, request, prepared, guard, None)


def _start_session(
    project: Project,
    store: Store,
    request: AcquireRequest,
    prepared: _Prepared,
    guard: Guard | None,
    adopted: Row | None,
) -> dict[str, Any]:
    task = prepared.task
    session_id = ids.new("ses")
    made_worktree = False
    try:
        if adopted is not None:
            path, branch, base = adopted["worktree_path"], adopted["branch"], adopted["base_head"]
        elif request.worktree == "create":
            base = request.base or worktrees.main_head(project)
            branch = worktrees.branch_name(task["id"], session_id)
            path = worktrees.create(project, session_id, branch, base, link=True)
            made_worktree = True
        else:
            path, branch, base = None, None, worktrees.head(project.root)
        packet = _packet(project, request, prepared, session_id, _git(task, path, branch, base))
        context.store_snapshot(project, prepared.envelope)
        packets.store_blob(project, packet)
        row: Row = {
            "id": session_id,
            "task_id": task["id"],
            "status": "running",
            "runtime": request.runtime,
            "host_session_id": request.caller.host_session_id,
            "owner_pid": None,
            "owner_start": None,
            "plan_run_id": request.plan_run_id,
            "worktree_path": path,
            "branch": branch,
            "base_head": base,
            "packet_id": packet["id"],
            "lease_epoch": 1,
            "lease_ttl_s": request.ttl_s,
            "taken_over_from": None if adopted is None else adopted["id"],
            "close_reason": None,
        }
        with store.write() as tx:
            answer = _commit_start(tx, project, request, prepared, row, packet, adopted, guard)
    except BaseException:
        if made_worktree:
            worktrees.discard(project, path, branch)
        shutil.rmtree(packets.session_folder(project, session_id), ignore_errors=True)
        raise
    packets.write_file(project, packet)
    packets.make_output_folder(project, packet)
    return answer


def _commit_start(
    tx: sqlite3.Connection,
    project: Project,
    request: AcquireRequest,
    prepared: _Prepared,
    row: Row,
    packet: dict[str, Any],
    adopted: Row | None,
    guard: Guard | None,
) -> dict[str, Any]:
    if guard is not None:
        guard.check(tx)
    task = _task_unchanged(tx, request, prepared.task)
    if adopted is None:
        if sessions_rows.running_for_task(tx, task["id"]) is not None:
            raise Stale(task["id"])
    elif not sessions_rows.unchanged_since(tx, adopted):
        raise Stale(adopted["id"])
    if sessions_rows.circuit(tx, task["id"])["open"]:
        raise Stale(task["id"])
    at_ms = leases.now_ms()
    row = {
        **row,
        "lease_expires_at": leases.stamp(at_ms, row["lease_ttl_s"]),
        "heartbeat_at": leases.stamp(at_ms),
    }
    if adopted is not None:
        sessions_rows.end(tx, adopted, "taken_over", f"taken over by {row['id']}")
    try:
        sessions_rows.insert(tx, row)
    except sqlite.IntegrityError as exc:  # another session started running the task
        raise Stale(task["id"]) from exc
    sessions_rows.assign_packet(tx, packet, task["id"])
    if task["status"] != "in_progress":
        _set_in_progress(tx, task)
    sessions_rows.allow_writes(tx, row["id"], _allowed_paths(project, row, packet))
    kind = "delivery.session_spawned" if adopted is None else "delivery.session_taken_over"
    seq = journal.append(
        tx,
        actor=request.actor,
        kind=kind,
        subject=row["id"],
        payload={
            "session_id": row["id"],
            "task_id": task["id"],
            "packet": {"id": packet["id"], "digest": packet["digest"]},
            "worktree": row["worktree_path"],
            "branch": row["branch"],
            "lease_expires_at": row["lease_expires_at"],
            "plan_run_id": row["plan_run_id"],
            "taken_over_from": row["taken_over_from"],
            "task_status": "in_progress",
        },
    )
    answer = request.shape(
        _answer(project, request.strategy, row, packet, prepared.admission.warnings, seq)
    )
    if guard is not None:
        guard.seal(tx, answer)
    return answer


# --- resume ----------------------------------------------------------------------------


def _resume(
    project: Project,
    store: Store,
    request: AcquireRequest,
    prepared: _Prepared,
    guard: Guard | None,
) -> dict[str, Any]:
    running = prepared.running
    current = prepared.current_packet
    git = _git(prepared.task, running["worktree_path"], running["branch"], running["base_head"])
    packet = _packet(project, request, prepared, running["id"], git, current)
    replaced = current is None or packet["digest"] != current["digest"]
    if replaced:
        packet = _packet(project, request, prepared, running["id"], git)
        context.store_snapshot(project, prepared.envelope)
        packets.store_blob(project, packet)
    with store.write() as tx:
        if guard is not None:
            guard.check(tx)
        _task_unchanged(tx, request, prepared.task)
        if not sessions_rows.unchanged_since(tx, running):
            raise Stale(running["id"])
        at_ms = leases.now_ms()
        row = {
            **running,
            "lease_epoch": running["lease_epoch"] + 1,
            "host_session_id": request.caller.host_session_id or running["host_session_id"],
            "runtime": request.runtime,
            "packet_id": packet["id"],
            "lease_ttl_s": request.ttl_s,
            "lease_expires_at": max(
                running["lease_expires_at"], leases.stamp(at_ms, request.ttl_s)
            ),
            "heartbeat_at": leases.stamp(at_ms),
        }
        tx.execute(
            "UPDATE delivery_sessions SET lease_epoch = ?, host_session_id = ?, runtime = ?,"
            " packet_id = ?, lease_ttl_s = ?, lease_expires_at = ?, heartbeat_at = ?,"
            " updated_at = ? WHERE id = ?",
            (
                row["lease_epoch"],
                row["host_session_id"],
                row["runtime"],
                row["packet_id"],
                row["lease_ttl_s"],
                row["lease_expires_at"],
                row["heartbeat_at"],
                clock.now(),
                row["id"],
            ),
        )
        if replaced:
            tx.execute(
                "UPDATE delivery_packets SET status = 'abandoned', updated_at = ?"
                " WHERE session_id = ? AND status = 'assigned'",
                (clock.now(), row["id"]),
            )
            sessions_rows.assign_packet(tx, packet, row["task_id"])
        sessions_rows.allow_writes(tx, row["id"], _allowed_paths(project, row, packet))
        seq = journal.append(
            tx,
            actor=request.actor,
            kind="delivery.session_resumed",
            subject=row["id"],
            payload={
                "session_id": row["id"],
                "task_id": row["task_id"],
                "lease_epoch": row["lease_epoch"],
                "packet": {"id": packet["id"], "digest": packet["digest"]},
                "packet_replaced": replaced,
                "lease_expires_at": row["lease_expires_at"],
            },
        )
        answer = _answer(project, "resume", row, packet, prepared.admission.warnings, seq)
        answer = request.shape({**answer, "packet_replaced": replaced})
        if guard is not None:
            guard.seal(tx, answer)
    packets.write_file(project, packet)
    packets.make_output_folder(project, packet)
    return answer


# --- pieces ----------------------------------------------------------------------------


def _packet(
    project: Project,
    request: AcquireRequest,
    prepared: _Prepared,
    session_id: str,
    git: dict[str, Any],
    keeping: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The packet for this acquire; with ``keeping``, the same packet built around that
    packet's envelope (equal digests mean nothing it pins changed)."""
    envelope = {
        "id": prepared.envelope["id"],
        "digest": prepared.envelope["digest"],
        "path": str(BlobStore(project.blobs_dir).path(prepared.envelope["digest"])),
    }
    return packets.build(
        session_id=session_id,
        runtime=request.runtime,
        task=prepared.task,
        change=prepared.admission.change,
        envelope=envelope if keeping is None else keeping["context_envelope"],
        decisions=prepared.decisions,
        git=git,
        evidence=prepared.evidence,
        output={"path": packets.output_path(project, session_id), "schema": prepared.output_schema},
    )


def _git(task: Row, path: str | None, branch: str | None, base: str | None) -> dict[str, Any]:
    return {
        "base_head": base,
        "branch": branch,
        "worktree": path,
        "diff_range": None if branch is None or base is None else f"{base}..{branch}",
        "allowed_paths": task["contract"]["files_modified"],
    }


def _task_unchanged(tx: sqlite3.Connection, request: AcquireRequest, task: Row) -> Row:
    now = tasks.find(tx, task["id"])
    if request.expected_contract is not None and (
        now is None or now["contract_digest"] != request.expected_contract
    ):
        raise authority_changed(
            task["id"], request.expected_contract, None if now is None else now["contract_digest"]
        )
    if now is None or (now["status"], now["revision"]) != (task["status"], task["revision"]):
        raise Stale(task["id"])
    return now


def _set_in_progress(tx: sqlite3.Connection, task: Row) -> None:
    tasks.require_transition(task, "in_progress")
    moved = tx.execute(
        "UPDATE delivery_tasks SET status = 'in_progress', updated_at = ?"
        " WHERE id = ? AND status = ? AND revision = ?",
        (clock.now(), task["id"], task["status"], task["revision"]),
    ).rowcount
    if not moved:
        raise Stale(task["id"])


def _allowed_paths(project: Project, row: Row, packet: dict[str, Any]) -> list[str]:
    """The session's worktree and its output folder (for a packet from before the work
    folder, only its output file: the session folder around it is Ithaca's)."""
    output = packet["output"]["path"]
    folder = packets.output_folder(project, row["id"])
    paths = [folder if os.path.dirname(output) == folder else output]
    if row["worktree_path"] is not None:
        paths.append(row["worktree_path"])
    return paths


def _answer(
    project: Project,
    verdict: str,
    row: Row,
    packet: dict[str, Any],
    warnings: list[Diagnostic],
    seq: int,
) -> dict[str, Any]:
    session = sessions_rows.view({**row, "status": "running"})
    ref = {
        "id": packet["id"],
        "digest": packet["digest"],
        "path": packets.packet_path(project, row["id"]),
        "output_path": packet["output"]["path"],
    }
    return {
        "verdict": verdict,
        "session": session,
        "packet": ref,
        "worktree": row["worktree_path"],
        "env": sessions_env.reserved(project, session, ref),
        "diagnostics": warnings,
        "journal_seq": seq,
    }


def _stop_owner(pid: int, start: str | None) -> None:
    """The user's forced takeover: SIGTERM the owner's process group, SIGKILL after 5 s."""
    if not is_alive(pid, start):
        return
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sent)
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(pid, sent)
        deadline = time.monotonic() + FORCE_GRACE_S
        while time.monotonic() < deadline:
            if not is_alive(pid, start):
                return
            time.sleep(0.05)
