"""The fingerprint of a project's working tree: whether its files changed, read from Git.

The end-of-turn critic must know what a turn changed, not what its commands said. In a
Git repository ``git status`` lists every path that differs from ``HEAD`` (tracked
changes, staged or not, and untracked files Git does not ignore) with the commit it
compares against; the fingerprint digests that listing with the size, modification time
and inode change time of each listed file, so editing an already changed file moves it
too (the change time cannot be set back by hand). Only the project's folder counts, also
when it sits inside a larger repository, and Ithaca's own folder is left out: its state
changes on every call. Outside Git, or when Git cannot answer within ``GIT_TIMEOUT_S``,
there is no fingerprint (None), and callers fall back on the calls they saw.

Two short ``git`` processes per call, started by ``kernel.git`` without ``subprocess``
(hook path: standard library only, and little of it).
"""

from __future__ import annotations

import os

from ithaca.kernel import git
from ithaca.kernel.canon import sha256

# Well under the host's PreToolUse timeout (5 s), which lets a call through when it passes.
GIT_TIMEOUT_S = 2.0
STATUS = ("status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all", "--no-renames")
EXCLUDED = ":(exclude).ithaca"
# Porcelain v2: how many space-separated fields come before the path, by entry type.
PATH_FIELD = {"1": 8, "u": 10, "?": 1}


def fingerprint(root: str) -> str | None:
    """A digest that changes whenever a file of the project outside ``.ithaca/``
    changes, or None when ``root`` is not in a Git work tree (or Git cannot say)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    listing = _git(root, *STATUS, "--", ".", EXCLUDED) if top is not None else None
    if top is None or listing is None:
        return None
    top_dir = os.fsdecode(top.rstrip(b"\n"))
    digest = sha256()
    digest.update(listing)
    for entry in listing.split(b"\0"):
        fields = PATH_FIELD.get(entry[:1].decode("ascii", "replace"))
        if fields is None:
            continue  # a header (# branch.oid …) or an ignored file
        path = os.fsdecode(entry.split(b" ", fields)[fields])
        digest.update(_stat(os.path.join(top_dir, path)))
    return digest.hexdigest()


def _stat(path: str) -> bytes:
    try:
        found = os.lstat(path)
    except OSError:
        return b"-\0"
    return f"{found.st_size}:{found.st_mtime_ns}:{found.st_ctime_ns}\0".encode()


def _git(root: str, *args: str) -> bytes | None:
    """``git -C root ARGS``'s standard output, or None when it fails or outlasts
    ``GIT_TIMEOUT_S``."""
    try:
        done = git.run(args, cwd=root, timeout=GIT_TIMEOUT_S)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None
