"""Verified copies of the state database, the ones ``ithaca doctor restore`` takes.

Every copy Ithaca keeps, a repair's and the store's automatic ones alike, is made the
same way: SQLite's online backup API (which reads the write-ahead log too) into a
temporary file held locked while it is written (``kernel.files``: a killed copy is told
from a live one), made self-contained, checked, fsynced, renamed into place, and given a
manifest beside it naming the schema, the journal head and the file's SHA-256. A copy
that fails ``quick_check`` or its journal chain is never named a backup: the newest
backup is always one that restores (docs/architecture.md, backups). ``newest_verified``
is the one every recovery message names.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from typing import Any

from ithaca.kernel import clock, files, journal, journal_check
from ithaca.kernel.errors import Corrupt, NotFound

# ``state-<UTC ts>.db`` (a repair's, or one taken by hand) and ``state-<UTC ts>-auto.db``
# (the store's), each with its manifest ``.json`` beside it.
NAME = re.compile(r"state-[0-9]{8}T[0-9]{9}Z(?:-auto)?\.db")
AUTO_SUFFIX = "-auto"
# What a backup's name is taken by: the copy, its manifest, a copy being written.
TAKEN = (".db", ".json", ".db.tmp")


def fresh_name(folder: str, suffix: str = "") -> str:
    """``state-<UTC time to the ms><suffix>``, taken by no backup in ``folder``: the next
    free millisecond where two copies fall in the same one."""
    ms = time.time_ns() // 1_000_000
    while True:
        stamp = clock.format_ms(ms).replace("-", "").replace(":", "").replace(".", "")
        name = f"state-{stamp}{suffix}"
        if not any(os.path.lexists(os.path.join(folder, name + end)) for end in TAKEN):
            return name
        ms += 1


class Damaged(Exception):
    """The database cannot serve as a backup; the message says why."""


def take(
    conn: sqlite3.Connection, folder: str, name: str, *, after: tuple[int, str] | None = None
) -> tuple[str, dict[str, Any]]:
    """Copy ``conn``'s database to ``folder/<name>.db`` with its manifest; returns the
    path and the manifest. The journal chain is re-derived from ``after`` (a row an
    earlier backup verified, when the copy still holds it) or from the start. Raises
    ``Damaged`` (nothing is left behind) or the ``OSError``/``sqlite3.Error`` that stopped
    it."""
    temp = os.path.join(folder, f"{name}.db.tmp")
    target = os.path.join(folder, f"{name}.db")
    held = None
    try:
        os.makedirs(folder, exist_ok=True)
        held = files.create_locked(temp)
        copy = sqlite3.connect(temp)
        try:
            conn.backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE")  # self-contained: no -wal beside it
            try:
                problem = damage(copy, after)
            except sqlite3.DatabaseError as exc:
                problem = f"cannot be read through ({exc})"
            manifest = describe(copy) if problem is None else {}
        finally:
            copy.close()
        if problem is not None:
            raise Damaged(problem)
        files.fsync_file(temp)
        manifest["sha256"] = sha256(temp)
        os.rename(temp, target)
        fsync_folder(folder)
        files.write_atomic(folder, f"{name}.json", json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        remove_quietly(temp)
        remove_quietly(target)
        raise
    finally:
        if held is not None:
            os.close(held)
    return target, manifest


def damage(conn: sqlite3.Connection, after: tuple[int, str] | None = None) -> str | None:
    """Why a database cannot serve as a backup (``quick_check``, its journal chain from
    ``after`` when the database still holds that row), or None when it can."""
    checked = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if checked != ["ok"]:
        return f"fails SQLite's quick_check ({'; '.join(checked[:3])})"
    if after is not None:
        row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (after[0],)).fetchone()
        after = after if row is not None and row[0] == after[1] else None
    broken = journal_check.verify(conn, after)
    if broken:
        return f"has a broken journal chain (row {broken[0].seq}: {broken[0].problem})"
    return None


def describe(conn: sqlite3.Connection) -> dict[str, Any]:
    """The manifest's description of a database: its schema and its journal head."""
    row = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    return {
        "user_version": int(conn.execute("PRAGMA user_version").fetchone()[0]),
        "journal_head_seq": row[0] if row else 0,
        "journal_head_hash": row[1] if row else journal.GENESIS,
    }


def verified(folder: str, backup_path: str) -> tuple[str, dict[str, Any]]:
    """The backup's path and manifest, once it lies in ``folder``, its bytes match the
    manifest, and it passes ``quick_check``, its journal chain and its manifest's head.
    Raises ``BACKUP_NOT_FOUND`` or ``BACKUP_INVALID``."""
    folder = os.path.realpath(folder)
    candidate = backup_path if os.sep in backup_path else os.path.join(folder, backup_path)
    path = os.path.realpath(candidate)
    if os.path.dirname(path) != folder or not path.endswith(".db") or not os.path.isfile(path):
        raise NotFound(
            "BACKUP_NOT_FOUND",
            f"{backup_path} is not a backup in {folder}",
            {"backup": backup_path},
        )
    try:
        with open(path[: -len(".db")] + ".json", encoding="utf-8") as stream:
            manifest = json.load(stream)
    except (OSError, ValueError) as exc:
        raise invalid(backup_path, f"has no readable manifest ({exc})") from exc
    if not isinstance(manifest, dict) or sha256(path) != manifest.get("sha256"):
        raise invalid(backup_path, "does not match its manifest's SHA-256")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        problem = matches(conn, manifest)
    except sqlite3.Error as exc:
        problem = f"cannot be read ({exc})"
    finally:
        conn.close()
    if problem is not None:
        raise invalid(backup_path, problem)
    return path, manifest


def matches(conn: sqlite3.Connection, manifest: dict[str, Any]) -> str | None:
    """Why a database does not match its manifest, or None when it does."""
    problem = damage(conn)
    if problem is not None:
        return problem
    for key, value in describe(conn).items():
        if manifest.get(key) != value:
            return f"has {key} {value!r}, its manifest {manifest.get(key)!r}"
    return None


def newest_verified(folder: str) -> str | None:
    """The path of the newest backup in ``folder`` (by name) that verifies; None when none
    does."""
    for name in sorted(names(folder), reverse=True):
        try:
            return verified(folder, os.path.join(folder, name))[0]
        except (NotFound, Corrupt):
            continue
    return None


def names(folder: str) -> list[str]:
    """The backups' file names in ``folder``, each with its manifest beside it."""
    try:
        listed = set(os.listdir(folder))
    except OSError:
        return []
    return [
        name for name in listed if NAME.fullmatch(name) and name[: -len(".db")] + ".json" in listed
    ]


def invalid(backup_path: str, problem: str) -> Corrupt:
    return Corrupt(
        "BACKUP_INVALID",
        f"backup {backup_path} {problem}; nothing was restored",
        {"backup": backup_path},
    )


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fsync_folder(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
