"""Opening SQLite the way Ithaca needs it, and one write transaction.

Every connection gets WAL, a busy timeout, foreign keys and ``synchronous=NORMAL``;
every write starts with ``BEGIN IMMEDIATE`` (a deferred transaction that reads and then
writes fails at once with ``SQLITE_BUSY_SNAPSHOT`` whatever the timeout). Hooks use this
module directly, so it imports nothing beyond SQLite and ``time``: no threading, no
contextlib.

SQLite is reached through ``_sqlite3``, the C module the ``sqlite3`` package wraps: the
same ``connect``, ``Connection`` and exception classes, without the package's
``datetime`` import and adapter set-up, which a hook would pay on every call. Modules on
the hook path name the exception classes through ``sqlite`` here, never ``sqlite3``.
"""

from __future__ import annotations

import os
import time

from ithaca import collected
from ithaca.kernel import anchor
from ithaca.kernel.errors import Conflict, Corrupt

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    import sqlite3 as sqlite
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any


def _import_sqlite() -> ModuleType:
    """``_sqlite3``, without the ``functools`` import its initialisation makes.

    The C module imports ``functools`` only to take ``lru_cache`` for its statement
    caches, and ``functools`` brings ``collections``, ``types``, ``operator`` and more:
    about 7 ms of every hook process on a slow machine, a third of a bare interpreter
    start. While ``functools`` is not loaded, the import sees a stand-in whose
    ``lru_cache`` builds the very C cache ``functools.lru_cache`` builds; the stand-in is
    removed at once, so a later ``import functools`` loads the real module.
    """
    import sys

    if "functools" in sys.modules:
        import _sqlite3

        return _sqlite3
    stand_in = type(sys)("functools")
    stand_in.lru_cache = _lru_cache  # type: ignore[attr-defined]
    sys.modules["functools"] = stand_in
    try:
        import _sqlite3
    finally:
        if sys.modules.get("functools") is stand_in:
            del sys.modules["functools"]
    return _sqlite3


def _lru_cache(maxsize: int | None = 128, typed: bool = False) -> Callable[[Any], Any]:
    """``functools.lru_cache`` without ``update_wrapper``: the same C wrapper."""
    from _functools import _lru_cache_wrapper

    def decorate(function: Any) -> Any:
        return _lru_cache_wrapper(function, maxsize, typed, _CacheInfo)

    return decorate


class _CacheInfo(tuple):  # type: ignore[type-arg]
    """What ``cache_info()`` returns: (hits, misses, maxsize, currsize)."""

    __slots__ = ()

    def __new__(cls, *values: Any) -> _CacheInfo:
        return tuple.__new__(cls, values)


if not TYPE_CHECKING:
    try:
        sqlite = _import_sqlite()
    except ImportError:  # pragma: no cover - built together with the package
        import sqlite3 as sqlite
    if not hasattr(sqlite, "connect"):  # pragma: no cover - a release that moved it
        import sqlite3 as sqlite

BUSY_TIMEOUT_MS = 5000


def connect(
    path: str | os.PathLike[str], *, readonly: bool = False, set_wal: bool = True
) -> sqlite3.Connection:
    """A connection with Ithaca's pragmas; autocommit so transactions are explicit.

    WAL is a property of the database file, set by every CLI and MCP process that opens
    it; re-asserting it costs over a millisecond per connection, so hooks, which never
    create the file, pass ``set_wal=False`` and only read the header."""
    try:
        if readonly:
            conn = sqlite.connect(
                f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
            )
        else:
            conn = sqlite.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if readonly:
            conn.execute("PRAGMA query_only = ON")
        else:
            conn.execute("PRAGMA journal_mode = WAL" if set_wal else "PRAGMA user_version")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        anchor.track(conn, os.fspath(path))
    except sqlite.DatabaseError as exc:
        raise Corrupt(
            "STATE_UNREADABLE", f"cannot open {path}: {exc}", {"path": str(path)}
        ) from exc
    return conn


class write_transaction:  # noqa: N801 - used like the context manager function it replaces
    """``with write_transaction(conn):`` — ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on
    any error; asks again for the lock until ``patience_s`` has passed."""

    __slots__ = ("conn", "patience_s")

    def __init__(self, conn: sqlite3.Connection, *, patience_s: float = 0.0):
        self.conn = conn
        self.patience_s = patience_s

    def __enter__(self) -> sqlite3.Connection:
        deadline = time.monotonic() + self.patience_s
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                anchor.begun(self.conn)  # no head a failed transaction left may be published
                return self.conn
            except sqlite.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise Conflict(
                        "CONFLICT", f"the store stayed busy: {exc}", {"reason": "store_busy"}
                    ) from exc

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        """Commit, and only once the commit returned move the journal's anchor; a
        ``COMMIT`` that fails (``SQLITE_FULL``, an I/O error) is rolled back and forgets
        the head it appended, so the anchor never names an event that was not committed
        (docs/architecture.md, the journal's anchor)."""
        if kind is None:
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                anchor.rolled_back(self.conn)
                try:
                    self._roll_back()
                except sqlite.Error:
                    pass  # the commit's own error is the one to report
                raise
            anchor.committed(self.conn)
        else:
            anchor.rolled_back(self.conn)
            self._roll_back()

    def _roll_back(self) -> None:
        """Roll back what is still open (SQLite may have rolled it back itself already)."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


# The schema version this code opens: the highest migration any part declares. The hook
# compares it with the database's and needs no more of the registry, which
# ``kernel.migrations`` builds in order (and checks) for the store that migrates.
LATEST_VERSION: int = max(version for version, _name, _sql in collected("MIGRATIONS"))


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version the database says it has (``PRAGMA user_version``)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)
