"""Delivery's doctor check: the tracked files against the database, and what dead
processes left behind (reference §11).

Tracked files are the team's authority and the database is rebuildable from them, so the
check compares the two: every registered file against its digest (``FILE_DIGEST_MISMATCH``,
``FILE_MISSING``), every file under the tracked planes against the registry
(``FILE_UNREGISTERED``), accepted checkpoints against their digests, intents a dead
writer left (``RECOVERY_PENDING``), running sessions nobody can still be running
(``LEASE_ORPHANED``: the Ithaca-launched worker died, or the lease ran out more than two
TTLs ago), tasks in progress with no session to finish them, and the worktrees and
session folders no session row names, which a spawn that crashed before its commit left
behind (``WORKTREE_ORPHANED``: ``.ithaca-work/worktrees/<sid>/``, or
``.ithaca/.runtime/worktrees/<sid>/`` where worktrees lay before the work folder;
``SESSION_FOLDER_ORPHANED``: ``.ithaca/.runtime/sessions/<sid>/`` and
``.ithaca-work/outputs/<sid>/``), a team ledger gone since this
checkout last synced (``LEDGER_MISSING``) and a Git repository whose config lacks the
ledger's merge driver (``MERGE_DRIVER_MISSING``: clones do not copy it). Checking reads
only; changed files are reported, never repaired: only their author knows which side is
right.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ithaca.delivery.checkpoints import rows as checkpoints
from ithaca.delivery.ledger import driver_setup as sync_install
from ithaca.delivery.ledger.format import LEDGER_PATH
from ithaca.delivery.sessions import leases, packets, worktrees
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.units import owners as processes
from ithaca.delivery.units import registry
from ithaca.kernel import ids
from ithaca.kernel.errors import Corrupt
from ithaca.kernel.project import Project, git_top

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

# Folders under the state root whose files only Ithaca writes, each one registered.
TRACKED_PLANES = ("specs", "decisions", "docs/research", "changes", "reports/templates")
# A running session whose lease ran out this many TTLs ago has no owner left.
ORPHANED_AFTER_TTLS = 2
# The folders holding one entry per session, which a spawn fills before its session row
# exists: in the work folder (``work``) or in ``.runtime/`` (``runtime``), with the code
# of a leftover. ``runtime``'s ``worktrees`` is where worktrees lay before the work folder.
SESSION_PLACES = (
    ("work", worktrees.WORKTREES, "WORKTREE_ORPHANED"),
    ("work", packets.OUTPUTS, "SESSION_FOLDER_ORPHANED"),
    ("runtime", packets.SESSIONS, "SESSION_FOLDER_ORPHANED"),
    ("runtime", worktrees.WORKTREES, "WORKTREE_ORPHANED"),
)

Finding = dict[str, Any]


def check(project: Project, conn: sqlite3.Connection) -> list[Finding]:
    """Every delivery finding; reads only."""
    return [
        *_file_findings(project.state_root, conn),
        *_checkpoint_findings(conn),
        *_intent_findings(conn),
        *_orphaned_session_findings(conn),
        *_orphaned_task_findings(conn),
        *_leftover_findings(project, conn),
        *_ledger_findings(project, conn),
    ]


def _file_findings(state_root: str, conn: sqlite3.Connection) -> list[Finding]:
    found = []
    registered = dict(conn.execute("SELECT path, digest FROM delivery_files ORDER BY path"))
    for path, digest in registered.items():
        actual = registry.file_digest(state_root, path)
        if actual is None:
            found.append(_finding("FILE_MISSING", "error", f"{path} is registered but gone", path))
        elif actual != digest:
            found.append(
                _finding(
                    "FILE_DIGEST_MISMATCH",
                    "error",
                    f"{path} was changed outside Ithaca; restore it from Git, or record the"
                    " change anew (decisions: a new decision that supersedes it)",
                    path,
                    expected=digest,
                    actual=actual,
                )
            )
    for path in tracked_files(state_root):
        if path not in registered:
            found.append(
                _finding(
                    "FILE_UNREGISTERED",
                    "warning",
                    f"{path} lies in a tracked plane but Ithaca did not write it",
                    path,
                )
            )
    return found


def _checkpoint_findings(conn: sqlite3.Connection) -> list[Finding]:
    found = []
    rows = conn.execute(
        "SELECT id, stage, scope_type, scope_id, revision, status, payload, evidence,"
        " diagnostics, envelope_digest, supersedes_id, digest FROM delivery_checkpoints"
        " ORDER BY id"
    )  # the column order ``checkpoints.verified`` reads
    for row in rows:
        try:
            checkpoints.verified(row)
        except Corrupt as exc:
            found.append(_finding(exc.code, "error", exc.message, row[0]))
    return found


def _intent_findings(conn: sqlite3.Connection) -> list[Finding]:
    rows = conn.execute(
        "SELECT id, op, status, owner_pid, owner_start FROM delivery_fs_intents"
        " WHERE status IN ('pending', 'committed') ORDER BY created_at, id"
    )
    return [
        _finding(
            "RECOVERY_PENDING",
            "warning",
            f"{op} ({status}) was left by a writer that died; `ithaca doctor --repair`"
            f" {'rolls its files back' if status == 'pending' else 'finishes it'}",
            intent_id,
        )
        for intent_id, op, status, pid, start in rows
        if not processes.is_alive(pid, start)
    ]


def _orphaned_session_findings(conn: sqlite3.Connection) -> list[Finding]:
    return [
        _finding(
            "LEASE_ORPHANED",
            "warning",
            f"session {row['id']} still runs task {row['task_id']}, but {why};"
            " `ithaca doctor --repair` ends it as crashed",
            row["id"],
        )
        for row, why in orphaned_sessions(conn)
    ]


def orphaned_sessions(conn: sqlite3.Connection) -> list[tuple[dict[str, Any], str]]:
    """Running sessions nobody can still be running, each with the reason."""
    at_ms = leases.now_ms()
    found = []
    query = (
        f"SELECT {', '.join(sessions_rows.COLUMNS)} FROM delivery_sessions"
        " WHERE status = 'running' ORDER BY id"
    )
    for values in conn.execute(query).fetchall():
        row = dict(zip(sessions_rows.COLUMNS, values, strict=True))
        pid = row["owner_pid"]
        if pid is not None and not processes.is_alive(pid, row["owner_start"]):
            found.append((row, f"its worker (pid {pid}) is gone"))
            continue
        long_ago = leases.stamp(at_ms, -ORPHANED_AFTER_TTLS * row["lease_ttl_s"])
        if row["lease_expires_at"] <= long_ago:
            found.append((row, f"its lease ran out at {row['lease_expires_at']}"))
    return found


def _orphaned_task_findings(conn: sqlite3.Connection) -> list[Finding]:
    return [
        _finding(
            "TASK_SESSION_MISSING",
            "warning",
            f"task {task_id} is in progress but no session runs it; `ithaca doctor --repair`"
            " returns it to pending",
            task_id,
        )
        for task_id in orphaned_tasks(conn)
    ]


def orphaned_tasks(conn: sqlite3.Connection) -> list[str]:
    """Tasks ``in_progress`` with no running session (every one, until sessions exist)."""
    has_sessions = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'delivery_sessions'"
    ).fetchone()
    running = (
        " AND id NOT IN (SELECT task_id FROM delivery_sessions WHERE status = 'running')"
        if has_sessions
        else ""
    )
    query = f"SELECT id FROM delivery_tasks WHERE status = 'in_progress'{running} ORDER BY id"
    return [row[0] for row in conn.execute(query)]


def _leftover_findings(project: Project, conn: sqlite3.Connection) -> list[Finding]:
    return [
        _finding(
            code,
            "warning",
            f"{path} belongs to no session (a spawn crashed before it committed);"
            " `ithaca doctor --repair` removes it",
            path,
        )
        for path, code in leftovers(project, conn)
    ]


def leftovers(project: Project, conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Session worktrees and folders no session row names (``SESSION_PLACES``):
    ``(path relative to the project root, finding code)``. The integration worktrees of
    run-plan (``plan-<change>``) are not session places and are never listed."""
    known = {row[0] for row in conn.execute("SELECT id FROM delivery_sessions")}
    root = os.path.realpath(project.root)
    found = []
    for base, folder, code in SESSION_PLACES:
        top = (
            worktrees.work_path(project, folder)
            if base == "work"
            else os.path.join(project.runtime, folder)
        )
        if os.path.islink(top) or not os.path.isdir(top):
            continue
        for name in sorted(os.listdir(top)):
            if name in known or not ids.matches("ses", name):
                continue
            full = os.path.join(top, name)
            if stat.S_ISDIR(os.lstat(full).st_mode):
                found.append((os.path.relpath(full, root).replace(os.sep, "/"), code))
    return found


def _ledger_findings(project: Project, conn: sqlite3.Connection) -> list[Finding]:
    found = []
    if ledger_missing(project, conn):
        found.append(
            _finding(
                "LEDGER_MISSING",
                "warning",
                f"{LEDGER_PATH} is gone since this checkout last synced it; `ithaca doctor"
                " --repair` publishes it again",
                LEDGER_PATH,
            )
        )
    top = git_top(project.root)
    inside = top is not None and os.path.realpath(project.state_root).startswith(
        os.path.realpath(top) + os.sep
    )
    if inside and not sync_install.registered(project):
        found.append(
            _finding(
                "MERGE_DRIVER_MISSING",
                "warning",
                "Git would merge the team ledger line by line (clones do not copy the driver"
                " config); run `ithaca sync install-driver`",
                LEDGER_PATH,
            )
        )
    return found


def ledger_missing(project: Project, conn: sqlite3.Connection) -> bool:
    """Whether this checkout synced a ledger that is no longer on disk."""
    synced = conn.execute("SELECT 1 FROM delivery_ledger_base WHERE id = 1").fetchone()
    return synced is not None and registry.read_bytes(project.state_root, LEDGER_PATH) is None


def tracked_files(state_root: str) -> list[str]:
    """Regular files under the tracked planes, as state-root-relative POSIX paths; symlinks
    are never followed (a session worktree links ``.ithaca`` to its ancestor)."""
    found = []
    for plane in TRACKED_PLANES:
        top = os.path.join(state_root, *plane.split("/"))
        for folder, subfolders, names in os.walk(top, followlinks=False):
            subfolders.sort()
            for name in sorted(names):
                full = os.path.join(folder, name)
                if stat.S_ISREG(os.lstat(full).st_mode):
                    found.append(os.path.relpath(full, state_root).replace(os.sep, "/"))
    return found


def _finding(code: str, severity: str, message: str, subject: str, **details: Any) -> Finding:
    return {"code": code, "severity": severity, "message": message, "subject": subject, **details}
