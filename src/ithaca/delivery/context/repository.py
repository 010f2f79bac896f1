"""The Git part of a Context Envelope: head and branch, and for ``full`` the scope digest
and the drift class (docs/delivery.md, "context").

Head and branch come straight from ``.git`` (``HEAD``, loose refs, ``packed-refs``), so
the summary envelope an agent asks for on every turn spawns no process. The full
envelope pays for ``git`` itself: ``scope_digest`` is the digest of the sorted
``[path, blob_id]`` pairs of every tracked and untracked-but-not-ignored file in the
baseline scope outside ``.ithaca/``, the blob id being the index's for a clean file and
``git hash-object``'s for a modified or untracked one, so the digest follows the working
tree and not only the commit.
"""

from __future__ import annotations

import os
from typing import Any

from ithaca.kernel import canon, git

GIT_TIMEOUT_S = 20
STATE_FOLDER = ".ithaca/"


def head(work_root: str) -> dict[str, Any]:
    """``{head, branch, state}`` where ``state`` is ``no_git``, ``unborn``, ``detached`` or
    ``attached``; ``head`` is the commit id or None."""
    git_dir = _git_dir(work_root)
    if git_dir is None:
        return {"head": None, "branch": None, "state": "no_git"}
    text = _read(os.path.join(git_dir, "HEAD"))
    if text is None:
        return {"head": None, "branch": None, "state": "no_git"}
    text = text.strip()
    if not text.startswith("ref:"):
        return {"head": text or None, "branch": None, "state": "detached"}
    ref = text[4:].strip()
    branch = ref.removeprefix("refs/heads/")
    commit = _resolve(git_dir, ref)
    return {"head": commit, "branch": branch, "state": "attached" if commit else "unborn"}


def scope_state(work_root: str, scope_paths: list[str], state: str) -> dict[str, Any]:
    """``{scope_digest, drift}`` for the full envelope; ``state`` comes from ``head``."""
    if state == "no_git":
        return {"scope_digest": None, "drift": "no_git"}
    pairs, dirty = _scope_pairs(work_root, scope_paths)
    digest = None if pairs is None else canon.digest(pairs)
    if state == "unborn":
        drift = "unborn"
    elif dirty:
        drift = "dirty"
    elif state == "detached":
        drift = "detached"
    else:
        drift = "clean"
    return {"scope_digest": digest, "drift": drift}


def in_scope(path: str, scope_paths: list[str]) -> bool:
    """Whether ``path`` lies in the baseline scope (empty scope = the whole checkout)."""
    if path.startswith(STATE_FOLDER):
        return False
    if not scope_paths:
        return True
    return any(
        path == prefix.rstrip("/") or path.startswith(prefix.rstrip("/") + "/")
        for prefix in scope_paths
    )


def _scope_pairs(work_root: str, scope_paths: list[str]) -> tuple[list[list[str]] | None, bool]:
    staged = _git(work_root, "ls-files", "-z", "--stage")
    changed = _git(work_root, "ls-files", "-z", "--modified", "--others", "--exclude-standard")
    deleted = _git(work_root, "ls-files", "-z", "--deleted")
    if staged is None or changed is None or deleted is None:
        return None, False
    blobs: dict[str, str] = {}
    for line in _names(staged):
        meta, _, path = line.partition("\t")
        if in_scope(path, scope_paths):
            blobs[path] = meta.split(" ")[1]
    gone = {path for path in _names(deleted)}
    for path in gone:
        blobs.pop(path, None)
    fresh = sorted({path for path in _names(changed) if in_scope(path, scope_paths)} - gone)
    if fresh:
        hashed = _git(work_root, "hash-object", "--stdin-paths", stdin="\n".join(fresh) + "\n")
        if hashed is None:
            return None, True
        for path, blob in zip(fresh, hashed.split(), strict=True):
            blobs[path] = blob
    dirty = bool(fresh) or any(in_scope(path, scope_paths) for path in gone)
    return [[path, blobs[path]] for path in sorted(blobs)], dirty


def _git(work_root: str, *args: str, stdin: str | None = None) -> str | None:
    try:
        done = git.run(
            ["-c", "core.quotePath=false", *args],
            cwd=work_root,
            input=b"" if stdin is None else stdin.encode("utf-8"),
            timeout=GIT_TIMEOUT_S,
        )
    except OSError:
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "surrogateescape")


def _names(output: str) -> list[str]:
    return [name for name in output.split("\0") if name]


def _git_dir(work_root: str) -> str | None:
    dot_git = os.path.join(work_root, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    text = _read(dot_git)
    if text is None or not text.startswith("gitdir:"):
        return None
    target = text[len("gitdir:") :].strip()
    return os.path.normpath(os.path.join(work_root, target))


def _resolve(git_dir: str, ref: str) -> str | None:
    """The commit a ref names: a loose ref (here or in the common dir), else packed-refs."""
    common = _read(os.path.join(git_dir, "commondir"))
    folders = [git_dir]
    if common is not None:
        folders.append(os.path.normpath(os.path.join(git_dir, common.strip())))
    for folder in folders:
        loose = _read(os.path.join(folder, *ref.split("/")))
        if loose is not None and loose.strip():
            return loose.strip()
    for folder in folders:
        packed = _read(os.path.join(folder, "packed-refs"))
        for line in (packed or "").splitlines():
            commit, _, name = line.partition(" ")
            if name == ref:
                return commit
    return None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read()
    except (OSError, UnicodeDecodeError):
        return None
