"""Where a project's Ithaca state lives, found from a working directory.

``.ithaca/`` at the repository root is the *state root*: its tracked part is shared
through Git, its ``.runtime/`` part is checkout-local and ignored. ``ITHACA_DIR``
overrides the location (tests use it to stay hermetic). Discovery walks up from a
directory without spawning processes, because hooks do it on every call.
"""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

STATE_DIR_NAME = ".ithaca"
RUNTIME_DIR_NAME = ".runtime"
IGNORE_LINE = "/.ithaca/.runtime/"


class Project(namedtuple("Project", "root state_root work_root")):
    """A project's roots.

    ``root`` is the folder that holds ``.ithaca/``; ``work_root`` is the Git top of the
    directory the caller stands in (a session worktree resolves to the same state root
    through its link); ``state_root`` is the resolved ``.ithaca/`` folder.
    """

    __slots__ = ()

    @property
    def runtime(self) -> Path:
        return self.state_root / RUNTIME_DIR_NAME

    @property
    def db_path(self) -> Path:
        return self.runtime / "state.db"

    @property
    def blobs_dir(self) -> Path:
        return self.runtime / "blobs"

    @property
    def backups_dir(self) -> Path:
        return self.runtime / "backups"

    @property
    def protocols_dir(self) -> Path:
        return self.state_root / "protocols"


def find_project(start: str | os.PathLike[str]) -> Project | None:
    """The project containing ``start``, or ``None`` when there is no ``.ithaca/``."""
    here = Path(os.path.abspath(start))
    work_root = git_top(here) or here
    override = os.environ.get("ITHACA_DIR")
    if override:
        state_root = Path(os.path.realpath(override))
        if not state_root.is_dir():
            return None
        return Project(root=state_root.parent, state_root=state_root, work_root=work_root)
    for folder in (here, *here.parents):
        candidate = folder / STATE_DIR_NAME
        if candidate.is_dir():
            state_root = Path(os.path.realpath(candidate))
            return Project(root=state_root.parent, state_root=state_root, work_root=work_root)
    return None


def planned_project(path: str | os.PathLike[str]) -> Project:
    """The project ``ithaca init`` would create for ``path`` (its Git top, else itself)."""
    here = Path(os.path.abspath(path))
    root = git_top(here) or here
    override = os.environ.get("ITHACA_DIR")
    state_root = Path(os.path.abspath(override)) if override else root / STATE_DIR_NAME
    return Project(root=root, state_root=state_root, work_root=root)


def git_top(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds ``.git`` (a folder or a file)."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None
