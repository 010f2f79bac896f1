"""Stale worktrees and branches: what sessions and run-plan made and nothing uses any more.

Sessions work in worktrees on branches of their own (``ithaca/<task>/<sid>``) and run-plan
merges into ``ithaca/plan/<change>`` in ``plan-<change>/``; closing keeps a worktree that
holds work (dirty, or not integrated), and an interrupted or crashed run leaves its
sessions' worktrees behind. Doctor reports them (``WORKTREE_STALE``, ``BRANCH_STALE``) and
``--repair`` removes them, each after a backup of what it holds.

Stale means:

- a session's worktree (``.ithaca-work/worktrees/<sid>/``, or ``.ithaca/.runtime/
  worktrees/<sid>/`` from before the work folder) or branch that no running session uses
  (a takeover's new session uses the old one's); one whose session *completed* only once
  its commits are merged into the main HEAD or its run's integration branch (until then
  it is the work the user has to merge). A folder no session row names at all is a
  crashed spawn's leftover (``WORKTREE_ORPHANED``, ``checks.leftovers``), not listed here;
- run-plan's integration worktree ``plan-<change>/`` and its branch ``ithaca/plan/<change>``
  once no run of the change is open and either the branch is merged into the main HEAD or
  the change is archived, cancelled or unknown. An integration branch still waiting for
  the user's merge is never stale.

A branch checked out in a worktree that stays is never stale; the branch of a stale
worktree goes with it and is not listed apart.

The backup comes first, into ``.ithaca/.runtime/backups/worktrees-<UTC ts>/<name>/``:
the branch's commits that the main HEAD lacks as a Git bundle (``branch.bundle``), a
worktree's uncommitted changes as a patch (``tracked.patch``, ``git diff --binary HEAD``)
and its untracked files as copies (``untracked/``; a symlink is recorded, never
followed), and ``manifest.json`` saying what was where and the commands that restore it.
Anything that cannot be backed up is kept and reported, never removed. Removal unlinks a
worktree's ``.ithaca`` link first (so nothing follows it), then runs ``git worktree
remove --force`` and deletes the branch. It runs under the worktree lock spawns hold.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from typing import Any

from ithaca.delivery.doctor import REPAIR_COMMAND
from ithaca.delivery.sessions import worktrees
from ithaca.delivery.units import registry
from ithaca.kernel import clock, ids
from ithaca.kernel import git as git_binary
from ithaca.kernel.files import fsync_file, write_atomic
from ithaca.kernel.project import STATE_DIR_NAME, Project, git_top

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

PLAN_PREFIX = "plan-"
PLAN_BRANCH = "ithaca/plan/"
CLOSED_CHANGES = ("archived", "cancelled")


@dataclass(frozen=True)
class Stale:
    """One stale worktree (``path`` set, with its ``branch`` when that goes too) or one
    stale branch on its own (``path`` None)."""

    path: str | None
    branch: str | None
    tip: str | None
    owner: str  # "session", or "change" (run-plan's integration worktree or branch)
    owner_id: str  # the session id, or the change id
    why: str


@dataclass
class _Facts:
    """What judging staleness needs, read once."""

    sessions: list[dict[str, Any]]
    open_runs: set[str]
    run_branches: dict[str, str]
    changes: dict[str, str]
    main_head: str | None
    checked_out: dict[str, str]  # branch -> real path of the worktree holding it
    heads: dict[str, str | None]  # real worktree path -> its HEAD commit
    branches: dict[str, str]  # ithaca branch -> tip


def find(project: Project, conn: sqlite3.Connection) -> list[Stale]:
    """Every stale worktree and branch; reads only (Git included). Nothing without a Git
    repository, or when Git cannot answer."""
    if git_top(project.root) is None:
        return []
    try:
        facts = _facts(project, conn)
    except (worktrees.GitFailed, OSError):
        return []
    found = []
    stale_paths = set()
    for path, name in _worktree_folders(project, facts):
        judged = _judge_worktree(project, facts, path, name)
        if judged is not None:
            found.append(judged)
            stale_paths.add(path)
    going = {item.branch for item in found if item.branch}
    for branch, tip in sorted(facts.branches.items()):
        holder = facts.checked_out.get(branch)
        if branch in going or (holder is not None and holder not in stale_paths):
            continue
        judged = _judge_branch(project, facts, branch, tip)
        if judged is not None:
            found.append(judged)
    return found


def _facts(project: Project, conn: sqlite3.Connection) -> _Facts:
    columns = ("id", "status", "worktree_path", "branch", "plan_run_id", "created_at")
    sessions = [
        dict(zip(columns, row, strict=True))
        for row in conn.execute(
            f"SELECT {', '.join(columns)} FROM delivery_sessions ORDER BY created_at, id"
        )
    ]
    open_runs = set()
    run_branches = {}
    for run_id, change_id, status, branch in conn.execute(
        "SELECT id, change_id, status, integration_branch FROM delivery_plan_runs"
    ):
        run_branches[run_id] = branch
        if status in ("running", "paused"):
            open_runs.add(change_id)
    changes = dict(conn.execute("SELECT id, status FROM delivery_changes"))
    listed = worktrees.listed(project)
    checked_out = {}
    heads = {}
    for entry in listed:
        path = os.path.realpath(str(entry["path"]))
        heads[path] = entry["head"]
        if entry["branch"]:
            checked_out[entry["branch"]] = path
    return _Facts(
        sessions,
        open_runs,
        run_branches,
        changes,
        worktrees.head(project.root),
        checked_out,
        heads,
        worktrees.ithaca_branches(project),
    )


def _worktree_folders(project: Project, facts: _Facts) -> list[tuple[str, str]]:
    """``(real path, name)`` of each folder in the worktree places, and of each worktree
    Git lists there whose folder is gone."""
    found = {}
    for top in (
        worktrees.work_path(project, worktrees.WORKTREES),
        os.path.join(os.path.realpath(project.runtime), worktrees.WORKTREES),
    ):
        if os.path.islink(top) or not os.path.isdir(top):
            continue
        for name in os.listdir(top):
            full = os.path.join(top, name)
            if stat.S_ISDIR(os.lstat(full).st_mode):
                found[os.path.realpath(full)] = name
        for path in facts.heads:
            if os.path.dirname(path) == os.path.realpath(top):
                found.setdefault(path, os.path.basename(path))
    return sorted(found.items())


def _judge_worktree(project: Project, facts: _Facts, path: str, name: str) -> Stale | None:
    branch = next((b for b, holder in facts.checked_out.items() if holder == path), None)
    head = facts.heads.get(path)
    if name.startswith(PLAN_PREFIX):
        change_id = name[len(PLAN_PREFIX) :]
        why = _run_stale(project, facts, change_id, head)
        if why is None:
            return None
        going = branch if branch == f"{PLAN_BRANCH}{change_id}" else None
        return Stale(path, going, head, "change", change_id, why)
    if not ids.matches("ses", name):
        return None
    users = [row for row in facts.sessions if _real(row["worktree_path"]) == path]
    if not users:
        users = [row for row in facts.sessions if row["id"] == name]
    if not users:
        return None  # no session row at all: a crashed spawn's leftover (WORKTREE_ORPHANED)
    why = _session_stale(project, facts, users, head)
    if why is None:
        return None
    owner = users[-1]
    going = branch if branch is not None and branch == owner["branch"] else None
    return Stale(path, going, head, "session", owner["id"], why)


def _judge_branch(project: Project, facts: _Facts, branch: str, tip: str) -> Stale | None:
    parts = branch.split("/")
    if len(parts) == 3 and ids.matches("ses", parts[2]):
        users = [row for row in facts.sessions if row["branch"] == branch]
        if users:
            why = _session_stale(project, facts, users, tip)
        else:
            why = "no session row names it (a spawn crashed before it committed)"
        owner_id = users[-1]["id"] if users else parts[2]
        return None if why is None else Stale(None, branch, tip, "session", owner_id, why)
    if branch.startswith(PLAN_BRANCH) and len(parts) == 3:
        why = _run_stale(project, facts, parts[2], tip)
        return None if why is None else Stale(None, branch, tip, "change", parts[2], why)
    return None


def _session_stale(
    project: Project, facts: _Facts, users: list[dict[str, Any]], commit: str | None
) -> str | None:
    """Why the worktree or branch these sessions used is stale, None while it is not."""
    if any(row["status"] == "running" for row in users):
        return None
    owner = users[-1]
    if owner["status"] != "completed":
        return f"session {owner['id']} ended {owner['status']} and no session runs there"
    targets = [facts.main_head, facts.run_branches.get(owner["plan_run_id"] or "")]
    if commit is not None and any(
        target and worktrees.is_merged(project, commit, target) for target in targets
    ):
        return f"session {owner['id']} completed and its work is merged"
    return None  # completed work the user has still to merge


def _run_stale(project: Project, facts: _Facts, change_id: str, commit: str | None) -> str | None:
    """Why run-plan's integration worktree or branch of ``change_id`` is stale, or None."""
    if change_id in facts.open_runs:
        return None
    status = facts.changes.get(change_id)
    if status is None:
        return f"change {change_id} is unknown and no run-plan of it is open"
    if status in CLOSED_CHANGES:
        return f"change {change_id} is {status} and no run-plan of it is open"
    if (
        commit is not None
        and facts.main_head
        and worktrees.is_merged(project, commit, facts.main_head)
    ):
        return f"no run-plan of {change_id} is open and its integration branch is merged"
    return None


def _real(path: str | None) -> str | None:
    return None if path is None else os.path.realpath(path)


# --- findings -------------------------------------------------------------------------------


def findings(project: Project, conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """``WORKTREE_STALE`` and ``BRANCH_STALE`` findings, each with its fix."""
    root = os.path.realpath(project.root)
    found = []
    for item in find(project, conn):
        details: dict[str, Any] = {
            "branch": item.branch,
            "commit": item.tip,
            item.owner + "_id": item.owner_id,
            "fix": REPAIR_COMMAND,
        }
        if item.path is not None:
            shown = os.path.relpath(item.path, root).replace(os.sep, "/")
            dirty = _dirty(item.path)
            details["path"] = shown
            details["uncommitted_changes"] = dirty
            held = " with uncommitted changes" if dirty else ""
            also = f" and its branch {item.branch}" if item.branch else ""
            found.append(
                _finding(
                    "WORKTREE_STALE",
                    f"{shown} is stale ({item.why}){held}; `{REPAIR_COMMAND}` backs it up{also}"
                    " under .ithaca/.runtime/backups/ and removes it",
                    shown,
                    details,
                )
            )
        else:
            found.append(
                _finding(
                    "BRANCH_STALE",
                    f"branch {item.branch} is stale ({item.why}); `{REPAIR_COMMAND}` saves its"
                    " commits as a bundle under .ithaca/.runtime/backups/ and deletes it",
                    str(item.branch),
                    details,
                )
            )
    return found


def _dirty(path: str) -> bool | None:
    if not os.path.isdir(path):
        return None
    try:
        done = worktrees.git(path, "status", "--porcelain", check=False)
    except OSError:
        return None
    return None if done.returncode != 0 else bool(done.stdout.strip())


def _finding(code: str, message: str, subject: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"code": code, "severity": "warning", "message": message, "subject": subject, **details}


# --- repair ---------------------------------------------------------------------------------


def remove_after_backup(project: Project, conn: sqlite3.Connection) -> dict[str, Any] | None:
    """Back up, then remove, every stale worktree and branch (under the worktree lock);
    None when there was nothing to do, else ``{backup, removed[], kept[]}``."""
    with worktrees.creation_lock(project):
        found = find(project, conn)
        if not found:
            return None
        worktrees.git(project.root, "worktree", "prune", check=False)
        folder = os.path.join(project.backups_dir, f"worktrees-{clock.file_stamp()}")
        main_head = worktrees.head(project.root)
        removed, kept = [], []
        for item in found:
            name = os.path.basename(item.path) if item.path else str(item.branch).replace("/", "+")
            try:
                manifest = _back_up(project, item, os.path.join(folder, name), main_head)
            except (worktrees.GitFailed, OSError, ValueError) as exc:
                kept.append({**_named(project, item), "problem": f"backup failed: {exc}"})
                continue
            try:
                _remove(project, item)
            except (worktrees.GitFailed, OSError) as exc:
                kept.append({**_named(project, item), "problem": f"removal failed: {exc}"})
                continue
            removed.append({**_named(project, item), "backup": manifest})
    return {"backup": folder, "removed": removed, "kept": kept}


def _named(project: Project, item: Stale) -> dict[str, Any]:
    shown = None
    if item.path is not None:
        shown = os.path.relpath(item.path, os.path.realpath(project.root)).replace(os.sep, "/")
    return {"path": shown, "branch": item.branch, item.owner + "_id": item.owner_id}


def _back_up(project: Project, item: Stale, folder: str, main_head: str | None) -> str:
    """Save what removing ``item`` would lose into ``folder``; the manifest's path."""
    os.makedirs(folder, exist_ok=True)
    manifest: dict[str, Any] = {
        "schema": "ithaca.worktree-backup/1",
        **_named(project, item),
        "commit": item.tip,
        "why": item.why,
        "bundle": None,
        "patch": None,
        "untracked": [],
        "symlinks": {},
        "restore": [],
    }
    branch = item.branch
    if branch is not None:
        manifest["bundle"] = _bundle(project, branch, folder, main_head)
        if manifest["bundle"]:
            manifest["restore"].append(f"git fetch {manifest['bundle']} {branch}:{branch}")
    if item.path is not None and os.path.isdir(item.path):
        _save_changes(item.path, folder, manifest)
        if branch is not None:
            manifest["restore"].append(f"git worktree add <folder> {branch}")
        if manifest["patch"]:
            manifest["restore"].append(f"git -C <folder> apply {manifest['patch']}")
        if manifest["untracked"]:
            manifest["restore"].append(f"cp -a {os.path.join(folder, 'untracked')}/. <folder>/")
    write_atomic(folder, "manifest.json", json.dumps(manifest, indent=2) + "\n")
    return os.path.join(folder, "manifest.json")


def _bundle(project: Project, branch: str, folder: str, main_head: str | None) -> str | None:
    """A bundle of the branch's commits the main HEAD lacks; None when it has none."""
    excluded = ["--not", main_head] if main_head else []
    count = worktrees.git(project.root, "rev-list", "--count", branch, *excluded)
    if int(count.stdout.strip() or 0) == 0:
        return None
    path = os.path.join(folder, "branch.bundle")
    worktrees.git(project.root, "bundle", "create", "-q", path, branch, *excluded)
    worktrees.git(project.root, "bundle", "verify", "-q", path)
    fsync_file(path)
    return path


def _save_changes(path: str, folder: str, manifest: dict[str, Any]) -> None:
    """The worktree's uncommitted changes (a patch) and untracked files (copies); read as
    bytes, so no file name or content needs to be text."""
    if worktrees.head(path) is not None:
        diff = _git_bytes(path, "diff", "--binary", "HEAD")
        if diff:
            write_atomic(folder, "tracked.patch", diff)
            manifest["patch"] = os.path.join(folder, "tracked.patch")
    others = _git_bytes(path, "ls-files", "--others", "--exclude-standard", "-z")
    for relative in sorted(os.fsdecode(name) for name in others.split(b"\0") if name):
        if relative.split("/")[0] == STATE_DIR_NAME:
            continue  # the link to the central state, never followed
        full = os.path.join(path, relative)
        mode = os.lstat(full).st_mode
        if stat.S_ISLNK(mode):
            manifest["symlinks"][relative] = os.readlink(full)
        elif stat.S_ISREG(mode):
            data = registry.read_no_follow(full)
            if data is not None:
                write_atomic(os.path.join(folder, "untracked"), relative, data)
                manifest["untracked"].append(relative)


def _git_bytes(cwd: str, *args: str) -> bytes:
    done = git_binary.run(args, cwd=cwd, timeout=worktrees.GIT_TIMEOUT_S)
    if done.returncode != 0:
        problem = done.stderr.decode("utf-8", "replace").strip()
        raise worktrees.GitFailed(f"git {' '.join(args)}: {problem}")
    return done.stdout


def _remove(project: Project, item: Stale) -> None:
    if item.path is not None:
        link = os.path.join(item.path, STATE_DIR_NAME)
        if os.path.islink(link):
            os.unlink(link)
        worktrees.git(project.root, "worktree", "remove", "--force", item.path, check=False)
        if os.path.lexists(item.path):
            shutil.rmtree(item.path)
        worktrees.git(project.root, "worktree", "prune", check=False)
    if item.branch is not None:
        worktrees.git(project.root, "branch", "-D", item.branch)
