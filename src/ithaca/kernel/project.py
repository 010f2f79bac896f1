"""Where a project's Ithaca state lives, found from a working directory.

``.ithaca/`` at the repository root is the *state root*: its tracked part is shared
through Git, its ``.runtime/`` part is checkout-local and ignored. ``ITHACA_DIR``
overrides the location (tests use it to stay hermetic). Beside it, ``.ithaca-work/`` is
the *work folder*: what execution sessions' agents and workers write (their Git
worktrees, their output files), which a sandboxed install must leave writable while
``.ithaca/`` is read-only to the agent's shell. Discovery walks up from a
directory without spawning processes, because hooks do it on every call; paths are
plain strings because ``pathlib`` (with the ``urllib`` it imports) would be a large part
of a hook's start-up.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
else:
    from ithaca.kernel.tuples import namedtuple

STATE_DIR_NAME = ".ithaca"
RUNTIME_DIR_NAME = ".runtime"
IGNORE_LINE = "/.ithaca/.runtime/"
WORK_DIR_NAME = ".ithaca-work"


class Project(namedtuple("Project", "root state_root work_root")):
    """A project's roots, as absolute paths.

    ``root`` is the folder that holds ``.ithaca/``; ``work_root`` is the Git top of the
    directory the caller stands in (a session worktree resolves to the same state root
    through its link); ``state_root`` is the resolved ``.ithaca/`` folder.
    """

    __slots__ = ()

    @property
    def work_dir(self) -> str:
        """``<root>/.ithaca-work``: the session worktrees and output folders."""
        return os.path.join(self.root, WORK_DIR_NAME)

    @property
    def runtime(self) -> str:
        return os.path.join(self.state_root, RUNTIME_DIR_NAME)

    @property
    def db_path(self) -> str:
        return os.path.join(self.state_root, RUNTIME_DIR_NAME, "state.db")

    @property
    def blobs_dir(self) -> str:
        return os.path.join(self.state_root, RUNTIME_DIR_NAME, "blobs")

    @property
    def backups_dir(self) -> str:
        return os.path.join(self.state_root, RUNTIME_DIR_NAME, "backups")

    @property
    def protocols_dir(self) -> str:
        return os.path.join(self.state_root, "protocols")

    @property
    def knowledge_dir(self) -> str:
        return os.path.join(self.state_root, "knowledge")


def find_project(start: str | os.PathLike[str]) -> Project | None:
    """The project containing ``start``, or ``None`` when there is no ``.ithaca/``."""
    here = os.path.abspath(start)
    work_root = git_top(here) or here
    override = os.environ.get("ITHACA_DIR")
    if override:
        state_root = os.path.realpath(override)
        if not os.path.isdir(state_root):
            return None
        return Project(os.path.dirname(state_root), state_root, work_root)
    folder = _state_folder(here)
    if folder is None:
        return None
    state_root = os.path.realpath(os.path.join(folder, STATE_DIR_NAME))
    return Project(os.path.dirname(state_root), state_root, work_root)


def pinned_project(cwd: str, anchor: str | None) -> tuple[Project | None, str | None]:
    """The project a hook call belongs to, and the state root the call's ``cwd`` points at
    instead, when it points at another one (else None).

    The hook's wiring belongs to one project: the host's project directory (``anchor``,
    Claude Code's ``CLAUDE_PROJECT_DIR``) when the host names it, else the one at the Git
    top of ``cwd``. A ``.ithaca/`` nearer to ``cwd`` than that (created by the agent in a
    sub-folder, or in a folder it moved to) is never obeyed: the call is judged by the
    pinned project, and the displaced root is reported so that mutating calls are refused.
    A session worktree's ``.ithaca`` link resolves to the pinned state root and is not
    displaced.
    """
    here = find_project(cwd)
    pinned = find_project(anchor) if anchor else None
    if pinned is None and here is not None:
        if _state_folder(cwd) in (None, here.work_root):  # ITHACA_DIR, or at the Git top
            return here, None
        pinned = find_project(here.work_root)  # a .ithaca/ below the Git top
        if pinned is None:
            return here, None
    if pinned is None:
        return None, None
    if here is None or here.state_root == pinned.state_root:
        return Project(pinned.root, pinned.state_root, (here or pinned).work_root), None
    return pinned, here.state_root


def _state_folder(start: str) -> str | None:
    """The folder holding the ``.ithaca`` state folder nearest ``start``. Not one that is
    empty, or the user's own settings folder (``~/.ithaca``): the hosts' sandboxes stand
    empty placeholders for protected paths that do not exist, ``~/.ithaca`` among them,
    and neither is any project's state."""
    user_settings = os.environ.get("ITHACA_HOME") or os.path.join(
        os.path.expanduser("~"), STATE_DIR_NAME
    )
    for folder in _upwards(os.path.abspath(start)):
        candidate = os.path.join(folder, STATE_DIR_NAME)
        if os.path.isdir(candidate) and _is_state(candidate, user_settings):
            return folder
    return None


def _is_state(candidate: str, user_settings: str) -> bool:
    try:
        if not os.listdir(candidate):
            return False
    except OSError:
        return False
    return not (os.path.exists(user_settings) and os.path.samefile(candidate, user_settings))


def planned_project(path: str | os.PathLike[str]) -> Project:
    """The project ``ithaca init`` would create for ``path`` (its Git top, else itself)."""
    here = os.path.abspath(path)
    root = git_top(here) or here
    override = os.environ.get("ITHACA_DIR")
    state_root = os.path.abspath(override) if override else os.path.join(root, STATE_DIR_NAME)
    return Project(root, state_root, root)


def git_top(start: str) -> str | None:
    """The nearest folder at or above ``start`` that holds ``.git`` (a folder or a file)."""
    for folder in _upwards(start):
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
    return None


def _upwards(folder: str) -> list[str]:
    chain = [folder]
    while (parent := os.path.dirname(chain[-1])) != chain[-1]:
        chain.append(parent)
    return chain
