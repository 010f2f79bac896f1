"""Evidence files: where a named path may point, and its SHA-256 when recorded and later.

Evidence is what moves a pursuit toward completion, so it is pinned by content: a path is
stored root-relative with the SHA-256 of its raw bytes, and every gate that relies on it
hashes the file again, so an edit after recording invalidates it. A path may not leave
the project root (directly, through ``..`` or through a symlink) nor point into
``.ithaca/.runtime/``, where Ithaca's own state lives (``EVIDENCE_PATH_UNSAFE``); it must
name a regular file (``EVIDENCE_MISSING``). File reads happen before any transaction.
"""

from __future__ import annotations

import os
import stat

from ithaca.kernel import canon
from ithaca.kernel.errors import Refused, invalid_field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_PATHS = 200


class Roots:
    """The project root paths are judged against, and the folder relative paths start in
    (the working directory on the CLI, the project root over MCP)."""

    __slots__ = ("root", "runtime", "base")

    def __init__(self, root: str, runtime: str, base: str):
        self.root = os.path.realpath(root)
        self.runtime = os.path.realpath(runtime)
        self.base = base


def record(paths: list[str], roots: Roots, pointer: str) -> list[dict[str, str]]:
    """``[{path, sha256}]`` for each named file, in order, duplicates kept once."""
    if len(paths) > MAX_PATHS:
        raise invalid_field(pointer, "TOO_MANY", f"at most {MAX_PATHS} evidence paths")
    pairs: list[dict[str, str]] = []
    for index, path in enumerate(paths):
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise invalid_field(f"{pointer}/{index}", "EMPTY", "an evidence path must be named")
        relative, real = _locate(os.path.join(roots.base, path.strip()), roots, path)
        digest = _hash(real)
        if digest is None:
            raise Refused("EVIDENCE_MISSING", f"{path!r} is not a regular file", {"path": relative})
        if all(pair["path"] != relative for pair in pairs):
            pairs.append({"path": relative, "sha256": digest})
    return pairs


def check(pair: dict[str, Any], roots: Roots) -> str | None:
    """Whether a recorded pair still holds: None, or ``EVIDENCE_MISSING`` /
    ``EVIDENCE_CHANGED`` (a path that has become unsafe counts as changed)."""
    try:
        _, real = _locate(os.path.join(roots.root, str(pair["path"])), roots, pair["path"])
    except Refused:
        return "EVIDENCE_CHANGED"
    digest = _hash(real)
    if digest is None:
        return "EVIDENCE_MISSING"
    return None if digest == pair["sha256"] else "EVIDENCE_CHANGED"


def _locate(candidate: str, roots: Roots, shown: object) -> tuple[str, str]:
    """The root-relative and real path of ``candidate``; refused when unsafe."""
    real = os.path.realpath(candidate)
    inside = real == roots.root or real.startswith(roots.root + os.sep)
    in_runtime = real == roots.runtime or real.startswith(roots.runtime + os.sep)
    if not inside or in_runtime:
        where = "Ithaca's runtime folder" if in_runtime else "outside the project"
        raise Refused(
            "EVIDENCE_PATH_UNSAFE",
            f"evidence {shown!r} resolves {where}",
            {"path": str(shown)},
        )
    return os.path.relpath(real, roots.root).replace(os.sep, "/"), real


def _hash(real: str) -> str | None:
    """The SHA-256 of a regular file's bytes, or None when it is not one."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return canon.digest_bytes(stream.read())
    finally:
        os.close(fd)
