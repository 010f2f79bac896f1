"""The journal's anchor: the last head Ithaca committed, kept beside the database.

The hash chain proves that every row fits the one before it, but not that nothing came
after the last row: deleting the tail, or emptying the database, leaves a chain that
verifies. So each write transaction that appended to the journal leaves, once committed,
its head (``seq`` and ``hash``) in ``.runtime/journal.anchor``; ``ithaca doctor`` reports
a journal that ends before its anchor, or no longer holds the anchored row, as tampering.
The file is written after the commit (a crash in between leaves it behind the journal,
never ahead), in place: one fixed-length record in one ``pwrite``, sealed with a check of
its own. Replacing the file by a rename instead would cost every hook call the creation of
an inode and a directory update, about 0.4 ms on ext4; a reader that catches the record
half written sees the seal fail and reads again.

The doctor also keeps the last point it verified (``journal.verified``), so a routine
check verifies only the rows appended since; ``ithaca doctor --full`` verifies all.
Standard library only (hook path).
"""

from __future__ import annotations

import os

from ithaca.kernel.canon import sha256

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
    """The sealed record of ``head`` in ``folder/name``, written over the last one; a folder
    that cannot take it (a read-only mount) leaves the anchor as it was, which the doctor
    will see."""
    try:
        handle = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(handle, _record(head), 0)
        finally:
            os.close(handle)
    except OSError:
        return


def read(folder: str, name: str) -> tuple[int, str] | None:
    """The head recorded in ``folder/name``, or None when there is none (or it is not one)."""
    for _ in range(_READS):
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                line = handle.read().split(b"\n", 1)[0]
        except OSError:
            return None
        head = _parse(line)
        if head is not None:
            return head
    return None


# A record caught half written fails its seal; the writer's one pwrite is microseconds.
_READS = 3


def _record(head: tuple[int, str]) -> bytes:
    """``seq hash seal``: seq right-aligned in 20 places, so every record has one length."""
    body = f"{head[0]:>20} {head[1]}"
    return f"{body} {_seal(body)}\n".encode()


def _seal(body: str) -> str:
    return sha256(body.encode()).hexdigest()[:16]


def _parse(line: bytes) -> tuple[int, str] | None:
    """The head in a sealed record, else None (an older release's unsealed record counts as
    no anchor until the next commit writes one)."""
    try:
        seq, event_hash, seal = line.decode("ascii").split()
        return (int(seq), event_hash) if seal == _seal(f"{int(seq):>20} {event_hash}") else None
    except ValueError:  # also UnicodeDecodeError, and a record of other than three fields
        return None
