"""One Git worktree per execution session, bound to the one central ``.ithaca``
(docs/delivery.md, "Execution: session and Worker Packets").

A session works in ``.ithaca-work/worktrees/<sid>/`` (the project's work folder,
``Project.work_dir``) on its own branch, so parallel workers never share a checkout.
The work folder lies outside ``.ithaca/`` because the agent and its worker write there,
while a sandboxed install keeps ``.ithaca/`` read-only to the agent's shell; only Ithaca
writes what stays under ``.runtime/`` (``sessions/<sid>/``: the packet, the excludes file,
the worker's log; the lock). Whose folder is whose is the delivery gate's to enforce
(``ithaca.delivery.gate``). The main checkout never shows the work folder: the first
folder made there adds ``/.ithaca-work/`` to the repository's ``.git/info/exclude``
(local, never committed) on a line of its own under Ithaca's marker
(``exclude_work_dir``); Git is fine with worktrees nested in the checkout that owns
them. Sessions started before the move keep the path their row records, under
``.ithaca/.runtime/worktrees/`` (``legacy_path_for``): nothing is moved.

Its ``.ithaca`` is a symlink to the central state root:
every Ithaca command run there reaches the same store. Git must never see that link nor
the tracked ``.ithaca/`` files through it, so the worktree checks out everything except
``/.ithaca/`` (sparse, no cone) and ignores ``/.ithaca`` through a per-worktree excludes
file (``sessions/<sid>/exclude``: that line plus the user's global excludes). The main
checkout's own ignore rules stay untouched apart from that one line, so new team files
under ``.ithaca/`` stay visible there, and a worker's commits cannot contain ``.ithaca/``.

A worktree is only handed out when ``git status --porcelain`` is empty in it and Git
ignores the link; otherwise it is rolled back and the acquire fails with
``WORKTREE_UNSAFE``. Removing one is conservative: only a clean worktree whose HEAD is
already in the target branch goes, the link first (so nothing can follow it), then the
worktree and its merged branch; anything else is kept and the caller says why
(``dirty`` or ``not_integrated``). Work is never discarded.

Doctor asks here which worktrees Git knows (``listed``) and which ``ithaca/…`` branches
exist (``ithaca_branches``), to find the stale ones.

Git fails instead of waiting when two processes add worktrees at once, so spawns take
turns under ``.runtime/worktrees.lock`` (``creation_lock``). Branch names are
``ithaca/<task>/<sid>``; a ``.`` in a task id becomes ``_`` there,
because Git refuses some dotted names (``a..b``, ``x.lock``).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from ithaca.kernel import git as git_binary
from ithaca.kernel.errors import Conflict, Refused
from ithaca.kernel.files import make_folders, write_atomic
from ithaca.kernel.project import STATE_DIR_NAME, WORK_DIR_NAME, Project, git_top

MIN_GIT = (2, 36)
GIT_TIMEOUT_S = 120
WORKTREES = "worktrees"
SESSIONS = "sessions"
EXCLUDE_LINE = "/.ithaca"
LOCK_NAME = "worktrees.lock"
# The main checkout's line for the work folder in ``.git/info/exclude``, under a marker
# of its own (the install's block of sandbox stand-ins is another one, left alone).
WORK_EXCLUDE_MARKER = "# ithaca: the session worktrees and outputs (local work folder)"


class GitFailed(Exception):
    """A Git command failed; the message holds its error output."""


def git(cwd: str, *args: str, check: bool = True) -> git_binary.TextResult:
    """Run ``git -C cwd args…`` (never through a shell)."""
    done = git_binary.run_text(args, cwd=cwd, timeout=GIT_TIMEOUT_S)
    if check and done.returncode != 0:
        raise GitFailed(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def git_version() -> tuple[int, ...] | None:
    try:
        done = git_binary.run_text(["--version"], timeout=30)
    except OSError:
        return None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) < 3:
        return None
    parts = []
    for piece in words[2].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts) or None


def git_ready() -> bool:
    found = git_version()
    return found is not None and found >= MIN_GIT


def require_git() -> None:
    if not git_ready():
        raise Refused(
            "GIT_PREREQUISITE_MISSING",
            f"session worktrees need Git {'.'.join(map(str, MIN_GIT))} or newer",
            {"found": ".".join(map(str, git_version() or ())) or None},
        )


def head(path: str) -> str | None:
    """The commit checked out at ``path``, None when there is none (or no repository)."""
    try:
        done = git(path, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
    except OSError:
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def main_head(project: Project) -> str:
    """The main checkout's HEAD commit, which new branches start from."""
    found = head(project.root)
    if found is None:
        raise Refused(
            "GIT_PREREQUISITE_MISSING",
            f"{project.root} has no commit to branch a worktree from; commit first",
            {"root": project.root},
        )
    return found


def branch_name(task_id: str, session_id: str) -> str:
    return f"ithaca/{task_id.replace('.', '_')}/{session_id}"


def path_for(project: Project, name: str) -> str:
    """Where the worktree ``name`` (a session id, or ``plan-<change>``) is made."""
    return work_path(project, WORKTREES, name)


def work_path(project: Project, *parts: str) -> str:
    """``.ithaca-work/<parts…>`` below the project's real root (symlinks in the work
    folder itself are never followed: ``work_folder`` refuses them)."""
    return os.path.join(os.path.realpath(project.root), WORK_DIR_NAME, *parts)


def legacy_path_for(project: Project, name: str) -> str:
    """Where a worktree made before the work folder existed lies (never made any more)."""
    return os.path.join(project.runtime, WORKTREES, name)


def work_folder(project: Project, *parts: str) -> str:
    """Make ``.ithaca-work/<parts…>`` (no symlink on the way) and keep the work folder out
    of the main checkout's ``git status``; its path."""
    path = str(make_folders(project.root, os.path.join(WORK_DIR_NAME, *parts)))
    exclude_work_dir(project)
    return path


def exclude_work_dir(project: Project) -> None:
    """Add ``/.ithaca-work/`` to the repository's ``.git/info/exclude`` unless it is there
    (each line is kept as it was; the file is appended to, never rewritten). Nothing
    when the project is not in a Git repository or the work folder lies outside it."""
    top = git_top(project.root)
    if top is None:
        return
    relative = os.path.relpath(project.work_dir, top).replace(os.sep, "/")
    if relative.startswith("../"):
        return
    line = f"/{relative}/"
    path = _info_exclude(top)
    if path is None:
        return
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            text = stream.read()
    except FileNotFoundError:
        text = ""
    if any(found.strip() == line for found in text.splitlines()):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    separator = "" if not text or text.endswith("\n") else "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as stream:
        stream.write(f"{separator}{WORK_EXCLUDE_MARKER}\n{line}\n")


def _info_exclude(top: str) -> str | None:
    """The repository's ``info/exclude`` (shared by all its worktrees)."""
    if os.path.isdir(os.path.join(top, ".git")):
        return os.path.join(top, ".git", "info", "exclude")
    found = git(
        top, "rev-parse", "--path-format=absolute", "--git-path", "info/exclude", check=False
    )
    if found.returncode != 0:
        return None
    return found.stdout.strip() or None


@contextmanager
def creation_lock(project: Project) -> Iterator[None]:
    """Hold the project's worktree lock: Git fails rather than waits when two processes
    add worktrees at once (both write the repository's config and worktree records), so
    session spawns take turns."""
    os.makedirs(project.runtime, exist_ok=True)
    lock = os.path.join(project.runtime, LOCK_NAME)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def create(project: Project, name: str, branch: str, base: str, *, link: bool) -> str:
    """A new worktree ``.ithaca-work/worktrees/<name>`` on ``branch`` (made from ``base``
    when it does not exist yet), checked out without ``.ithaca/``, with the central state
    linked in when ``link``; its path. Anything short of a clean, safe worktree is undone
    (a branch it made included): ``Conflict`` ``WORKTREE_UNSAFE``."""
    path = path_for(project, name)
    try:
        work_folder(project, WORKTREES)
    except (Refused, OSError) as exc:
        raise _unsafe(path, str(exc)) from exc
    existing = git(project.root, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False)
    made_branch = existing.returncode != 0
    start = ["-b", branch, path, base] if made_branch else [path, branch]
    try:
        git(project.root, "worktree", "add", "--no-checkout", *start)
    except GitFailed as exc:
        raise _unsafe(path, str(exc)) from exc
    try:
        _prepare(project, name, path, branch, link=link)
    except (GitFailed, OSError) as exc:
        discard(project, path, branch if made_branch else None)
        raise _unsafe(path, str(exc)) from exc
    return path


def _prepare(project: Project, name: str, path: str, branch: str, *, link: bool) -> None:
    configured = git(project.root, "config", "--get", "extensions.worktreeConfig", check=False)
    if configured.stdout.strip() != "true":
        git(project.root, "config", "extensions.worktreeConfig", "true")
    git(path, "config", "--worktree", "sparse.expectFilesOutsideOfPatterns", "true")
    git(path, "sparse-checkout", "set", "--no-cone", "/*", f"!/{STATE_DIR_NAME}/")
    git(path, "checkout", "-q", branch)
    exclude = os.path.join(project.runtime, SESSIONS, name, "exclude")
    write_atomic(project.runtime, f"{SESSIONS}/{name}/exclude", _excludes(project))
    git(path, "config", "--worktree", "core.excludesFile", exclude)
    if link:
        os.symlink(os.path.realpath(project.state_root), os.path.join(path, STATE_DIR_NAME))
    if git(path, "status", "--porcelain").stdout.strip():
        raise GitFailed("the new worktree is not clean")
    if (
        link
        and git(path, "check-ignore", "-q", "--no-index", STATE_DIR_NAME, check=False).returncode
    ):
        raise GitFailed(f"Git does not ignore the {STATE_DIR_NAME} link")


def _excludes(project: Project) -> str:
    """``/.ithaca`` plus the user's global excludes, which a per-worktree file replaces."""
    lines = [EXCLUDE_LINE]
    configured = git(project.root, "config", "--path", "core.excludesFile", check=False)
    default = os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config"),
        "git",
        "ignore",
    )
    source = configured.stdout.strip() or default
    try:
        with open(source, encoding="utf-8", errors="replace") as stream:
            lines += [line.rstrip("\n") for line in stream]
    except OSError:
        pass
    return "\n".join(lines) + "\n"


def _unsafe(path: str, problem: str) -> Conflict:
    return Conflict(
        "WORKTREE_UNSAFE",
        f"the session worktree could not be made safe ({problem}); nothing was kept",
        {"worktree": path, "problem": problem},
    )


def preserved_reason(path: str, target: str) -> str | None:
    """Why the worktree at ``path`` must stay: ``dirty`` (uncommitted or untracked
    files), ``not_integrated`` (its HEAD is not in ``target``), or None."""
    if not os.path.isdir(path):
        return None
    if git(path, "status", "--porcelain", check=False).stdout.strip():
        return "dirty"
    found = head(path)
    if found is None:
        return "not_integrated"
    ancestor = git(path, "merge-base", "--is-ancestor", found, target, check=False)
    return None if ancestor.returncode == 0 else "not_integrated"


def remove(project: Project, path: str, branch: str | None) -> None:
    """Unlink ``.ithaca`` first, then remove the worktree and its branch; the caller has
    checked (``preserved_reason``) that the branch is merged into its target, which need
    not be the main HEAD ``git branch -d`` would compare with."""
    link = os.path.join(path, STATE_DIR_NAME)
    if os.path.islink(link):
        os.unlink(link)
    git(project.root, "worktree", "remove", path)
    if branch:
        git(project.root, "branch", "-D", branch, check=False)


def discard(project: Project, path: str, branch: str | None) -> None:
    """Undo a worktree this process just made and nobody has used: the link, the folder,
    and ``branch`` when the worktree made it."""
    link = os.path.join(path, STATE_DIR_NAME)
    if os.path.islink(link):
        os.unlink(link)
    git(project.root, "worktree", "remove", "--force", path, check=False)
    git(project.root, "worktree", "prune", check=False)
    if branch is not None:
        git(project.root, "branch", "-D", branch, check=False)


def listed(project: Project) -> list[dict[str, str | None]]:
    """The worktrees Git knows in the project's repository: ``{path, head, branch}``
    (``branch`` a short name, None when detached); ``GitFailed`` when Git cannot say."""
    done = git(project.root, "worktree", "list", "--porcelain", "-z")
    found: list[dict[str, str | None]] = []
    current: dict[str, str | None] = {}
    for field in done.stdout.split("\0"):
        if not field:
            if current:
                found.append(current)
            current = {}
            continue
        key, _, value = field.partition(" ")
        if key == "worktree":
            current = {"path": value, "head": None, "branch": None}
        elif key == "HEAD":
            current["head"] = value
        elif key == "branch":
            current["branch"] = value.removeprefix("refs/heads/")
    if current:
        found.append(current)
    return found


def ithaca_branches(project: Project) -> dict[str, str]:
    """The branches sessions and run-plan made (``ithaca/…``): short name → tip commit."""
    done = git(
        project.root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/ithaca/"
    )
    branches = {}
    for line in done.stdout.splitlines():
        name, _, tip = line.rpartition(" ")
        if name.startswith("refs/heads/"):
            branches[name.removeprefix("refs/heads/")] = tip
    return branches


def is_merged(project: Project, commit: str, into: str) -> bool:
    """Whether ``commit`` is already in ``into`` (a branch or commit)."""
    done = git(project.root, "merge-base", "--is-ancestor", commit, into, check=False)
    return done.returncode == 0
