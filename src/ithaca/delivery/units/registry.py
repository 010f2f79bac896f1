"""The registry of tracked files Ithaca wrote: path, digest, kind, scope.

Tracked files are team authority (the database is rebuildable from them), so every one
Ithaca writes is registered with the SHA-256 of its bytes in the transaction that
commits it. ``doctor`` compares the registry with the disk (edited, missing and
unregistered files); dependent mutations re-read a file through ``read_verified``, so an
edit made behind Ithaca's back surfaces as a ``Corrupt`` error instead of being trusted.
"""

from __future__ import annotations

import errno
import os
from hashlib import sha256
from typing import Any

from ithaca.kernel import canon, clock
from ithaca.kernel.errors import Corrupt

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


def register(
    conn: sqlite3.Connection,
    path: str,
    digest: str,
    kind: str,
    scope_type: str,
    scope_id: str | None,
) -> None:
    """Record (or update) a written file; the caller holds the write transaction."""
    conn.execute(
        "INSERT INTO delivery_files (path, digest, kind, scope_type, scope_id, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET digest = excluded.digest,"
        " kind = excluded.kind, scope_type = excluded.scope_type,"
        " scope_id = excluded.scope_id, updated_at = excluded.updated_at",
        (path, digest, kind, scope_type, scope_id, clock.now()),
    )


def lookup(conn: sqlite3.Connection, path: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT path, digest, kind, scope_type, scope_id FROM delivery_files WHERE path = ?",
        (path,),
    ).fetchone()
    if row is None:
        return None
    return dict(zip(("path", "digest", "kind", "scope_type", "scope_id"), row, strict=True))


def file_digest(state_root: str, path: str) -> str | None:
    """The SHA-256 of the file at ``path`` under the state root, None when absent."""
    data = read_bytes(state_root, path)
    return None if data is None else canon.digest_bytes(data)


def read_bytes(state_root: str, path: str) -> bytes | None:
    """The bytes at ``path`` under the state root, or None when there is no regular file
    (a symlink counts as none: the kernel's writer refuses to write through it)."""
    return read_no_follow(os.path.join(state_root, path))


def read_no_follow(absolute: str) -> bytes | None:
    """The bytes of the file at ``absolute``, None when absent or a symlink."""
    try:
        fd = os.open(absolute, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    with open(fd, "rb") as stream:
        return stream.read()


def hash_file(absolute: str) -> tuple[str, int] | None:
    """SHA-256 and size of a checkout file (up to 16 MiB), read in chunks; None when absent."""
    hasher = sha256()
    size = 0
    try:
        with open(absolute, "rb") as stream:
            while chunk := stream.read(1 << 20):
                hasher.update(chunk)
                size += len(chunk)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return hasher.hexdigest(), size


def read_verified(state_root: str, path: str, digest: str, code: str) -> bytes:
    """The file's bytes, provided they still hash to ``digest``; else ``Corrupt`` ``code``."""
    data = read_bytes(state_root, path)
    actual = None if data is None else canon.digest_bytes(data)
    if data is None or actual != digest:
        state = "is missing" if data is None else "was changed outside Ithaca"
        raise Corrupt(
            code,
            f"{path} {state}; run `ithaca doctor` to see your options",
            {"path": path, "expected": digest, "actual": actual},
        )
    return data
