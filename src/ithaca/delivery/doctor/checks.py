"""Delivery's doctor provider: check, repair and rebuild (reference §11).

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

Repair, in order: settles dead writers' intents (the same recovery a service runs on
open); ends orphaned sessions as ``crashed`` (their task back to ``pending``, one more
failure on its circuit); returns in-progress tasks without a session to ``pending``;
removes leftover worktrees (their ``.ithaca`` link first, then the worktree and its
``ithaca/…`` branch) and session folders; publishes a missing ledger again. Each step
that did something journals ``delivery.doctor_repaired``. An interactive session's owner
is its host session, which Ithaca cannot see die, so only a session with an
``owner_pid`` (a run-plan worker) is judged by its process; the others only by their
lease. Leftovers are judged under the worktree lock spawns hold until they commit, so a
spawn in progress is never taken for one.

Rebuild loads a fresh database from the files: decisions (self-digest verified), changes
from their folders (status from the location), every tracked file and the team ledger
registered at their current digests. Tasks, baselines, checkpoints and change contracts
are not loaded from the ledger by the rebuild; they are reported as not recovered.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.checkpoints import tool as checkpoints
from ithaca.delivery.ledger import driver_setup as sync_install
from ithaca.delivery.ledger.format import LEDGER_PATH
from ithaca.delivery.records import tasks
from ithaca.delivery.schemas.dialect import check as check_schema
from ithaca.delivery.schemas.ids import IDEMPOTENCY_KEY
from ithaca.delivery.sessions import close as sessions_close
from ithaca.delivery.sessions import leases, packets, worktrees
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.sync import publish as sync_publish
from ithaca.delivery.units import owners as processes
from ithaca.delivery.units import registry
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import canon, clock, ids, journal
from ithaca.kernel.connection import write_transaction
from ithaca.kernel.errors import Corrupt
from ithaca.kernel.project import STATE_DIR_NAME, Project, git_top
from ithaca.kernel.store import WRITE_PATIENCE_S, Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

CHANGES_ARCHIVE = "changes/archive"
# Folders under the state root whose files only Ithaca writes, each one registered.
TRACKED_PLANES = ("specs", "decisions", "docs/research", "changes", "reports/templates")
# An archived change's folder is ``<yyyy-mm-dd>-<id>``.
ARCHIVE_DATE_LENGTH = len("2026-01-01-")
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

DOCTOR_DESCRIPTION = (
    "Check the state (inspect: store, journal, tracked files, checkpoints, interrupted "
    "writes) or repair it (verified backup first). Changed files are reported, not fixed."
)
DOCTOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": ["inspect", "repair"], "default": "inspect"},
        "idempotency_key": IDEMPOTENCY_KEY,
    },
    "additionalProperties": False,
}


def doctor(project: Project, store: Store, config: dict[str, Any], arguments: Any) -> Any:
    """The MCP ``doctor`` tool: the kernel's report, after a repair when asked."""
    from ithaca.kernel import doctor as kernel_doctor

    request = check_schema(DOCTOR_SCHEMA, arguments)
    repaired = kernel_doctor.repair(project, store) if request["operation"] == "repair" else {}
    report = kernel_doctor.check(project, store)
    return {**report, "repaired": repaired.get("repaired", []), "backup": repaired.get("backup")}


# --- check --------------------------------------------------------------------------------


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


# --- repair -------------------------------------------------------------------------------


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


def _discard_worktree(project: Project, path: str, session_id: str) -> None:
    branch = None
    try:
        named = worktrees.git(path, "symbolic-ref", "--short", "-q", "HEAD", check=False)
        head = named.stdout.strip()
        if head.startswith("ithaca/") and head.endswith(f"/{session_id}"):
            branch = head
        worktrees.discard(project, path, branch)
    except (OSError, subprocess.SubprocessError):
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


# --- rebuild ------------------------------------------------------------------------------


def rebuild(project: Project, store: Store, quarantined_db_sha256: str | None) -> dict[str, Any]:
    """Load delivery's rows from the tracked files into a fresh database."""
    state_root = project.state_root
    warnings: list[str] = []
    changes = _changes_on_disk(state_root)
    decisions = []
    for path in tracked_files(state_root):
        if _is_decision(path):
            value, problem = _decision(state_root, path, changes)
            if problem is None:
                decisions.append((path, value))
            else:
                warnings.append(f"{path} not loaded: {problem}")
    loaded_ids = {value["id"] for _, value in decisions}
    # Every file is read before the transaction opens: no file I/O inside a write.
    change_rows = [
        (
            change_id,
            "incident" if _exists(state_root, f"{folder}/diagnosis.md") else "standard",
            status,
            _title(state_root, folder) or change_id,
            folder,
        )
        for change_id, (folder, status) in sorted(changes.items())
    ]
    skipped = {path for path in tracked_files(state_root) if _is_decision(path)} - {
        path for path, _ in decisions
    }
    files = []
    for path in tracked_files(state_root):
        if path in skipped:
            continue
        digest = registry.file_digest(state_root, path)
        assert digest is not None
        files.append((path, digest, _kind(path), *_scope(path, changes)))
    ledger = registry.file_digest(state_root, LEDGER_PATH)
    if ledger is not None:
        files.append((LEDGER_PATH, ledger, "ledger", "project", None))
    now = clock.now()
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO delivery_changes (id, kind, status, title, contract,"
            " classification, path, revision, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, '{}', '{}', ?, 1, ?, ?)",
            [(*row, now, now) for row in change_rows],
        )
        for path, value in decisions:
            supersedes = value.get("supersedes")
            if supersedes is not None and supersedes not in loaded_ids:
                warnings.append(f"{path}: superseded decision {supersedes} was not loaded")
                supersedes = None
            conn.execute(
                "INSERT INTO delivery_decisions (id, scope_type, scope_id, path, digest, status,"
                " supersedes_id, question, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    value["id"],
                    value["scope"]["type"],
                    value["scope"]["id"],
                    path,
                    value["digest"],
                    value["status"],
                    supersedes,
                    value["question"],
                    now,
                ),
            )
        for path, digest, kind, scope_type, scope_id in files:
            registry.register(conn, path, digest, kind, scope_type, scope_id)
        registered = len(files)
        loaded = {"changes": len(changes), "decisions": len(decisions), "files": registered}
        journal.append(
            conn,
            actor="user",
            kind="delivery.doctor_rebuilt",
            subject=None,
            payload={"quarantined_db_sha256": quarantined_db_sha256, "loaded": loaded},
        )
    return {
        "part": "delivery",
        "loaded": loaded,
        "warnings": warnings,
        "notes": [
            f"tasks, baselines, checkpoints and change contracts are in {LEDGER_PATH}, which"
            " the rebuild registers but does not load: they are not recovered (changes get"
            " an empty contract)",
            *_plan_notes(state_root, changes),
        ],
    }


def _changes_on_disk(state_root: str) -> dict[str, tuple[str, str]]:
    """Change id → (folder, status): ``active`` under active/, ``archived`` under archive/."""
    found: dict[str, tuple[str, str]] = {}
    for plane, status in ((layout.CHANGES_ACTIVE, "active"), (CHANGES_ARCHIVE, "archived")):
        top = os.path.join(state_root, *plane.split("/"))
        names = sorted(os.listdir(top)) if os.path.isdir(top) else []
        for name in names:
            if not stat.S_ISDIR(os.lstat(os.path.join(top, name)).st_mode):
                continue
            change_id = name if status == "active" else name[ARCHIVE_DATE_LENGTH:]
            found[change_id] = (f"{plane}/{name}", status)
    return found


def _is_decision(path: str) -> bool:
    parts = path.split("/")
    return path.endswith(".json") and (
        path.startswith(layout.BASELINE_DECISIONS + "/")
        or (parts[0] == "changes" and len(parts) == 5 and parts[3] == "decisions")
    )


def _decision(
    state_root: str, path: str, changes: dict[str, tuple[str, str]]
) -> tuple[dict[str, Any], str | None]:
    """A decision file's value and why it cannot be loaded (None when it can)."""
    try:
        value = json.loads(registry.read_bytes(state_root, path) or b"")
        fits = canon.digest_excluding(value, "digest") == value.get("digest")
    except (ValueError, TypeError, AttributeError):
        return {}, "not a readable Decision Record"
    if not fits:
        return value, "fails its own digest"
    if f"{value.get('id')}.json" != path.rsplit("/", 1)[1]:
        return value, "its id differs from its file name"
    scope_type, scope_id = _scope(path, changes)
    if value.get("scope") != {"type": scope_type, "id": scope_id}:
        return value, "its scope differs from its folder"
    return value, None


def _scope(path: str, changes: dict[str, tuple[str, str]]) -> tuple[str, str | None]:
    for change_id, (folder, _) in changes.items():
        if path.startswith(folder + "/"):
            return "change", change_id
    return "baseline", None


def _kind(path: str) -> str:
    name = path.rsplit("/", 1)[1]
    if _is_decision(path):
        return "decision"
    return {
        "intent.md": "intent",
        "diagnosis.md": "diagnosis",
        "plan.json": "plan",
        "plan.md": "plan",
    }.get(name, "artifact")


def _title(state_root: str, folder: str) -> str | None:
    """The first Markdown heading of a change's intent.md."""
    data = registry.read_bytes(state_root, f"{folder}/intent.md") or b""
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip() or None
    return None


def _plan_notes(state_root: str, changes: dict[str, tuple[str, str]]) -> list[str]:
    notes = []
    for change_id, (folder, _) in sorted(changes.items()):
        try:
            plan = json.loads(registry.read_bytes(state_root, f"{folder}/plan.json") or b"")
            named = [task["id"] for task in plan["tasks"]]
        except (ValueError, KeyError, TypeError):
            continue
        notes.append(
            f"{change_id}: plan.json names tasks {', '.join(named)}; kept as a registered file,"
            " the tasks are in the ledger, not loaded"
        )
    return notes


def _exists(state_root: str, path: str) -> bool:
    return registry.read_bytes(state_root, path) is not None


def _finding(code: str, severity: str, message: str, subject: str, **details: Any) -> Finding:
    return {"code": code, "severity": severity, "message": message, "subject": subject, **details}
