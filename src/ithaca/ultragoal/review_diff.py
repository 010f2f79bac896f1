"""The change under review, and whether a review shows that it looked at it.

A review that says COMPLETE without reading the code proves nothing, so a COMPLETE
artifact cites the files its reviewer read: ``files_read: [{path, sha256}]``, each with
the SHA-256 of the bytes it read (``null`` for a file the change deleted). At submission
Ithaca hashes each cited file again and refuses a citation of another version
(``REVIEW_FILE_DIGEST_MISMATCH``), and refuses a review none of whose files is part of the
change, a deleted one cited as null not counting (``REVIEW_COVERS_NO_CHANGE``).

The change is everything in the project's folder that differs from the commit the pursuit
started from (``review_base``, recorded when it first enters pursuing): tracked files
changed, staged or not, and new files Git does not ignore, outside ``.ithaca/``; paths are
the project's, also when it sits inside a larger repository. In a repository with no
commit yet, every such file is new. Without Git there is no change to check a review
against, and the review is refused (``REVIEW_DIFF_UNAVAILABLE``).
"""

from __future__ import annotations

import os
from typing import Any

from ithaca.kernel import canon, git
from ithaca.kernel.errors import Refused

GIT_TIMEOUT_S = 30
UNBORN = ""  # review_base of a repository that had no commit when the pursuit began
STATE_FOLDER = ".ithaca/"


def base_of(root: str) -> str | None:
    """The commit to review against: ``HEAD``, ``UNBORN`` before the first commit, or
    None outside a Git repository."""
    if _git(root, "rev-parse", "--git-dir") is None:
        return None
    head = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    return UNBORN if head is None else head.strip()


def changed_files(root: str, base: str | None) -> set[str]:
    """The root-relative paths the change under review touches."""
    if base is None:
        raise _unavailable("the pursuit recorded no commit to review against")
    if base == UNBORN:
        changed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    else:
        tracked = _git(root, "diff", "--name-only", "--no-renames", "--relative", "-z", base, "--")
        new = _git(root, "ls-files", "-z", "--others", "--exclude-standard")
        changed = None if tracked is None or new is None else tracked + new
    if changed is None:
        raise _unavailable(f"git could not list the change since {base or 'the start'}")
    return {path for path in changed.split("\0") if path and not path.startswith(STATE_FOLDER)}


def check_citations(root: str, base: str | None, artifact: dict[str, Any]) -> dict[str, Any]:
    """Refuse a COMPLETE artifact whose cited files are not the change as it stands;
    returns ``{covered, changed}`` (how many changed files it cites, of how many)."""
    changed = changed_files(root, base)
    cited = artifact.get("files_read") or []
    for index, citation in enumerate(cited):
        path, claimed = citation["path"], citation["sha256"]
        actual = _digest(root, path)
        if actual != claimed:
            now = "absent" if actual is None else actual
            raise Refused(
                "REVIEW_FILE_DIGEST_MISMATCH",
                f"the review cites {path} with SHA-256 {claimed}, but the file is now {now}:"
                " the reviewer must read the change as it stands",
                {"pointer": f"/files_read/{index}", "path": path, "sha256": actual},
            )
    read = {citation["path"] for citation in cited if citation["sha256"] is not None}
    covered = sorted(read & changed)  # a deleted file cited as null took no reading
    if not covered:
        raise Refused(
            "REVIEW_COVERS_NO_CHANGE",
            f"the review cites none of the {len(changed)} files the change touches"
            f" (since {base or 'the first commit'}): the reviewer must read the change",
            {"changed": sorted(changed)[:50]},
        )
    return {"covered": len(covered), "changed": len(changed)}


def _digest(root: str, path: str) -> str | None:
    """The SHA-256 of a regular file inside ``root``, or None when there is none."""
    real = os.path.realpath(os.path.join(root, path))
    inside = real.startswith(os.path.realpath(root) + os.sep)
    if not inside or not os.path.isfile(real):
        return None
    with open(real, "rb") as stream:
        return canon.digest_bytes(stream.read())


def _git(root: str, *args: str) -> str | None:
    """``git -C root ARGS``'s output (file names decoded as the filesystem names them), or
    None when it fails."""
    try:
        done = git.run(args, cwd=root, timeout=GIT_TIMEOUT_S)
    except OSError:
        return None
    return os.fsdecode(done.stdout) if done.returncode == 0 else None


def _unavailable(why: str) -> Refused:
    return Refused(
        "REVIEW_DIFF_UNAVAILABLE",
        f"{why}; Ultragoal checks a review against the change in Git. In a Git repository,"
        " re-enter pursuing (set --phase planning, then pursuing) to record it",
    )
