"""The one SQLite store: WAL, a busy timeout, ``BEGIN IMMEDIATE`` for every write.

Why these choices: several processes (hooks, the MCP server, the CLI) share one file, so
WAL lets readers run beside the writer and ``busy_timeout`` makes writers queue instead
of failing (``kernel.connection`` sets the pragmas and owns the write transaction).
Connections are per thread because the MCP SDK runs synchronous
tools on worker threads. Migrations run on open in CLI and MCP processes, after a
backup of an existing database; hooks never migrate (they report
``STATE_NEEDS_MIGRATION`` instead).

Backups, so that a lost database or a lost write-ahead log costs little (docs/architecture.md,
backups): a store the CLI or the MCP server opens (``auto_backup``) takes a verified copy
(``keep_backup``, ``kernel.backups``: what ``ithaca doctor restore`` takes) on closing
when it wrote since its last copy, and, for a store open longer (the MCP server's), after
a write once its last copy is ``BACKUP_EVERY_S`` old. A copy costs time in proportion to
the database's size, so past ``SMALL_DATABASE_BYTES`` one is taken only once the newest
automatic copy of any process is ``BACKUP_EVERY_S`` old; the newest ``AUTO_BACKUPS_KEPT``
are kept. Hooks never back up: a hook has a deadline.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ithaca.kernel import anchor, backups, clock, journal
from ithaca.kernel.connection import LATEST_VERSION, connect, write_transaction
from ithaca.kernel.errors import Corrupt, Refused
from ithaca.kernel.migrations import MIGRATIONS

# How long a CLI or MCP write keeps queueing for the lock. SQLite's busy handler sleeps
# with growing pauses and is not fair, so under heavy contention one writer can wait out
# ``busy_timeout`` while others get through; such a writer simply asks again.
WRITE_PATIENCE_S = 30.0
# When a store that wrote takes an automatic verified backup: after every write while
# the database is this small (a copy then costs about 0.1 s), else once the newest
# automatic copy is this old (a copy costs about 3 s at 70 MB); how many are kept.
SMALL_DATABASE_BYTES = 8 << 20
BACKUP_EVERY_S = 60.0
AUTO_BACKUPS_KEPT = 5


class Store:
    """A handle on ``state.db`` that hands each thread its own connection."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        backups_dir: str | os.PathLike[str] | None = None,
        migrate: bool = True,
        auto_backup: bool = False,
    ):
        self.path = os.fspath(path)
        self.backups_dir = backups_dir
        self.auto_backup = auto_backup
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._wrote = False  # since the last automatic backup
        self._backed_up_at = time.monotonic()  # a short command backs up once, on closing
        if migrate:
            self.migrate()

    def connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on error."""
        conn = self.connection()
        with write_transaction(conn, patience_s=WRITE_PATIENCE_S):
            yield conn
        if self.auto_backup:
            self._wrote = True
            if time.monotonic() - self._backed_up_at >= BACKUP_EVERY_S and self._backup_due():
                self.keep_backup()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several reads (a deferred transaction)."""
        conn = self.connection()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def version(self) -> int:
        return int(self.connection().execute("PRAGMA user_version").fetchone()[0])

    def migrate(self) -> list[str]:
        """Bring the schema to the latest version; returns the names applied."""
        conn = self.connection()
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if current > LATEST_VERSION:
            raise Refused(
                "STATE_TOO_NEW",
                f"state.db has schema {current}; this Ithaca knows up to {LATEST_VERSION}",
                {"version": current, "latest": LATEST_VERSION},
            )
        if current == LATEST_VERSION:
            return []
        anchored = anchor.read(os.path.dirname(os.path.abspath(self.path)), anchor.ANCHOR)
        if current == 0 and anchored is not None:
            # An empty file where Ithaca had committed events: emptied or replaced, not new.
            raise Corrupt(
                "STATE_EMPTIED",
                f"{self.path} is empty, but Ithaca had committed journal events up to seq"
                f" {anchored[0]}; restore the latest backup (`ithaca doctor restore`) or"
                " rebuild from the tracked files (`ithaca doctor --rebuild`)",
                {"anchoredSeq": anchored[0]},
            )
        if current > 0:
            self.backup(f"pre-migration-v{current}")
        applied: list[str] = []
        with write_transaction(conn):
            current = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if current == 0:  # a new database where none was anchored: a new journal starts
                anchor.rebase_on_commit(conn)
            for migration in MIGRATIONS:
                if migration.version <= current:
                    continue
                for statement in split_statements(migration.sql()):
                    conn.execute(statement)
                applied.append(migration.name)
            if applied:
                conn.execute(f"PRAGMA user_version = {LATEST_VERSION}")
                journal.append(
                    conn,
                    actor="system",
                    kind="kernel.migrated",
                    subject=None,
                    payload={"from": current, "to": LATEST_VERSION, "applied": applied},
                )
        return applied

    def backup(self, label: str) -> str:
        """A consistent copy of the database through SQLite's online backup API."""
        folder = self._backups_folder()
        os.makedirs(folder, exist_ok=True)
        stamp = clock.now().replace(":", "").replace("-", "").replace(".", "")
        target = os.path.join(folder, f"state-{label}-{stamp}.db")
        with sqlite3.connect(target) as copy:
            self.connection().backup(copy)
        copy.close()
        return target

    def keep_backup(self) -> str | None:
        """A verified copy, ``backups/state-<time>-auto.db`` with its manifest
        (``kernel.backups``), the oldest automatic ones beyond ``AUTO_BACKUPS_KEPT``
        removed. None where it could not be taken (a full disk, a damaged database): the
        write it follows stands, and the next write tries again. Never of a journal that
        lost events Ithaca committed (``anchor.behind``): such copies would rotate the good
        ones away. The chain is re-derived only past the newest copy's head."""
        if anchor.behind(self.connection()):
            return None
        folder = self._backups_folder()
        name = backups.fresh_name(folder, backups.AUTO_SUFFIX)
        try:
            target, _ = backups.take(self.connection(), folder, name, after=_newest_head(folder))
        except (OSError, sqlite3.Error, backups.Damaged):
            return None
        self._wrote = False
        self._backed_up_at = time.monotonic()
        _rotate(folder)
        return target

    def _backup_due(self) -> bool:
        """Whether the database is small enough to copy after every write, or its newest
        automatic copy (any process's) is ``BACKUP_EVERY_S`` old."""
        try:
            size = sum(os.path.getsize(self.path + end) for end in ("", "-wal"))
        except OSError:
            size = 0
        if size <= SMALL_DATABASE_BYTES:
            return True
        folder = self._backups_folder()
        auto = _automatic(folder)
        try:
            newest = os.path.getmtime(os.path.join(folder, auto[-1])) if auto else 0.0
        except OSError:
            newest = 0.0
        return time.time() - newest >= BACKUP_EVERY_S

    def _backups_folder(self) -> str:
        return os.fspath(self.backups_dir or os.path.join(os.path.dirname(self.path), "backups"))

    def close(self) -> None:
        if self.auto_backup and self._wrote and self._backup_due():
            self.keep_backup()
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()


def _rotate(folder: str) -> None:
    """Remove the oldest automatic backups beyond ``AUTO_BACKUPS_KEPT``; a backup taken
    by hand or before a migration or a repair is never removed."""
    auto = _automatic(folder)
    for name in auto[: max(len(auto) - AUTO_BACKUPS_KEPT, 0)]:
        backups.remove_quietly(os.path.join(folder, name[: -len(".db")] + ".json"))
        backups.remove_quietly(os.path.join(folder, name))


def _newest_head(folder: str) -> tuple[int, str] | None:
    """The journal head the newest automatic backup's manifest names (its chain verified
    when it was taken), or None."""
    auto = _automatic(folder)
    if not auto:
        return None
    try:
        with open(os.path.join(folder, auto[-1][: -len(".db")] + ".json"), encoding="utf-8") as f:
            manifest = json.load(f)
        return int(manifest["journal_head_seq"]), str(manifest["journal_head_hash"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _automatic(folder: str) -> list[str]:
    """The automatic backups' file names in ``folder``, oldest first."""
    return sorted(name for name in backups.names(folder) if backups.AUTO_SUFFIX in name)


def split_statements(script: str) -> list[str]:
    """Split a SQL script into statements (triggers' inner ``;`` respected)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
