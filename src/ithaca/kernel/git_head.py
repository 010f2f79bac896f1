"""The team's tracked files as the checked-out commit holds them: the check for a branch
switch that half succeeded.

In the sandboxed profile the agent's ``git checkout`` (``switch``, ``reset --hard``, ``stash``)
cannot write ``.ithaca/``: Git reports "unable to unlink", moves ``HEAD`` anyway and exits 0,
leaving the team's rule files and configuration as the old commit had them. The effect
check's fingerprint would see nothing, since the files did not change; what changed is the
commit they belong to. So the fingerprint also records, for each tracked team file, the
blob the checked-out commit holds, and what ``HEAD`` and its ref hold (so that a switch
or a commit reaches the slow path). A file whose commit now holds another blob than when
it was recorded, while the working file is not that blob, was left behind by such a
switch; a file the commit and the working tree agree on is not (a commit of an accepted
edit, or a switch that wrote it, which the content check then judges).

The fast path reads ``HEAD`` and its ref (``fingerprint``'s signature holds them); Git runs
only when the signature moved, or when the fingerprint is recorded. Standard library and
light modules only (hook path).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.project import Project

TEAM_FILES = ("config.toml", "protocols")  # under the state root, when Git tracks it


def blobs(project: Project) -> dict[str, str]:
    """``{path: blob id}`` of the team files the checked-out commit holds, the paths
    relative to the Git top; empty outside Git or when the state root is not in it."""
    prefix = _prefix(project)
    if prefix is None:
        return {}
    listed = _git(project, "ls-tree", "-r", "HEAD", "--", *(prefix + n for n in TEAM_FILES))
    found = {}
    for line in listed.splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and _team_file(path, prefix):
            found[path] = parts[2]
    return found


def drift(project: Project, recorded: dict[str, str], now: dict[str, str]) -> list[dict[str, str]]:
    """The team files a switch left behind: the commit holds another blob (``now``, from
    ``blobs``) than when ``recorded``, and the working file is not that blob."""
    from ithaca.kernel.fingerprint import change

    moved = [
        path for path in sorted(set(recorded) | set(now)) if now.get(path) != recorded.get(path)
    ]
    working = _working_blobs(project, moved)
    return [
        change(
            path,
            "the checked-out commit holds another version, but the file was left as it was"
            " (a branch switch or reset that could not write it)",
            f"in your terminal, `git checkout -- {path}` takes the commit's version, or"
            " switch back",
        )
        for path in moved
        if working.get(path) != now.get(path)
    ]


def _prefix(project: Project) -> str | None:
    relative = os.path.relpath(project.state_root, project.work_root)
    if relative.startswith(".."):
        return None
    return "" if relative == "." else relative.replace(os.sep, "/") + "/"


def _team_file(path: str, prefix: str) -> bool:
    name = path[len(prefix) :]
    return name == "config.toml" or (name.startswith("protocols/") and name.endswith(".json"))


def _working_blobs(project: Project, paths: list[str]) -> dict[str, str]:
    """The blob id of each working file of ``paths`` that exists, by its bytes as they
    are (no filter: a program the repository names would run as the user)."""
    present = [path for path in paths if os.path.isfile(os.path.join(project.work_root, path))]
    ids = _git(project, "hash-object", "--no-filters", "--", *present).split() if present else []
    return dict(zip(present, ids, strict=True)) if len(ids) == len(present) else {}


def _git(project: Project, *args: str) -> str:
    """What ``git -C <Git top> ARGS`` prints; empty when Git fails or is missing."""
    from ithaca.kernel import git  # the slow path only

    try:
        done = git.run_text(args, cwd=project.work_root, timeout=30)
    except OSError:
        return ""
    return done.stdout if done.returncode == 0 else ""
