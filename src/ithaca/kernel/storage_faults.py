"""Storage faults by name: a full disk, a read-only file system, a permission refused, a
store another process holds, a disk that fails.

The operating system raises these as ``OSError`` and SQLite as its own exceptions
(``database or disk is full``, ``attempt to write a readonly database``, ``database is
locked``, ``unable to open database file``, ``disk I/O error``), which are not
``OSError``; none of them is an ``IthacaError``. ``storage_fault`` turns any of them into
the coded error every interface answers with (the CLI's ``error CODE: …``, the MCP
tool's ``isError`` JSON, the hook's refusal), naming the file or folder and the fix:

- ``DISK_FULL``: no space (or no inodes, or no quota) left where Ithaca writes;
- ``READ_ONLY_FILESYSTEM``: the file system holding the state is mounted read-only;
- ``PERMISSION_DENIED``: the user running Ithaca may not read or write its state;
- ``STORE_LOCKED``: another process holds the state database past Ithaca's patience;
- ``FILE_SYSTEM_ERROR``: any other failure of the file system (an I/O error, a path
  that is gone), with what the system said.

SQLite says why it failed, never where, and some of its answers have several causes (it
cannot open the database, or fails an I/O, on a full disk, a read-only mount and a
missing permission alike): the caller names the database the failing work used, and the
file system beside it is asked which cause holds. A database Ithaca cannot open for its
permissions keeps the lost-state code the hooks document for it (``STATE_UNREADABLE``,
docs/hooks.md); one that would not open for a full disk, a read-only mount or a lock is
not lost, and is answered with the fault instead of a restore or a rebuild.

Standard library and ``kernel.errors`` only: hooks use this module (docs/hooks.md,
failure policy).
"""

from __future__ import annotations

import errno
import os

from ithaca.kernel.errors import IthacaError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DISK_FULL = "DISK_FULL"
READ_ONLY_FILESYSTEM = "READ_ONLY_FILESYSTEM"
PERMISSION_DENIED = "PERMISSION_DENIED"
STORE_LOCKED = "STORE_LOCKED"
FILE_SYSTEM_ERROR = "FILE_SYSTEM_ERROR"
CODES = (DISK_FULL, READ_ONLY_FILESYSTEM, PERMISSION_DENIED, STORE_LOCKED, FILE_SYSTEM_ERROR)

# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_PERM = 3
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_READONLY_DBMOVED = _SQLITE_READONLY | (4 << 8)  # the file was moved or deleted
# What SQLite says for each, where it gives no code (before Python 3.11, or an error
# raised without one).
_SQLITE_WORDS = (
    ("database or disk is full", _SQLITE_FULL),
    ("readonly database", _SQLITE_READONLY),
    ("unable to open database file", _SQLITE_CANTOPEN),
    ("database is locked", _SQLITE_BUSY),
    ("database table is locked", _SQLITE_LOCKED),
    ("disk i/o error", _SQLITE_IOERR),
    ("access permission denied", _SQLITE_PERM),
)
# Ithaca's own errors a storage fault can stand behind: the store that would not open
# (``kernel.connection``, named by ``kernel.lost_state``), and a write that waited out
# its patience for the lock (``kernel.connection.write_transaction``).
_UNREADABLE = "STATE_UNREADABLE"
_CONFLICT = "CONFLICT"
_STORE_BUSY = "store_busy"
# How ``kernel.lost_state`` names a database it may not open (docs/hooks.md).
_PERMISSION = "permission"
_MAX_CHAIN = 8
# Less free space than this where SQLite failed an I/O is a full disk: it grows its shared
# memory file in 32 KiB steps and writes whole pages.
_NEARLY_FULL = 64 * 1024


def storage_fault(exc: BaseException, database: str | None = None) -> IthacaError | None:
    """The storage fault ``exc`` is, or stands for, as a coded error; None when it is not
    one (a bug, or an ``IthacaError`` that already says what to do).

    ``database`` is the state database the failing work used: SQLite's errors never name
    their file, so the message names it, and its file system is asked what a cause-less
    answer (cannot open, I/O error, read-only) means. An ``OSError`` names its own file.
    """
    if isinstance(exc, IthacaError):
        return _behind(exc, database)
    if isinstance(exc, OSError):
        return _os_fault(exc, database)
    code = _sqlite_code(exc)
    return None if code is None else _sqlite_fault(exc, code, database)


def _behind(exc: IthacaError, database: str | None) -> IthacaError | None:
    """The fault behind one of Ithaca's store errors: a write that waited out its patience
    is ``STORE_LOCKED``; a store that would not open is not lost when a full disk, a
    read-only file system, a lock or a permission stopped it. An I/O error or a path the
    file system cannot explain keeps the lost-state diagnosis, and so does a database
    whose own permissions it already names (``STATE_UNREADABLE``, docs/hooks.md)."""
    if exc.code == _CONFLICT and exc.details.get("reason") == _STORE_BUSY:
        return _locked(str(exc.__cause__ or exc.message), database, {"reason": _STORE_BUSY})
    if exc.code != _UNREADABLE:
        return None
    seen = {id(exc)}
    link: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        assert link is not None
        # ``raise … from None`` hides the context from a traceback, not from here.
        link = link.__cause__ if link.__cause__ is not None else link.__context__
        if link is None or id(link) in seen:
            return None
        seen.add(id(link))
        if isinstance(link, IthacaError):
            if link.code != _UNREADABLE:
                return None
            database = database or _text(link.details.get("path"))
            continue
        fault = storage_fault(link, database)
        if fault is None or fault.code == FILE_SYSTEM_ERROR:
            return None
        if fault.code == PERMISSION_DENIED and exc.details.get("problem") == _PERMISSION:
            return None  # already named, with its fix
        return fault
    return None


def _os_fault(exc: OSError, database: str | None) -> IthacaError:
    path = _text(exc.filename) or database
    what = exc.strerror or str(exc)
    details: dict[str, Any] = {"path": path, "errno": exc.errno, "error": what}
    number = exc.errno
    if number == errno.ENOSPC or number == getattr(errno, "EDQUOT", None):
        return _full(path, what, details)
    if number == errno.EROFS:
        return _read_only(path, details)
    if number in (errno.EACCES, errno.EPERM):
        return _denied([path] if path else [], what, details)
    where = f" on {path}" if path else ""
    return IthacaError(
        FILE_SYSTEM_ERROR,
        f"the file system failed{where} ({what}): check that the path exists and the disk"
        " is healthy, then run the command again (`ithaca doctor` checks Ithaca's state)",
        details,
    )


def _sqlite_fault(exc: BaseException, code: int, database: str | None) -> IthacaError | None:
    primary = code & 0xFF
    what = str(exc) or "SQLite failed"
    name = getattr(exc, "sqlite_errorname", None)
    details: dict[str, Any] = {
        "path": database,
        "sqlite": name or _NAMES.get(primary),
        "error": what,
    }
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return _locked(what, database, details)
    if primary == _SQLITE_FULL:
        return _full(database, what, details)
    if primary == _SQLITE_PERM:
        return _denied([database] if database else [], what, details)
    if primary not in (_SQLITE_READONLY, _SQLITE_CANTOPEN, _SQLITE_IOERR):
        return None  # not a storage fault: a corrupt file, a constraint, a bug
    if code == _SQLITE_READONLY_DBMOVED:
        return None  # the database was moved or deleted under it: a loss, not a fault
    probed = _probe(database, details, what)
    if probed is not None:
        return probed
    if primary == _SQLITE_IOERR:
        where = f" on {database}" if database else ""
        return IthacaError(
            FILE_SYSTEM_ERROR,
            f"the disk failed a read or write{where} ({what}): check the disk's health and"
            " free space (`dmesg` shows the system's errors), then run the command again"
            " (`ithaca doctor` checks Ithaca's state)",
            details,
        )
    # Cannot open, for no fault the file system shows (a folder gone: the lost-state
    # check's); read-only with every file writable (a connection opened read-only).
    return None


def _probe(database: str | None, details: dict[str, Any], what: str) -> IthacaError | None:
    """What the file system holding ``database`` says is wrong: mounted read-only, full,
    or closed to this user (the database, its folder, or its journal files)."""
    if not database:
        return None
    folder = os.path.dirname(os.path.abspath(database))
    try:
        info = os.statvfs(folder)
    except OSError:
        return None
    if info.f_flag & os.ST_RDONLY:
        return _read_only(database, details)
    if info.f_blocks and (info.f_bavail * info.f_frsize < _NEARLY_FULL or _no_inodes(info)):
        return _full(database, what, details)
    denied = [
        path
        for path, wanted in (
            (database, os.R_OK | os.W_OK),
            (folder, os.W_OK | os.X_OK),
            (f"{database}-wal", os.R_OK | os.W_OK),
            (f"{database}-shm", os.R_OK | os.W_OK),
        )
        if os.path.exists(path) and not os.access(path, wanted)
    ]
    if not denied:
        return None
    return _denied(denied, what, {**details, "path": denied[0], "paths": denied})


def _no_inodes(info: os.statvfs_result) -> bool:
    return bool(info.f_files) and info.f_favail == 0


def _full(path: str | None, what: str, details: dict[str, Any]) -> IthacaError:
    where = f"the disk holding {path}" if path else "the disk holding Ithaca's state"
    quota = details.get("errno") == getattr(errno, "EDQUOT", None)
    fix = "free some space or have the quota raised" if quota else "free some space on it"
    return IthacaError(
        DISK_FULL,
        f"{where} is full ({what}), so Ithaca could not write its state: {fix}, then run the"
        " command again",
        details,
    )


def _read_only(path: str | None, details: dict[str, Any]) -> IthacaError:
    where = path or "Ithaca's state"
    return IthacaError(
        READ_ONLY_FILESYSTEM,
        f"{where} is on a file system mounted read-only, so Ithaca cannot write its state"
        " there: remount it read-write (or work in a checkout on a writable disk), then run"
        " the command again",
        details,
    )


def _denied(paths: list[str], what: str, details: dict[str, Any]) -> IthacaError:
    """``PERMISSION_DENIED`` on ``paths`` (none known: the project's state folder)."""
    if not paths:
        return IthacaError(
            PERMISSION_DENIED,
            f"Ithaca may not write its state ({what}): run it as the user who owns the"
            " project's `.ithaca/` folder, or give yours read and write permission there,"
            " then run the command again",
            details,
        )
    listed = " ".join(paths)
    return IthacaError(
        PERMISSION_DENIED,
        f"permission denied on {' and '.join(paths)} ({what}): run Ithaca as the user who"
        f" owns {'it' if len(paths) == 1 else 'them'} (`ls -ld {listed}` shows the owner),"
        " or give yours read and write permission, then run the command again",
        details,
    )


def _locked(what: str, database: str | None, details: dict[str, Any]) -> IthacaError:
    where = database or "Ithaca's state database"
    return IthacaError(
        STORE_LOCKED,
        f"{where} is locked by another process, and stayed locked while Ithaca waited"
        f" ({what}): let that process finish (another Ithaca command, the MCP server, a"
        " hook, or a tool that opened the database), or stop it, then run the command again",
        {"path": database, **details},
    )


_NAMES = {
    _SQLITE_PERM: "SQLITE_PERM",
    _SQLITE_BUSY: "SQLITE_BUSY",
    _SQLITE_LOCKED: "SQLITE_LOCKED",
    _SQLITE_READONLY: "SQLITE_READONLY",
    _SQLITE_IOERR: "SQLITE_IOERR",
    _SQLITE_FULL: "SQLITE_FULL",
    _SQLITE_CANTOPEN: "SQLITE_CANTOPEN",
}


def _sqlite_code(exc: BaseException) -> int | None:
    """SQLite's extended result code for one of its errors (from its words where it gave
    none); None for any other exception."""
    if type(exc).__module__ not in ("sqlite3", "_sqlite3"):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code:
        return code
    said = str(exc).lower()
    for words, primary in _SQLITE_WORDS:
        if words in said:
            return primary
    return None


def _text(value: object) -> str | None:
    """A path as text: never a file descriptor's number."""
    if isinstance(value, bytes):
        return os.fsdecode(value)
    return value if isinstance(value, str) and value else None
