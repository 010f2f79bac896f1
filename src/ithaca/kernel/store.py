"""The one SQLite store: WAL, a busy timeout, ``BEGIN IMMEDIATE`` for every write.

Why these choices: several processes (hooks, the MCP server, the CLI) share one file, so
WAL lets readers run beside the writer and ``busy_timeout`` makes writers queue instead
of failing (``kernel.connection`` sets the pragmas and owns the write transaction).
Connections are per thread because the MCP SDK runs synchronous
tools on worker threads. Migrations run on open in CLI and MCP processes, after a
backup of an existing database; hooks never migrate (they report
``STATE_NEEDS_MIGRATION`` instead).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ithaca.kernel import anchor, clock, journal
from ithaca.kernel.connection import LATEST_VERSION, connect, write_transaction
from ithaca.kernel.errors import Corrupt, Refused
from ithaca.kernel.migrations import MIGRATIONS

# How long a CLI or MCP write keeps queueing for the lock. SQLite's busy handler sleeps
# with growing pauses and is not fair, so under heavy contention one writer can wait out
# ``busy_timeout`` while others get through; such a writer simply asks again.
WRITE_PATIENCE_S = 30.0


class Store:
    """A handle on ``state.db`` that hands each thread its own connection."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        backups_dir: str | os.PathLike[str] | None = None,
        migrate: bool = True,
    ):
        self.path = os.fspath(path)
        self.backups_dir = backups_dir
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
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
        folder = os.fspath(self.backups_dir or os.path.join(os.path.dirname(self.path), "backups"))
        os.makedirs(folder, exist_ok=True)
        stamp = clock.now().replace(":", "").replace("-", "").replace(".", "")
        target = os.path.join(folder, f"state-{label}-{stamp}.db")
        with sqlite3.connect(target) as copy:
            self.connection().backup(copy)
        copy.close()
        return target

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()


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
