"""``kernel.storage_faults``: what a fault of the disk or the store is called, and the fix
its message names, for errors SQLite and the system really raise.

The faults of a real full disk, read-only mount, refused permission and held lock, seen
through the CLI, the MCP server and the hooks, are in
``tests/reliability/test_storage_faults.py``.
"""

from __future__ import annotations

import errno
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ithaca.kernel import Conflict, Corrupt, IthacaError, Refused, connect, storage_fault
from ithaca.kernel.connection import write_transaction


def raised(action: object) -> BaseException:
    """What calling ``action`` raises (it must raise)."""
    try:
        action()  # type: ignore[operator]
    except BaseException as exc:  # noqa: BLE001 - the exception is the subject
        return exc
    raise AssertionError("nothing was raised")


def full_database(path: Path) -> sqlite3.Connection:
    """A database that may grow no further: SQLite answers ``database or disk is full``."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (x BLOB)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    return conn


def test_sqlites_full_database_is_disk_full_naming_the_database(tmp_path: Path):
    db = tmp_path / "state.db"
    conn = full_database(db)
    exc = raised(lambda: conn.execute("INSERT INTO t VALUES (zeroblob(100000))"))

    fault = storage_fault(exc, str(db))

    assert fault is not None and fault.code == "DISK_FULL"
    assert f"the disk holding {db} is full" in fault.message
    assert "free some space" in fault.message and "run the command again" in fault.message
    assert fault.details["sqlite"] == "SQLITE_FULL" and fault.details["path"] == str(db)
    assert json.loads(json.dumps(fault.to_dict())) == fault.to_dict()


def test_a_database_another_connection_holds_is_store_locked(tmp_path: Path):
    db = tmp_path / "state.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    waiting = sqlite3.connect(db, isolation_level=None, timeout=0)
    try:
        exc = raised(lambda: waiting.execute("BEGIN IMMEDIATE"))
    finally:
        holder.close()
        waiting.close()

    fault = storage_fault(exc, str(db))

    assert fault is not None and fault.code == "STORE_LOCKED"
    assert fault.message.startswith(f"{db} is locked by another process")
    assert "(database is locked)" in fault.message and "run the command again" in fault.message


def test_a_write_that_waited_out_its_patience_is_store_locked_and_keeps_its_reason(
    tmp_path: Path,
):
    db = tmp_path / "state.db"
    holder = connect(db)
    holder.execute("BEGIN IMMEDIATE")
    waiting = connect(db)
    waiting.execute("PRAGMA busy_timeout = 0")
    try:
        exc = raised(lambda: write_transaction(waiting).__enter__())
    finally:
        holder.close()
        waiting.close()
    assert isinstance(exc, Conflict)

    fault = storage_fault(exc, str(db))

    assert fault is not None and fault.code == "STORE_LOCKED"
    assert fault.details == {"path": str(db), "reason": "store_busy"}
    assert "database is locked" in fault.message


def test_the_systems_full_device_is_disk_full_naming_the_state_not_a_descriptor(
    tmp_path: Path,
):
    database = str(tmp_path / "state.db")
    with open("/dev/full", "wb", buffering=0) as device:  # noqa: PTH123 - a device
        exc = raised(lambda: device.write(b"x"))
    assert isinstance(exc, OSError) and exc.filename is None
    fd_named = OSError(errno.ENOSPC, "No space left on device", 7)

    for error in (exc, fd_named):
        fault = storage_fault(error, database)
        assert fault is not None and fault.code == "DISK_FULL"
        assert f"the disk holding {database} is full (No space left on device)" in fault.message
        assert " 7 " not in fault.message and fault.details["path"] == database


@pytest.mark.parametrize(
    ("number", "code", "fix"),
    [
        (errno.ENOSPC, "DISK_FULL", "free some space on it"),
        (errno.EDQUOT, "DISK_FULL", "have the quota raised"),
        (errno.EROFS, "READ_ONLY_FILESYSTEM", "remount it read-write"),
        (errno.EACCES, "PERMISSION_DENIED", "run Ithaca as the user who owns it"),
        (errno.EPERM, "PERMISSION_DENIED", "give yours read and write permission"),
        (errno.EIO, "FILE_SYSTEM_ERROR", "the disk is healthy"),
    ],
)
def test_an_os_error_is_named_by_its_errno_with_its_file(number: int, code: str, fix: str):
    exc = OSError(number, "what the system said", "/work/p/.ithaca/.runtime/blobs/ab")

    fault = storage_fault(exc, "/work/p/.ithaca/.runtime/state.db")

    assert fault is not None and fault.code == code
    assert "/work/p/.ithaca/.runtime/blobs/ab" in fault.message and fix in fault.message
    assert fault.details["errno"] == number


def test_a_read_only_connection_asked_to_write_is_no_storage_fault(tmp_path: Path):
    """Every file is writable: the write was the mistake, and it stays a bug."""
    db = tmp_path / "state.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()
    reader = connect(db, readonly=True)
    exc = raised(lambda: reader.execute("INSERT INTO t VALUES (1)"))
    reader.close()
    assert "readonly" in str(exc)

    assert storage_fault(exc, str(db)) is None


def test_errors_that_are_no_storage_fault_are_left_alone(tmp_path: Path):
    db = tmp_path / "state.db"
    db.write_bytes(b"\x00not a database\xff" * 500)
    corrupt = raised(lambda: sqlite3.connect(db).execute("SELECT 1 FROM t"))
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x UNIQUE)")
    conn.execute("INSERT INTO t VALUES (1)")
    duplicate = raised(lambda: conn.execute("INSERT INTO t VALUES (1)"))
    missing = raised(lambda: sqlite3.connect(tmp_path / "gone" / "state.db"))

    for exc in (corrupt, duplicate, missing, ValueError("a bug"), KeyError("x")):
        assert storage_fault(exc, str(db)) is None, exc
    assert storage_fault(Refused("SOME_CODE", "what to do"), str(db)) is None


def test_an_unreadable_store_keeps_its_diagnosis_unless_a_fault_stopped_it(tmp_path: Path):
    """``STATE_UNREADABLE`` from a store that would not open: a lock behind it is named
    (nothing is lost); a file that is not a database keeps its restore commands."""
    db = tmp_path / "state.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("ithaca.kernel.connection.BUSY_TIMEOUT_MS", 0)
            locked = raised(lambda: connect(db))
    finally:
        holder.close()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00not a database\xff" * 500)
    not_a_database = raised(lambda: connect(garbage))

    def diagnosed(opening: BaseException) -> BaseException:
        """As ``app.lost_database_named`` raises it: a new error, ``from None``."""
        try:
            raise opening
        except Corrupt:
            return raised(_raise_lost)

    assert isinstance(locked, Corrupt) and locked.code == "STATE_UNREADABLE"
    fault = storage_fault(diagnosed(locked))
    assert fault is not None and fault.code == "STORE_LOCKED"
    assert fault.message.startswith(f"{db} is locked")
    assert storage_fault(diagnosed(not_a_database)) is None


def _raise_lost() -> None:
    raise Corrupt("STATE_UNREADABLE", "the state database cannot be read", {}) from None


def test_sqlite_errors_without_a_code_are_named_by_their_words(tmp_path: Path):
    database = str(tmp_path / "state.db")
    said = {
        "database or disk is full": "DISK_FULL",
        "database is locked": "STORE_LOCKED",
        "database table is locked": "STORE_LOCKED",
    }
    for words, code in said.items():
        fault = storage_fault(sqlite3.OperationalError(words), database)
        assert fault is not None and fault.code == code, words


def test_a_fault_is_an_ithaca_error_with_the_shared_shape(tmp_path: Path):
    fault = storage_fault(OSError(errno.EROFS, "Read-only file system", str(tmp_path)))
    assert isinstance(fault, IthacaError) and fault.exit_code == 1
    assert set(fault.to_dict()) == {"code", "message", "details"}
    assert fault.message.startswith(f"{tmp_path} is on a file system mounted read-only")


def test_the_module_stays_light_enough_for_the_hooks():
    probe = (
        "import sys, ithaca.kernel.storage_faults as m;"
        "print(sorted(n for n in ('click', 'rich', 'mcp', 'sqlite3', 'pydantic')"
        " if n in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout

    assert loaded.strip() == "[]"
