"""Delivery's doctor check: the tracked files against the database, and what dead
processes left behind (docs/delivery.md, "doctor").

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
ledger's merge driver (``MERGE_DRIVER_MISSING``: clones do not copy it), and the
worktrees and branches sessions and run-plan made that nothing uses any more
(``WORKTREE_STALE``, ``BRANCH_STALE``: ``ithaca.delivery.doctor.stale``). Checking reads
only; changed files are reported, never repaired: only their author knows which side is
right.

The files a pending recoverable unit has moved or written are not reported one by one as
missing or unregistered, which would read like lost data: they are listed in the unit's
one finding (``RECOVERY_PENDING`` when its writer died, with the command that rolls it
back; ``UNIT_IN_PROGRESS``, for information, while its writer still runs), as
``ithaca.delivery.units.pending`` accounts for them.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ithaca.delivery.checkpoints import rows as checkpoints
from ithaca.delivery.doctor import REPAIR_COMMAND, stale
from ithaca.delivery.ledger import driver_setup as sync_install
from ithaca.delivery.ledger.format import LEDGER_PATH
from ithaca.delivery.sessions import leases, packets, worktrees
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.sync import inspect as sync_inspect
from ithaca.delivery.units import owners as processes
from ithaca.delivery.units import pending, registry
from ithaca.kernel import ids
from ithaca.kernel.errors import Corrupt
from ithaca.kernel.files import TEMP_NAME
from ithaca.kernel.project import Project, git_top

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

# Folders under the state root whose files only Ithaca writes, each one registered.
TRACKED_PLANES = ("specs", "decisions", "docs/research", "changes", "reports/templates")
# The one command that settles what a dead writer left.
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
    units = pending.pending_units(conn)
    files = _file_findings(project.state_root, conn, units)  # first: it fills units' files
    return [
        *files,
        *_checkpoint_findings(conn),
        *_intent_findings(conn, units),
        *_orphaned_session_findings(conn),
        *_orphaned_task_findings(conn),
        *_leftover_findings(project, conn),
        *stale.findings(project, conn),
        *_ledger_findings(project, conn),
    ]


def _file_findings(
    state_root: str, conn: sqlite3.Connection, units: list[pending.PendingUnit]
) -> list[Finding]:
    """Registered files against the disk; the files a pending unit accounts for are
    left to that unit's finding (``units``, whose ``files`` this fills)."""
    found = []
    registered = dict(conn.execute("SELECT path, digest FROM delivery_files ORDER BY path"))
    digests: dict[str, str | None] = {}

    def digest_of(path: str) -> str | None:
        if path not in digests:
            digests[path] = registry.file_digest(state_root, path)
        return digests[path]

    explained, moved_here = pending.explain(units, registered, digest_of)
    for path, digest in registered.items():
        if path in explained:
            continue
        actual = digest_of(path)
        moved = next((end for unit in units if (end := unit.moved_to(path))), None)
        if actual is None and moved is not None and digest_of(moved) is not None:
            moved_here.add(moved)  # reported here, not as the unit's
            found.append(
                _finding(
                    "FILE_DIGEST_MISMATCH",
                    "error",
                    f"{path} lies at {moved} while the unit that moved it is pending, and was"
                    " changed outside Ithaca; `ithaca doctor --repair` moves it back, then"
                    " restore it from Git or record the change anew",
                    path,
                    expected=digest,
                    actual=digest_of(moved),
                    now_at=moved,
                )
            )
        elif actual is None:
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
        if path in registered or path in moved_here:
            continue
        if pending.explain_unregistered(units, path, digest_of(path)):
            continue
        if TEMP_NAME.fullmatch(path.rsplit("/", 1)[-1]):
            continue  # a write's temp: in progress, or the kernel's TEMP_FILE_LEFT
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


def _intent_findings(conn: sqlite3.Connection, units: list[pending.PendingUnit]) -> list[Finding]:
    """One finding per unit a writer left unsettled: a pending one with every file it
    moved or wrote (``_file_findings`` filled ``units``) and the command that rolls it
    back; a committed one (its rows and files are in) with the command that finishes it."""
    found = []
    for unit in units:
        files = sorted(unit.files, key=lambda entry: entry["path"])
        details = {
            "intent": unit.intent_id,
            "op": unit.op,
            "intent_status": "pending",
            "owner_pid": unit.owner_pid,
            "files": files,
            "renames": unit.renames,
        }
        if unit.alive:
            found.append(
                _finding(
                    "UNIT_IN_PROGRESS",
                    "info",
                    f"{unit.op} {unit.intent_id} is being written by pid {unit.owner_pid}"
                    f" ({pending.describe(unit)}); its files land with its commit",
                    unit.intent_id,
                    **details,
                )
            )
            continue
        found.append(
            _finding(
                "RECOVERY_PENDING",
                "warning",
                f"{unit.op} {unit.intent_id} stopped before it committed (its writer, pid"
                f" {unit.owner_pid}, is gone): {_did(unit)}. Nothing is lost:"
                f" `{REPAIR_COMMAND}` rolls it back and restores every file as it was",
                unit.intent_id,
                fix=REPAIR_COMMAND,
                **details,
            )
        )
    rows = conn.execute(
        "SELECT id, op, owner_pid, owner_start FROM delivery_fs_intents"
        " WHERE status = 'committed' ORDER BY created_at, id"
    )
    for intent_id, op, pid, start in rows:
        if processes.is_alive(pid, start):
            continue
        found.append(
            _finding(
                "RECOVERY_PENDING",
                "warning",
                f"{op} {intent_id} committed, but its writer (pid {pid}) died before the"
                f" work after the commit; `{REPAIR_COMMAND}` finishes it",
                intent_id,
                intent=intent_id,
                op=op,
                intent_status="committed",
                owner_pid=pid,
                fix=REPAIR_COMMAND,
            )
        )
    return found


def _did(unit: pending.PendingUnit) -> str:
    """What a stopped unit did on disk, as the rest of a sentence."""
    done = pending.describe(unit)
    if done == "nothing on disk yet":
        return "it had written nothing yet but a temp file" if unit.files else "it wrote nothing"
    return f"it {done}"


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
    flight = sync_inspect.uncommitted_ledger(conn, project)
    if flight is not None:  # never imported: a publish's generation that did not commit
        severity = "info" if flight["severity"] == "info" else "warning"
        found.append(_finding(flight["code"], severity, flight["message"], LEDGER_PATH))
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
