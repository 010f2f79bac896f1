"""The journal's anchor: the last head Ithaca committed, kept beside the database.

The hash chain proves that every row fits the one before it, but not that nothing came
after the last row: deleting the tail, or emptying the database, leaves a chain that
verifies. So each write transaction that appended to the journal leaves, once committed,
its head (``seq`` and ``hash``) in ``.runtime/journal.anchor``; ``ithaca doctor`` reports
a journal that ends before its anchor, or no longer holds the anchored row, as tampering.
The file is written after the commit (a crash in between leaves it behind the journal,
never ahead) by a rename, so it is whole or absent.

The doctor also keeps the last point it verified (``journal.verified``), so a routine
check verifies only the rows appended since; ``ithaca doctor --full`` verifies all.
Standard library only (hook path).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

ANCHOR = "journal.anchor"
VERIFIED = "journal.verified"
# id(connection) -> its database folder, and the head its open transaction appended.
_FOLDERS: dict[int, str] = {}
_PENDING: dict[int, tuple[int, str]] = {}


def track(conn: sqlite3.Connection, database: str) -> None:
    """Remember where ``conn``'s database lives (its anchor goes beside it)."""
    _FOLDERS[id(conn)] = os.path.dirname(os.path.abspath(database))


def note(conn: sqlite3.Connection, seq: int, event_hash: str) -> None:
    """The open transaction on ``conn`` appended ``seq``."""
    _PENDING[id(conn)] = (seq, event_hash)


def committed(conn: sqlite3.Connection) -> None:
    """Publish the head the transaction appended, now that it is committed."""
    head = _PENDING.pop(id(conn), None)
    folder = _FOLDERS.get(id(conn))
    if head is not None and folder is not None:
        write(folder, ANCHOR, head)


def rolled_back(conn: sqlite3.Connection) -> None:
    _PENDING.pop(id(conn), None)


def write(folder: str, name: str, head: tuple[int, str]) -> None:
    """``seq hash`` in ``folder/name``, replaced whole; a folder that cannot take it (a
    read-only mount) leaves the anchor as it was, which the doctor will see."""
    path = os.path.join(folder, name)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="ascii") as handle:
            handle.write(f"{head[0]} {head[1]}\n")
        os.replace(temporary, path)
    except OSError:
        return


def read(folder: str, name: str) -> tuple[int, str] | None:
    """The head recorded in ``folder/name``, or None when there is none (or it is not one)."""
    try:
        with open(os.path.join(folder, name), encoding="ascii") as handle:
            seq, event_hash = handle.read().split()
        return int(seq), event_hash
    except (OSError, ValueError):
        return None
