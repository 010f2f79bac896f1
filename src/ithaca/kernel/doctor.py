"""``ithaca doctor``: check, repair, restore and rebuild the one state database.

The kernel checks what it owns (SQLite's ``integrity_check``, the schema version, the
hash chain) and keeps the database's lifeboats: verified backups, restore from one, and
a rebuild from tracked files when none is usable. Each part plugs in through the
registries below, so a later part adds its check, repair or rebuild without editing
this module.

Why the order of a repair: a backup comes first and must verify (``quick_check``, fsync,
a manifest naming the schema, the journal head and the file's SHA-256), or nothing is
repaired at all. Restore and rebuild never delete a database: the current one is moved
to ``.runtime/recovery/quarantine-<ts>/`` and moved back if the replacement fails. The
journal is never rewritten: a broken chain is reported with the user's options only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from typing import Any

from ithaca import collected, resolve
from ithaca.kernel import anchor, clock, journal, journal_check, lockdown
from ithaca.kernel.connection import LATEST_VERSION
from ithaca.kernel.errors import Corrupt, IthacaError, NotFound
from ithaca.kernel.files import fsync_file, write_atomic
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


def check(project: Any, store: Store, *, full: bool = False) -> dict[str, Any]:
    """Every finding as ``{code, severity, message, subject?}``; ``ok`` when none is an
    error; ``status`` healthy, degraded (warnings) or corrupt (errors); ``checks`` per id.
    Every journal row is checked each time; ``full`` re-derives every row's hash and runs
    SQLite's integrity check over the whole file."""
    conn = store.connection()
    anchored = anchor.read(project.runtime, anchor.ANCHOR)
    # Check id -> its findings; the journal and the parts are checked on a current schema.
    findings: dict[str, list[dict[str, Any]]] = {"integrity": [], "schema": []}
    journal_rows = {"byPages": 0, "derived": 0}
    integrity = _integrity(conn, full)
    if integrity != ["ok"]:
        findings["integrity"].append(_finding("INTEGRITY_FAILED", "error", "; ".join(integrity)))
    version = store.version()
    if version == 0 and anchored is not None:
        findings["schema"].append(
            _finding(
                "STATE_EMPTIED",
                "error",
                f"the database is empty, but Ithaca committed journal events up to seq"
                f" {anchored[0]}: it was emptied or replaced behind Ithaca's back; restore"
                " the latest backup (`ithaca doctor restore`) or rebuild from the tracked"
                " files (`ithaca doctor --rebuild`)",
            )
        )
    elif version < LATEST_VERSION:
        findings["schema"].append(
            _finding(
                "STATE_NEEDS_MIGRATION",
                "error",
                f"schema {version} < {LATEST_VERSION}; run `ithaca doctor --repair`",
            )
        )
    else:
        findings["journal"], journal_rows = _journal_findings(project, conn, anchored, full)
        for provider in PROVIDERS:
            findings[_part(provider)] = _call(provider, project, conn)
    events = conn.execute("SELECT count(*) FROM journal").fetchone()[0] if version else 0
    flat = [finding for found in findings.values() for finding in found]
    severities = {finding["severity"] for finding in flat}
    status = (
        "corrupt" if "error" in severities else "degraded" if "warning" in severities else "healthy"
    )
    return {
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
# the severity, and what the user can do.
RESTORE_OR_ACCEPT = (
    "; restore the latest backup (`ithaca doctor restore`), or accept the journal as it is"
    " now with `ithaca doctor lift-lockdown`"
)
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
    "ANCHOR_FORGED": ("error", RESTORE_OR_ACCEPT),
    "HEAD_FORGED": ("error", RESTORE_OR_ACCEPT),
    "ROLLED_BACK": ("error", RESTORE_OR_ACCEPT),
    "TAIL_MISSING": ("error", RESTORE_OR_ACCEPT),
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
                f"journal row {problem.seq}: {problem.problem}; the journal is never"
                " rewritten: restore a backup (`ithaca doctor restore`) or accept the break",
                subject=str(problem.seq),
                seq=problem.seq,
            )
            for problem in checked.problems
        ]
        for code, message in anchor.problems(project.runtime, conn):
            severity, advice = SEAL_FINDINGS[code]
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
    """Back up (verified) first, then migrate, then let each part repair what it can.

    A backup that fails is ``Corrupt`` ``BACKUP_FAILED`` and nothing is repaired."""
    taken = backup(project, store)
    done = store.migrate()
    conn = store.connection()
    for provider in REPAIRS:
        done.extend(_call(provider, project, conn))
    return {"backup": taken, "repaired": done}


# --- backups ------------------------------------------------------------------------------


def backup(project: Project, store: Store) -> dict[str, Any]:
    """A verified copy in ``backups/state-<UTC ts>.db`` with its manifest beside it."""
    folder = project.backups_dir
    name = f"state-{clock.file_stamp()}"
    temp = os.path.join(folder, f"{name}.db.tmp")
    target = os.path.join(folder, f"{name}.db")
    try:
        os.makedirs(folder, exist_ok=True)
        copy = sqlite3.connect(temp)
        try:
            store.connection().backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE")  # self-contained: no -wal beside it
            manifest = _describe(copy)
        finally:
            copy.close()
        fsync_file(temp)
        manifest["sha256"] = _sha256(temp)
        os.rename(temp, target)
        _fsync_folder(folder)
        write_atomic(folder, f"{name}.json", json.dumps(manifest, indent=2) + "\n")
    except (OSError, sqlite3.Error, IthacaError) as exc:
        _remove_quietly(temp)
        _remove_quietly(target)
        raise Corrupt(
            "BACKUP_FAILED",
            f"could not take a verified backup ({exc}); nothing was repaired",
            {"folder": folder},
        ) from exc
    return {"path": target, "manifest": manifest}


def restore(project: Project, store: Store, backup_path: str) -> dict[str, Any]:
    """Replace ``state.db`` with a verified backup; the current files are quarantined and
    moved back if the restored database does not verify once in place."""
    path, manifest = verified_backup(project, backup_path)
    store.close()
    quarantine = _quarantine(project)
    try:
        temp = f"{project.db_path}.restore.tmp"
        shutil.copyfile(path, temp)
        fsync_file(temp)
        os.rename(temp, project.db_path)
        _fsync_folder(os.path.dirname(project.db_path))
        restored = Store(project.db_path, backups_dir=project.backups_dir, migrate=False)
        try:
            problem = _verify(restored.connection(), manifest)
            if problem is not None:
                raise Corrupt("BACKUP_INVALID", f"the restored database {problem}")
            with restored.write() as conn:
                anchor.rebase_on_commit(conn)  # the user accepts this journal as it is
                journal.append(
                    conn,
                    actor="user",
                    kind="kernel.doctor_restored",
                    subject=os.path.basename(path),
                    payload={"backup": os.path.basename(path), "sha256": manifest["sha256"]},
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
    manifest, and it passes ``quick_check`` and its journal chain."""
    folder = os.path.realpath(project.backups_dir)
    candidate = backup_path if os.sep in backup_path else os.path.join(folder, backup_path)
    path = os.path.realpath(candidate)
    if os.path.dirname(path) != folder or not path.endswith(".db") or not os.path.isfile(path):
        raise NotFound(
            "BACKUP_NOT_FOUND",
            f"{backup_path} is not a backup in {project.backups_dir}",
            {"backup": backup_path},
        )
    try:
        with open(path[: -len(".db")] + ".json", encoding="utf-8") as stream:
            manifest = json.load(stream)
    except (OSError, ValueError) as exc:
        raise _invalid(backup_path, f"has no readable manifest ({exc})") from exc
    if _sha256(path) != manifest.get("sha256"):
        raise _invalid(backup_path, "does not match its manifest's SHA-256")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        problem = _verify(conn, manifest)
    except sqlite3.Error as exc:
        problem = f"cannot be read ({exc})"
    finally:
        conn.close()
    if problem is not None:
        raise _invalid(backup_path, problem)
    return path, manifest


# --- rebuild ------------------------------------------------------------------------------


def rebuild(project: Project, store: Store) -> dict[str, Any]:
    """Quarantine the database and load a new one from tracked files, part by part; the
    report names what each part loaded and, per table, the rows the old database had
    that the new one lacks."""
    store.close()
    old_sha = _sha256(project.db_path) if os.path.exists(project.db_path) else None
    quarantine = _quarantine(project)
    # A new journal starts: its anchor and head record start with it.
    records = [os.path.join(project.runtime, anchor.ANCHOR), anchor.head_path(project.runtime)]
    kept = {path: _read_quietly(path) for path in records}
    for path in records:
        _remove_quietly(path)
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
            _remove_quietly(project.db_path + suffix)
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


def _verify(conn: sqlite3.Connection, manifest: dict[str, Any]) -> str | None:
    """Why a database does not match its manifest, or None when it does."""
    if [row[0] for row in conn.execute("PRAGMA quick_check")] != ["ok"]:
        return "fails quick_check"
    described = _describe(conn)
    for key, value in described.items():
        if manifest.get(key) != value:
            return f"has {key} {value!r}, its manifest {manifest.get(key)!r}"
    if journal_check.verify(conn):
        return "has a broken journal chain"
    return None


def _describe(conn: sqlite3.Connection) -> dict[str, Any]:
    row = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    return {
        "user_version": int(conn.execute("PRAGMA user_version").fetchone()[0]),
        "journal_head_seq": row[0] if row else 0,
        "journal_head_hash": row[1] if row else journal.GENESIS,
    }


def _quarantine(project: Project) -> str:
    """Move ``state.db[-wal|-shm]`` to a fresh quarantine folder; returns the folder."""
    folder = os.path.join(project.runtime, "recovery", f"quarantine-{clock.file_stamp()}")
    os.makedirs(folder)
    for suffix in DB_SIDE_FILES:
        source = project.db_path + suffix
        if os.path.exists(source):
            os.rename(source, os.path.join(folder, "state.db" + suffix))
    _fsync_folder(folder)
    _fsync_folder(os.path.dirname(project.db_path))
    return folder


def _unquarantine(project: Project, folder: str) -> None:
    for suffix in DB_SIDE_FILES:
        _remove_quietly(project.db_path + suffix)
        kept = os.path.join(folder, "state.db" + suffix)
        if os.path.exists(kept):
            os.rename(kept, project.db_path + suffix)
    _fsync_folder(os.path.dirname(project.db_path))
    os.rmdir(folder)


def _invalid(backup_path: str, problem: str) -> Corrupt:
    return Corrupt(
        "BACKUP_INVALID",
        f"backup {backup_path} {problem}; nothing was restored",
        {"backup": backup_path},
    )


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


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_folder(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_quietly(path: str) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError:
        return None


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


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
