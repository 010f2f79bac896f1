"""The progress fingerprint: what the Stop gate compares to tell progress from spinning.

``iteration`` counts Stop turns without progress, and the budget only means something if
"progress" is observed, not claimed. Four signals count: a new commit that descends from
the last one seen and changes the tree, a change of the stories' statuses, new recorded
evidence, and a story newly passing its validator. The
fingerprint is stored on the pursuit (``last_seen_*``) when pursuit starts or resumes, so
the first Stop already has a baseline. ``HEAD`` is read from Git's files; ``git`` runs
only when the head moved, with a short timeout, and any failure counts as no progress.
"""

from __future__ import annotations

import os

from ithaca.kernel import canon

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

GIT_TIMEOUT_S = 3.0


def fingerprint(conn: sqlite3.Connection, root: str, session_id: str) -> dict[str, Any]:
    """``{head, stories_digest, evidence_count, validator_digest}`` as of now."""
    statuses = conn.execute(
        "SELECT id, status FROM ultragoal_story WHERE session_id = ? ORDER BY id", (session_id,)
    ).fetchall()
    evidence = conn.execute(
        "SELECT count(*) FROM ultragoal_evidence WHERE session_id = ?", (session_id,)
    ).fetchone()[0]
    passes = conn.execute(
        "SELECT s.id, max(r.seq) FROM ultragoal_story s JOIN ultragoal_validator_run r"
        " ON r.session_id = s.session_id AND r.story_id = s.id AND r.pass = 1"
        " AND r.seq > s.changed_seq"
        " AND r.binding_id = json_extract(s.validator, '$.binding_id')"
        " WHERE s.session_id = ? GROUP BY s.id ORDER BY s.id",
        (session_id,),
    ).fetchall()
    return {
        "head": read_head(root),
        "stories_digest": canon.digest(sorted([str(i), str(s)] for i, s in statuses)),
        "evidence_count": int(evidence),
        "validator_digest": canon.digest([[str(i), int(seq)] for i, seq in passes]),
    }


def remember(row: dict[str, Any], seen: dict[str, Any]) -> None:
    """Store ``seen`` as the pursuit's baseline."""
    row["last_seen_head"] = seen["head"]
    row["last_seen_stories_digest"] = seen["stories_digest"]
    row["last_seen_evidence_count"] = seen["evidence_count"]
    row["last_seen_validator_digest"] = seen["validator_digest"]


def has_baseline(row: dict[str, Any]) -> bool:
    return row["last_seen_stories_digest"] is not None


def what_moved(row: dict[str, Any], seen: dict[str, Any], root: str) -> list[str]:
    """Which signals moved since the stored baseline: ``commit``, ``stories``,
    ``evidence``, ``validator``. Without a baseline nothing counts."""
    if not has_baseline(row):
        return []
    moved = []
    old_head, new_head = row["last_seen_head"], seen["head"]
    if old_head and new_head and old_head != new_head and commit_changed(root, old_head, new_head):
        moved.append("commit")
    if seen["stories_digest"] != row["last_seen_stories_digest"]:
        moved.append("stories")
    if seen["evidence_count"] > (row["last_seen_evidence_count"] or 0):
        moved.append("evidence")
    if seen["validator_digest"] != row["last_seen_validator_digest"]:
        moved.append("validator")
    return moved


def commit_changed(root: str, old: str, new: str) -> bool:
    """Whether ``old`` is an ancestor of ``new`` and the diff between them is not empty."""
    from ithaca.kernel import git

    def exit_code(*args: str) -> int | None:
        try:
            return git.run(args, cwd=root, timeout=GIT_TIMEOUT_S).returncode
        except OSError:
            return None

    if exit_code("merge-base", "--is-ancestor", old, new) != 0:
        return False
    return exit_code("diff", "--quiet", f"{old}..{new}") == 1


def read_head(root: str) -> str | None:
    """The commit ``HEAD`` names, read from Git's files; None without one."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    head = _read(os.path.join(git_dir, "HEAD"))
    if head is None:
        return None
    if not head.startswith("ref: "):
        return head or None
    ref = head[5:].strip()
    common = _read(os.path.join(git_dir, "commondir"))
    folders = [git_dir]
    if common:
        folders.append(os.path.normpath(os.path.join(git_dir, common)))
    for folder in folders:
        value = _read(os.path.join(folder, ref))
        if value:
            return value
    for folder in folders:
        packed = _read(os.path.join(folder, "packed-refs"))
        for line in (packed or "").splitlines():
            sha, _, name = line.partition(" ")
            if name == ref:
                return sha
    return None


def _git_dir(root: str) -> str | None:
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    pointer = _read(dot_git)
    if pointer and pointer.startswith("gitdir: "):
        return os.path.normpath(os.path.join(root, pointer[8:].strip()))
    return None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
