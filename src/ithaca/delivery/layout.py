"""Where delivery's tracked files live, and which paths an agent may name.

Paths of files Ithaca writes are POSIX paths relative to the state root (``.ithaca/``),
so they read the same in every checkout and in the team ledger. Paths an agent supplies
(artifact targets and sources, refs, declared task files) are checked lexically first:
relative, no ``..``, no NUL. Files read from the checkout are also checked on disk: no
symlink on the way (scanners never follow them: a session worktree links ``.ithaca`` to
its ancestor) and never inside the state root.
"""

from __future__ import annotations

import os
import stat

from ithaca.kernel.errors import InvalidInput

CHANGES_ACTIVE = "changes/active"
BASELINE_DECISIONS = "decisions/baseline"
# Where copied artifacts may go, relative to their scope's folder
# (docs/delivery.md, "The record tool").
CHANGE_SUBFOLDERS = (
    "research/",
    "delta/",
    "contexts/",
    "test/",
    "review/",
    "documentation/",
    "delivery/",
)
BASELINE_SUBFOLDERS = ("specs/", "docs/research/")


def change_folder(change_id: str) -> str:
    return f"{CHANGES_ACTIVE}/{change_id}"


def intent_path(change_id: str) -> str:
    return f"{change_folder(change_id)}/intent.md"


def diagnosis_path(change_id: str) -> str:
    return f"{change_folder(change_id)}/diagnosis.md"


def decision_path(change_id: str | None, decision_id: str) -> str:
    """A decision file: baseline-scoped when ``change_id`` is None."""
    folder = BASELINE_DECISIONS if change_id is None else f"{change_folder(change_id)}/decisions"
    return f"{folder}/{decision_id}.json"


def unsafe(pointer: str, path: str, problem: str, message: str) -> InvalidInput:
    return InvalidInput(
        "PATH_UNSAFE",
        f"{pointer}: {path!r} {message}",
        {"pointer": pointer, "problem": problem, "path": path},
    )


def relative(path: str, pointer: str) -> str:
    """``path`` as a normalised relative POSIX path (a trailing ``/`` kept), or
    ``PATH_UNSAFE`` for absolute paths, ``..``, NUL and backslashes."""
    if "\0" in path or "\\" in path:
        raise unsafe(pointer, path, "CHARACTER", "holds a NUL byte or a backslash")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise unsafe(pointer, path, "ABSOLUTE", "is absolute; name it relative to the root")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise unsafe(pointer, path, "TRAVERSAL", "climbs with '..'")
    if not parts:
        raise unsafe(pointer, path, "EMPTY", "names nothing")
    return "/".join(parts) + ("/" if path.endswith("/") else "")


def checkout_file(root: str, state_root: str, path: str, pointer: str) -> str:
    """The absolute path of the checkout file ``path`` names, checked: no symlink on the
    way, inside ``root``, outside the state root, not a folder. Whether it exists is left
    to the caller, which has its own code for a missing file."""
    rel = relative(path, pointer)
    if rel.endswith("/"):
        raise unsafe(pointer, path, "NOT_A_FILE", "names a folder")
    real_root = os.path.realpath(root)
    target = os.path.join(real_root, *rel.split("/"))
    here = real_root
    for part in rel.split("/"):
        here = os.path.join(here, part)
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(info.st_mode):
            raise unsafe(pointer, path, "SYMLINK", "passes through a symlink")
    state = os.path.realpath(state_root)
    if target == state or target.startswith(state + os.sep):
        raise unsafe(pointer, path, "STATE_ROOT", "lies inside .ithaca/, which only Ithaca writes")
    if os.path.isdir(target):
        raise unsafe(pointer, path, "NOT_A_FILE", "names a folder")
    return target
