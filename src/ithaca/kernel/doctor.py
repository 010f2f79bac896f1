"""``ithaca doctor``: check, repair, restore and rebuild the one state database.

The kernel checks what it owns (SQLite's ``integrity_check``, the schema version, the
hash chain) and keeps the database's lifeboats: verified backups, restore from one, and
a rebuild from tracked files when none is usable. Each part plugs in through the
registries below, so a later part adds its check, repair or rebuild without editing
this module.

Why the order of a repair: a backup comes first and must verify (the copy passes
``quick_check`` and its journal chain, is fsynced, and gets a manifest naming the schema,
the journal head and the file's SHA-256), or nothing is repaired at all. A copy of a
damaged database is never kept as a backup, so the newest backup is never one that cannot
be restored. Restore and rebuild never delete a database, and never need the current one
to be readable: it is moved, damaged or not, to ``.runtime/recovery/quarantine-<ts>/``
and moved back if the replacement fails. The journal is never rewritten: a broken chain
is reported with the user's options only.

Every damage the check finds names the command that recovers from it (``recovery``):
restoring the newest backup that verifies, by its path, or rebuilding from the tracked
files where none does (docs/delivery.md, ``doctor``). A database that cannot be opened at
all is ``kernel.lost_state``'s ``STATE_UNREADABLE``, which names the same commands.
Temporary files a killed write left (``kernel.files``) are reported, and removed by a
repair once no live writer holds them.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sqlite3
from typing import Any

from ithaca import collected, resolve
from ithaca.kernel import anchor, backups, clock, journal, journal_check, lockdown
from ithaca.kernel import files as kernel_files
from ithaca.kernel.connection import LATEST_VERSION
from ithaca.kernel.errors import Corrupt, IthacaError
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

# What each part plugs in, from its manifest ("module:function" targets, in part order):
# checks take (project, conn) and return findings; repairs take (project, conn) and return
# what they did; rebuilds take (project, store, quarantined_db_sha256) and return
# ``{part, loaded, warnings, notes}``, each loading its part from tracked files.
PROVIDERS: tuple[str, ...] = tuple(collected("DOCTOR_CHECKS"))
REPAIRS: tuple[str, ...] = tuple(collected("DOCTOR_REPAIRS"))
REBUILDS: tuple[str, ...] = tuple(collected("DOCTOR_REBUILDS"))

DB_SIDE_FILES = ("", "-wal", "-shm")
# A finding's severity as its check's status: an ``info`` finding (something worth
# knowing, nothing wrong) leaves its check ``ok``.
CHECK_STATUS = {"error": "error", "warning": "warning", "info": "ok"}
# The temp files Ithaca makes: ``kernel.files``' own, and a backup's while it is copied
# (``backups/state-<ts>[-auto].db.tmp``) or put in place (``state.db.restore.tmp``).
TEMP_NAMES = re.compile(
    rf"{kernel_files.TEMP_NAME.pattern}|{backups.NAME.pattern}\.tmp|state\.db\.restore\.tmp"
)
# Folders under the state root the temp sweep leaves alone (``fnmatch`` patterns): a
# session's worktree is a checkout of the project (its files are its own), and the
# backups of stale worktrees are copies.
TEMP_SKIP = ("worktrees", "*/worktrees", ".runtime/backups/*")
WORK_TEMP_SKIP = ("worktrees",)
# The findings that say the database itself is damaged, lost or not Ithaca's any more:
# each names the command that recovers (``recovery``).
DAMAGE = frozenset(
    {
        "INTEGRITY_FAILED",
        "DATABASE_UNREADABLE",
        "STATE_EMPTIED",
        "JOURNAL_CHAIN_BROKEN",
        "JOURNAL_UNREADABLE",
        "JOURNAL_TAIL_MISSING",
        "JOURNAL_ROLLED_BACK",
        "JOURNAL_ANCHOR_FORGED",
        "JOURNAL_HEAD_FORGED",
    }
)
REBUILD_COMMAND = "ithaca doctor --rebuild"
LIFT_COMMAND = "ithaca doctor lift-lockdown"
# The journal findings the user may also settle by accepting the journal as it is.
ACCEPTABLE = frozenset(
    {"JOURNAL_TAIL_MISSING", "JOURNAL_ROLLED_BACK", "JOURNAL_ANCHOR_FORGED", "JOURNAL_HEAD_FORGED"}
)


def check(project: Any, store: Store, *, full: bool = False) -> dict[str, Any]:
    """Every finding as ``{code, severity, message, subject?}``; ``ok`` when none is an
    error; ``status`` healthy, degraded (warnings) or corrupt (errors); ``checks`` per id.
    Every journal row is checked each time; ``full`` re-derives every row's hash and runs
    SQLite's integrity check over the whole file. Where the database is damaged, lost or
    replaced, each such finding and the report carry ``recovery``: the commands that
    recover, the newest backup that verifies first (``recovery``)."""
    conn = store.connection()
    anchored = anchor.read(project.runtime, anchor.ANCHOR)
    # Check id -> its findings; the journal and the parts are checked on a current schema.
    findings: dict[str, list[dict[str, Any]]] = {"integrity": [], "schema": []}
    journal_rows = {"byPages": 0, "derived": 0}
    integrity = _integrity(conn, full)
    if integrity != ["ok"]:
        findings["integrity"].append(_finding("INTEGRITY_FAILED", "error", "; ".join(integrity)))
    try:
        version = store.version()
    except sqlite3.DatabaseError as exc:
        _unless_busy(exc)
        findings["integrity"].append(_unreadable("the schema version", exc))
        version = -1
    if version == 0 and anchored is not None:
        findings["schema"].append(
            _finding(
                "STATE_EMPTIED",
                "error",
                f"the database is empty, but Ithaca committed journal events up to seq"
                f" {anchored[0]}: it was emptied or replaced behind Ithaca's back",
            )
        )
    elif 0 <= version < LATEST_VERSION:
        findings["schema"].append(
            _finding(
                "STATE_NEEDS_MIGRATION",
                "error",
                f"schema {version} < {LATEST_VERSION}; run `ithaca doctor --repair`",
            )
        )
    elif version > 0:
        try:
            findings["journal"], journal_rows = _journal_findings(project, conn, anchored, full)
        except sqlite3.DatabaseError as exc:
            _unless_busy(exc)
            findings["journal"] = [_unreadable("the journal", exc, "JOURNAL_UNREADABLE")]
        for provider in PROVIDERS:
            findings[_part(provider)] = _part_findings(provider, project, conn)
    findings["files"] = _temp_findings(project, findings)
    events = _events(conn) if version > 0 else 0
    flat = [finding for found in findings.values() for finding in found]
    damaged = [finding for finding in flat if finding["code"] in DAMAGE]
    recovery = recover(project) if damaged else None
    for finding in damaged:
        _name_recovery(finding, recovery or {})
    severities = {finding["severity"] for finding in flat}
    status = (
        "corrupt" if "error" in severities else "degraded" if "warning" in severities else "healthy"
    )
    report = {
        "ok": "error" not in severities,
        "status": status,
        "schemaVersion": version,
        "latestVersion": LATEST_VERSION,
        "journalEvents": events,
        # How this check read every row: by its sealed pages, or re-deriving its hash.
        "journalRows": journal_rows,
        "findings": flat,
        "checks": [entry for name, found in findings.items() for entry in _checks(name, found)],
    }
    if recovery is not None:
        report["recovery"] = recovery
    return report


def recover(project: Project) -> dict[str, Any]:
    """What recovers a damaged, lost or replaced database: ``{backup, commands}``, the
    newest backup that verifies (its path, or None) and the commands in order, restoring
    that backup first, then rebuilding from the tracked files."""
    backup = newest_verified_backup(project)
    commands = [REBUILD_COMMAND]
    if backup is not None:
        commands.insert(0, restore_command(backup))
    return {"backup": backup, "commands": commands}


def restore_command(backup_path: str) -> str:
    """The exact command that restores ``backup_path``."""
    return f"ithaca doctor restore {shlex.quote(backup_path)}"


def newest_verified_backup(project: Project) -> str | None:
    """The path of the newest backup that still verifies as ``doctor restore`` checks it;
    None when none does."""
    return backups.newest_verified(project.backups_dir)


def _name_recovery(finding: dict[str, Any], recovery: dict[str, Any]) -> None:
    """Append to a damage finding the commands that recover, and give it ``recovery``."""
    commands = list(recovery["commands"])
    if finding["code"] in ACCEPTABLE:
        commands = [*commands[:-1], LIFT_COMMAND]  # what was lost then stays lost
    said = {
        REBUILD_COMMAND: f"rebuild from the tracked files: `{REBUILD_COMMAND}`",
        LIFT_COMMAND: f"accept the journal as it is now: `{LIFT_COMMAND}`",
    }
    if recovery["backup"] is not None:
        text = f"restore the newest backup that verifies: `{commands[0]}`, or " + " or ".join(
            said[command] for command in commands[1:]
        )
    else:
        text = "no backup verifies, so " + " or ".join(said[command] for command in commands)
    finding["message"] = f"{finding['message']}; to recover, {text}"
    finding["recovery"] = {"backup": recovery["backup"], "commands": commands}


def _integrity(conn: sqlite3.Connection, full: bool) -> list[str]:
    """SQLite's ``integrity_check``: of the whole file with ``full``; else of every table
    but the journal, whose rows the journal check reads anyway (its indexes and the
    file's free pages are left to ``--full``). ``["ok"]`` when nothing is wrong."""
    try:
        if full:
            return [row[0] for row in conn.execute("PRAGMA integrity_check")]
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'journal'"
                " AND sql NOT LIKE 'CREATE VIRTUAL%'"
            )
        ]
        found = [
            row[0]
            for table in tables
            for row in conn.execute(f'PRAGMA integrity_check("{table.replace(chr(34), "")}")')
            if row[0] != "ok"
        ]
        return found or ["ok"]
    except sqlite3.DatabaseError as exc:
        return [str(exc)]


# What the anchor, the head record and the seal key can say, as the doctor reports it:
# the severity, and what the user can do (the damage codes get theirs from ``recover``).
SEAL_FINDINGS = {
    "SEAL_KEY_MISSING": (
        "error",
        "; Ithaca never makes a new key for a journal it sealed: put the key back from a"
        " backup of your home, or accept the journal as it is now (and a new key) with"
        " `ithaca doctor lift-lockdown`",
    ),
    "SEAL_KEY_UNREADABLE": (
        "warning",
        " (the agent's sandbox hides it on purpose), so the seals were not checked: run"
        " `ithaca doctor` in your own terminal",
    ),
    "ANCHOR_FORGED": ("error", ""),
    "HEAD_FORGED": ("error", ""),
    "ROLLED_BACK": ("error", ""),
    "TAIL_MISSING": ("error", ""),
}


def _journal_findings(
    project: Any, conn: sqlite3.Connection, anchored: tuple[int, str] | None, full: bool
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every row of the journal checked (``kernel.journal_check``: by its sealed pages, or
    re-derived; all re-derived with ``full``), and its head against the sealed anchor and
    the head record in the user's home (``kernel.anchor``). A journal found whole has its
    newly full pages sealed; one found broken never does, so each later check reports it
    again."""
    key, _ = anchor.load_key()
    checked = journal_check.check(conn, project.db_path, full=full, key=key)
    try:
        found = [
            _finding(
                "JOURNAL_CHAIN_BROKEN",
                "error",
                f"journal row {problem.seq}: {problem.problem}; the journal is never rewritten",
                subject=str(problem.seq),
                seq=problem.seq,
            )
            for problem in checked.problems
        ]
        for code, message in anchor.problems(project.runtime, conn):
            severity, advice = SEAL_FINDINGS.get(code, ("error", ""))
            found.append(_finding(f"JOURNAL_{code}", severity, message + advice))
        if not found:
            journal_check.seal(conn, checked, key)
        if checked.pages_unreadable and not full:
            found.append(
                _finding(
                    "JOURNAL_READ_BY_ROWS",
                    "info",
                    "every journal row was re-derived, which takes longer: its pages could"
                    f" not be read ({checked.pages_unreadable})",
                )
            )
    finally:
        checked.close()
    return found, {"byPages": checked.rows_by_pages, "derived": checked.rows_derived}


def repair(project: Project, store: Store) -> dict[str, Any]:
    """Back up (verified) first, then migrate, then let each part repair what it can,
    then remove the temp files killed writes left (none a live writer holds).

    A backup that fails is ``Corrupt`` ``BACKUP_FAILED`` and nothing is repaired."""
    taken = backup(project, store)
    done = store.migrate()
    conn = store.connection()
    for provider in REPAIRS:
        done.extend(_call(provider, project, conn))
    removed = abandoned_temps(project, remove=True)
    if removed:
        with store.write() as tx:
            journal.append(
                tx,
                actor="system",
                kind="kernel.doctor_repaired",
                subject="temp_files",
                payload={"step": "temp_files", "removed": removed},
            )
        done += [f"kernel: removed {path} (a temp file a killed write left)" for path in removed]
    return {"backup": taken, "repaired": done}


def abandoned_temps(project: Project, *, remove: bool = False) -> list[str]:
    """The temp files Ithaca made that no live writer holds (``kernel.files.abandoned_temps``):
    under the state folder, as state-root-relative paths, and in the work folder but its
    worktrees (a session's outputs), as ``.ithaca-work/…``; removed with ``remove``."""
    found = kernel_files.abandoned_temps(
        project.state_root, TEMP_NAMES, skip=TEMP_SKIP, remove=remove
    )
    shown = os.path.relpath(project.work_dir, project.root).replace(os.sep, "/")
    found += [
        f"{shown}/{path}"
        for path in kernel_files.abandoned_temps(
            project.work_dir, kernel_files.TEMP_NAME, skip=WORK_TEMP_SKIP, remove=remove
        )
    ]
    return found


def temp_path(project: Project, shown: str) -> str:
    """The full path of a temp file ``abandoned_temps`` names."""
    work = os.path.relpath(project.work_dir, project.root).replace(os.sep, "/") + "/"
    if shown.startswith(work):
        return os.path.join(project.root, shown)
    return os.path.join(project.state_root, shown)


# --- backups ------------------------------------------------------------------------------


def backup(project: Project, store: Store) -> dict[str, Any]:
    """A verified copy in ``backups/state-<UTC ts>.db`` with its manifest beside it
    (``kernel.backups``): a damaged database is ``BACKUP_FAILED`` with the commands that
    recover it, and leaves no backup behind (the newest backup stays one that restores)."""
    folder = project.backups_dir
    try:
        path, manifest = backups.take(store.connection(), folder, backups.fresh_name(folder))
    except backups.Damaged as exc:
        raise _damaged(project, str(exc)) from None
    except sqlite3.DatabaseError as exc:
        _unless_busy(exc)
        raise _damaged(project, f"cannot be copied ({exc})") from exc
    except (OSError, sqlite3.Error) as exc:
        raise Corrupt(
            "BACKUP_FAILED",
            f"could not take a verified backup in {folder} ({exc}); nothing was repaired;"
            " free space or fix the folder's permissions, then run `ithaca doctor --repair`"
            " again",
            {"folder": folder},
        ) from exc
    return {"path": path, "manifest": manifest}


def _damaged(project: Project, damage: str) -> Corrupt:
    """``BACKUP_FAILED`` for a database too damaged to back up, naming what recovers."""
    recovery = recover(project)
    finding = _finding("BACKUP_FAILED", "error", f"the database {project.db_path} {damage}")
    _name_recovery(finding, recovery)
    return Corrupt(
        "BACKUP_FAILED",
        f"{finding['message']}. No backup was taken of it and nothing was repaired",
        {"database": project.db_path, "recovery": recovery},
    )


def restore(project: Project, store: Store, backup_path: str) -> dict[str, Any]:
    """Replace ``state.db`` with a verified backup; the current files, which need not be
    readable (a damaged page, a zeroed header, a cut file), are quarantined unread and
    moved back if the restored database does not verify once in place."""
    path, manifest = verified_backup(project, backup_path)
    store.close()
    quarantine = _quarantine(project)
    try:
        temp = f"{project.db_path}.restore.tmp"
        backups.remove_quietly(temp)  # one a killed restore left
        held = kernel_files.create_locked(temp)
        try:
            with open(path, "rb") as source, open(held, "wb", closefd=False) as copy:
                shutil.copyfileobj(source, copy)
            os.fsync(held)
            os.rename(temp, project.db_path)
        finally:
            os.close(held)
        backups.fsync_folder(os.path.dirname(project.db_path))
        restored = Store(project.db_path, backups_dir=project.backups_dir, migrate=False)
        try:
            problem = backups.matches(restored.connection(), manifest)
            if problem is not None:
                raise Corrupt("BACKUP_INVALID", f"the restored database {problem}")
            with restored.write() as conn:
                anchor.rebase_on_commit(conn)  # the user accepts this journal as it is
                journal.append(
                    conn,
                    actor="user",
                    kind="kernel.doctor_restored",
                    subject=os.path.basename(path),
                    payload={
                        "backup": os.path.basename(path),
                        "sha256": manifest["sha256"],
                        "quarantine": os.path.relpath(quarantine, project.runtime),
                    },
                )
                if "effect_baseline" in _tables(conn):  # a backup from before lockdowns
                    lockdown.record_baseline(
                        conn, project, actor="user", reason="doctor restore", at=clock.now()
                    )
        finally:
            restored.close()
    except BaseException:
        _unquarantine(project, quarantine)
        raise
    return {"backup": path, "manifest": manifest, "quarantine": quarantine}


def verified_backup(project: Project, backup_path: str) -> tuple[str, dict[str, Any]]:
    """The backup's path and manifest, once it lies in ``backups/``, its bytes match the
    manifest, and it passes ``quick_check`` and its journal chain (``kernel.backups``)."""
    return backups.verified(project.backups_dir, backup_path)


# --- rebuild ------------------------------------------------------------------------------


def rebuild(project: Project, store: Store) -> dict[str, Any]:
    """Quarantine the database and load a new one from tracked files, part by part; the
    report names what each part loaded and, per table, the rows the old database had
    that the new one lacks."""
    store.close()
    old_sha = backups.sha256(project.db_path) if os.path.exists(project.db_path) else None
    quarantine = _quarantine(project)
    # A new journal starts: its anchor and head record start with it.
    records = [os.path.join(project.runtime, anchor.ANCHOR), anchor.head_path(project.runtime)]
    kept = {path: _read_quietly(path) for path in records}
    for path in records:
        backups.remove_quietly(path)
    parts = []
    try:
        fresh = Store(project.db_path, backups_dir=project.backups_dir)
        try:
            for provider in REBUILDS:
                parts.append(resolve(provider)(project, fresh, old_sha))
            with fresh.write() as conn:
                lockdown.record_baseline(
                    conn, project, actor="user", reason="doctor rebuild", at=clock.now()
                )
        finally:
            fresh.close()
    except BaseException:
        for suffix in DB_SIDE_FILES:
            backups.remove_quietly(project.db_path + suffix)
        _unquarantine(project, quarantine)
        for path, data in kept.items():
            if data is not None:
                with open(path, "wb") as stream:
                    stream.write(data)
        raise
    return {"quarantine": quarantine, "quarantined_db_sha256": old_sha, "parts": parts}


def losses(quarantine: str, conn: sqlite3.Connection) -> dict[str, Any]:
    """Per table, how many rows the quarantined database held beyond the new one."""
    old_path = os.path.join(quarantine, "state.db")
    try:
        old = sqlite3.connect(f"file:{old_path}?mode=ro", uri=True)
        try:
            counts = {table: _count(old, table) for table in _tables(old)}
        finally:
            old.close()
    except sqlite3.Error as exc:
        return {"unreadable": str(exc)}
    lost = {}
    new_tables = set(_tables(conn))
    for table, count in counts.items():
        remaining = _count(conn, table) if table in new_tables else 0
        if count > remaining:
            lost[table] = count - remaining
    return lost


# --- pieces -------------------------------------------------------------------------------


def _quarantine(project: Project) -> str:
    """Move ``state.db[-wal|-shm]`` to a fresh quarantine folder; returns the folder."""
    folder = os.path.join(project.runtime, "recovery", f"quarantine-{clock.file_stamp()}")
    os.makedirs(folder)
    for suffix in DB_SIDE_FILES:
        source = project.db_path + suffix
        if os.path.exists(source):
            os.rename(source, os.path.join(folder, "state.db" + suffix))
    backups.fsync_folder(folder)
    backups.fsync_folder(os.path.dirname(project.db_path))
    return folder


def _unquarantine(project: Project, folder: str) -> None:
    for suffix in DB_SIDE_FILES:
        backups.remove_quietly(project.db_path + suffix)
        kept = os.path.join(folder, "state.db" + suffix)
        if os.path.exists(kept):
            os.rename(kept, project.db_path + suffix)
    backups.fsync_folder(os.path.dirname(project.db_path))
    os.rmdir(folder)


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"
        )
    ]


def _count(conn: sqlite3.Connection, table: str) -> int:
    try:
        return int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
    except sqlite3.Error:
        return 0


def _read_quietly(path: str) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError:
        return None


def _unless_busy(exc: sqlite3.DatabaseError) -> None:
    """Raise ``exc`` again when it says the database is busy, not damaged."""
    if isinstance(exc, sqlite3.OperationalError) and any(
        word in str(exc) for word in ("locked", "busy")
    ):
        raise exc


def _unreadable(
    what: str, exc: BaseException, code: str = "DATABASE_UNREADABLE", **extra: Any
) -> dict[str, Any]:
    return _finding(code, "error", f"{what} could not be read from the database ({exc})", **extra)


def _part_findings(provider: str, project: Any, conn: sqlite3.Connection) -> list[Any]:
    """A part's findings; a part whose tables cannot be read (a damaged page) is one
    ``DATABASE_UNREADABLE`` finding, not a crash of the whole check."""
    try:
        return _call(provider, project, conn)
    except sqlite3.DatabaseError as exc:
        _unless_busy(exc)
        return [_unreadable(f"the {_part(provider)} part's state", exc, subject=_part(provider))]
    except IthacaError as exc:
        cause = exc.__cause__
        if not isinstance(cause, sqlite3.DatabaseError):
            raise
        _unless_busy(cause)
        return [_unreadable(f"the {_part(provider)} part's state", cause, subject=_part(provider))]


def _events(conn: sqlite3.Connection) -> int:
    try:
        return int(conn.execute("SELECT count(*) FROM journal").fetchone()[0])
    except sqlite3.DatabaseError:
        return 0  # reported by the journal check


def _temp_findings(
    project: Project, findings: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """``TEMP_FILE_LEFT`` for each temp file a killed write left under the state folder,
    but those a part's finding lists already (a pending unit's ``temp`` files)."""
    listed = {
        entry.get("path")
        for found in findings.values()
        for finding in found
        for entry in finding.get("files") or ()
        if isinstance(entry, dict)
    }
    return [
        _finding(
            "TEMP_FILE_LEFT",
            "warning",
            f"{path} is a temp file a write that was killed left behind; `ithaca doctor"
            " --repair` removes it",
            subject=path,
            path=temp_path(project, path),
        )
        for path in abandoned_temps(project)
        if path not in listed
    ]


def _call(provider: str, project: Any, conn: sqlite3.Connection) -> list[Any]:
    return list(resolve(provider)(project, conn))


def _part(provider: str) -> str:
    """``ithaca.delivery.doctor.checks:check`` → ``delivery``: a provider's check id."""
    return provider.split(":")[0].split(".")[1]


def _checks(name: str, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference's ``checks[]`` entries of one check id."""
    if not found:
        return [{"id": name, "status": "ok", "message": "ok", "details": {}}]
    return [
        {
            "id": name,
            "status": CHECK_STATUS.get(finding["severity"], "warning"),
            "code": finding["code"],
            "message": finding["message"],
            "details": {k: v for k, v in finding.items() if k not in ("code", "message")},
        }
        for finding in found
    ]


def _finding(code: str, severity: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"code": code, "severity": severity, "message": message, **extra}
