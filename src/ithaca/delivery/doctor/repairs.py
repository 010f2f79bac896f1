"""Delivery's doctor repair: what the check finds left behind, settled (docs/delivery.md, "doctor").

Repair, in order: settles dead writers' intents (the same recovery a service runs on
open); ends orphaned sessions as ``crashed`` (their task back to ``pending``, one more
failure on its circuit); returns in-progress tasks without a session to ``pending``;
removes leftover worktrees (their ``.ithaca`` link first, then the worktree and its
``ithaca/…`` branch) and session folders; backs up, then removes, stale worktrees and
branches (``ithaca.delivery.doctor.stale``: their commits as a bundle, their uncommitted
and untracked files as a patch and copies, under ``backups/worktrees-<ts>/``; whatever
cannot be backed up stays); publishes a missing ledger again. Each step that did
something journals ``delivery.doctor_repaired``. An interactive session's owner
is its host session, which Ithaca cannot see die, so only a session with an
``owner_pid`` (a run-plan worker) is judged by its process; the others only by their
lease. Leftovers are judged under the worktree lock spawns hold until they commit, so a
spawn in progress is never taken for one. Changed files are never repaired: only their
author knows which side is right.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from ithaca.delivery.doctor import stale
from ithaca.delivery.doctor.checks import (
    ledger_missing,
    leftovers,
    orphaned_sessions,
    orphaned_tasks,
)
from ithaca.delivery.ledger.format import LEDGER_PATH
from ithaca.delivery.records import tasks
from ithaca.delivery.sessions import close as sessions_close
from ithaca.delivery.sessions import worktrees
from ithaca.delivery.sync import publish as sync_publish
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import clock, journal
from ithaca.kernel.connection import write_transaction
from ithaca.kernel.project import STATE_DIR_NAME, Project
from ithaca.kernel.store import WRITE_PATIENCE_S, Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


def repair(project: Project, conn: sqlite3.Connection) -> list[str]:
    """Settle dead writers' intents, end orphaned sessions, free orphaned in-progress
    tasks, remove leftover worktrees and session folders (units run through a store
    handle of their own)."""
    store = Store(project.db_path, backups_dir=project.backups_dir, migrate=False)
    try:
        done = []
        settled = Units(project, store).recover_dead()
        if settled:
            with store.write() as tx:
                _repaired(tx, "intents", {"settled": settled})
            done += [f"delivery: intent {s['intent']} {s['now']}" for s in settled]
        done += _end_orphaned_sessions(conn)
        with write_transaction(conn, patience_s=WRITE_PATIENCE_S) as tx:
            orphans = orphaned_tasks(tx)
            if orphans:
                tx.executemany(
                    "UPDATE delivery_tasks SET status = 'pending', revision = revision + 1,"
                    " updated_at = ? WHERE id = ?",
                    [(clock.now(), task_id) for task_id in orphans],
                )
                _repaired(tx, "orphaned_tasks", {"tasks": orphans, "to": "pending"})
        done += [f"delivery: task {task_id} returned to pending" for task_id in orphans]
        done += _remove_leftovers(project, conn)
        done += _remove_stale(project, conn)
        if ledger_missing(project, conn):
            problems = sync_publish.auto_publish(project, store, Units(project, store))
            if not ledger_missing(project, conn):
                with write_transaction(conn, patience_s=WRITE_PATIENCE_S) as tx:
                    _repaired(tx, "ledger", {"republished": LEDGER_PATH})
                done.append(f"delivery: republished {LEDGER_PATH}")
            done += [f"delivery: {note['code']}: {note['message']}" for note in problems]
        return done
    finally:
        store.close()


def _end_orphaned_sessions(conn: sqlite3.Connection) -> list[str]:
    """End every orphaned session as ``crashed``: its task back to pending, its circuit
    one failure closer to open."""
    with write_transaction(conn, patience_s=WRITE_PATIENCE_S) as tx:
        ended = []
        for row, why in orphaned_sessions(tx):
            sessions_close.end_session(tx, row, tasks.load(tx, row["task_id"]), "crashed", "system")
            ended.append({"session_id": row["id"], "task_id": row["task_id"], "why": why})
        if ended:
            _repaired(tx, "orphaned_sessions", {"sessions": ended, "to": "crashed"})
    return [f"delivery: session {found['session_id']} ended as crashed" for found in ended]


def _remove_leftovers(project: Project, conn: sqlite3.Connection) -> list[str]:
    """Remove what ``leftovers`` finds, holding the lock a spawn keeps until its session
    row is committed; each worktree goes with its ``ithaca/…/<sid>`` branch."""
    with worktrees.creation_lock(project):
        found = leftovers(project, conn)
        for path, code in found:
            full = os.path.join(os.path.realpath(project.root), path)
            if code == "WORKTREE_ORPHANED":
                _discard_worktree(project, full, os.path.basename(path))
            else:
                shutil.rmtree(full, ignore_errors=True)
    if not found:
        return []
    with write_transaction(conn, patience_s=WRITE_PATIENCE_S) as tx:
        _repaired(tx, "leftovers", {"removed": [path for path, _ in found]})
    return [f"delivery: removed {path}" for path, _ in found]


def _remove_stale(project: Project, conn: sqlite3.Connection) -> list[str]:
    """Back up and remove the stale worktrees and branches; one event says what went,
    where its backup is, and what stayed and why."""
    outcome = stale.remove_after_backup(project, conn)
    if outcome is None:
        return []
    with write_transaction(conn, patience_s=WRITE_PATIENCE_S) as tx:
        _repaired(tx, "stale_worktrees", outcome)
    done = []
    for item in outcome["removed"]:
        what = f"worktree {item['path']}" if item["path"] else f"branch {item['branch']}"
        also = f" and branch {item['branch']}" if item["path"] and item["branch"] else ""
        done.append(f"delivery: removed stale {what}{also} (backup: {item['backup']})")
    for item in outcome["kept"]:
        what = f"worktree {item['path']}" if item["path"] else f"branch {item['branch']}"
        done.append(f"delivery: kept stale {what}: {item['problem']}")
    return done


def _discard_worktree(project: Project, path: str, session_id: str) -> None:
    branch = None
    try:
        named = worktrees.git(path, "symbolic-ref", "--short", "-q", "HEAD", check=False)
        head = named.stdout.strip()
        if head.startswith("ithaca/") and head.endswith(f"/{session_id}"):
            branch = head
        worktrees.discard(project, path, branch)
    except OSError:  # kernel.git.TimedOut is one
        pass  # no usable Git: the folder still goes
    if os.path.lexists(path):
        link = os.path.join(path, STATE_DIR_NAME)
        if os.path.islink(link):
            os.unlink(link)
        shutil.rmtree(path, ignore_errors=True)


def _repaired(conn: sqlite3.Connection, step: str, details: dict[str, Any]) -> None:
    journal.append(
        conn,
        actor="system",
        kind="delivery.doctor_repaired",
        subject=step,
        payload={"step": step, **details},
    )
