"""File references for a Context Envelope: ``{path, digest, bytes}``, never bodies.

An envelope names the files it depends on by digest so that a reader can fetch them
lazily and tell when one moved. Hashing every referenced file on every ``context`` call
would dominate a warm server's answer, so digests are kept in an in-process cache keyed
by the file's ``(mtime_ns, size, inode, ctime_ns)``: an unchanged stat reuses the digest,
any write made since (by Ithaca or anyone) changes the stat and the file is hashed again.
Symlinks are never followed: a referenced path that is one counts as missing.
"""

from __future__ import annotations

import os
import stat as stat_module
import threading
from typing import Any

from ithaca.delivery.units import registry
from ithaca.kernel import canon

Ref = dict[str, Any]

_Stat = tuple[int, int, int, int]
_lock = threading.Lock()
_digests: dict[str, tuple[_Stat, str, bytes | None]] = {}
# Bodies kept with their digest only when small: decisions are re-read on every call.
KEEP_BODY_BYTES = 64 * 1024


def ref(base: str, path: str) -> Ref | None:
    """``{path, digest, bytes}`` of ``base/path`` as it is now, or None when absent."""
    found = _lookup(os.path.join(base, path), keep=False)
    if found is None:
        return None
    digest, size, _ = found
    return {"path": path, "digest": digest, "bytes": size}


def read(base: str, path: str) -> tuple[Ref, bytes] | None:
    """The ref and the bytes of a small file (decision records), from the cache if its stat
    is unchanged; None when absent."""
    found = _lookup(os.path.join(base, path), keep=True)
    if found is None:
        return None
    digest, size, body = found
    if body is None:
        return None
    return {"path": path, "digest": digest, "bytes": size}, body


def _lookup(absolute: str, *, keep: bool) -> tuple[str, int, bytes | None] | None:
    """``(digest, size, bytes)``; bytes only when ``keep`` (kept in the cache when small)."""
    try:
        info = os.lstat(absolute)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat_module.S_ISREG(info.st_mode):
        return None
    stat: _Stat = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
    with _lock:
        cached = _digests.get(absolute)
    if cached is not None and cached[0] == stat and (cached[2] is not None or not keep):
        return cached[1], info.st_size, cached[2]
    data = registry.read_no_follow(absolute)
    if data is None:
        return None
    digest = canon.digest_bytes(data)
    with _lock:
        _digests[absolute] = (stat, digest, data if len(data) <= KEEP_BODY_BYTES else None)
    return digest, len(data), data if keep else None
