"""Checkpoints: what the worktree held at a point of a Ulysses session, and the way back to it.

A checkpoint records three things about a Git checkout: the commit ``HEAD`` names, a digest
of every uncommitted change, and optionally a snapshot commit holding the whole worktree.
The digest lets the protocol notice that files changed while it was not looking (reflect
compares two of them); the snapshot makes ``rollback`` possible without ever having touched
the user's branch, stash or index.

The snapshot is built in a scratch copy of the index, so the user's staging area stays
exactly as it was, and is kept alive by a ref under ``refs/ithaca/checkpoints/`` (an
ordinary commit, inspectable with ``git show``). Its commit message carries the files left
out for being too large, so a rollback knows which paths it must not touch.

``.ithaca/`` is Ithaca's own state and is never part of the digest nor touched by a rollback.
Every Git call runs with Ithaca's settings (``kernel.git``): no hooks, file-system monitor
or program the repository's own settings name, and no inherited variable that would point
Git at another repository or index; the user's ignore rules and own filters still apply,
because they decide which files are theirs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from typing import Any, NamedTuple

from ithaca.kernel import canon, clock, git
from ithaca.kernel.errors import Refused, invalid_field

STATE_DIR = b".ithaca"
REF_PREFIX = "refs/ithaca/checkpoints"
LEFT_OUT_MARKER = "Ithaca-Left-Out: "

_REF_PART = re.compile(r"[A-Za-z0-9_-]{1,200}")
# Git runs with Ithaca's settings only (``kernel.git``); an embedded repository is not
# worth a warning here.
_CONFIG = ("-c", "advice.addEmbeddedRepo=false")
_IDENTITY = {
    "GIT_AUTHOR_NAME": "Ithaca",
    "GIT_AUTHOR_EMAIL": "ithaca@localhost",
    "GIT_COMMITTER_NAME": "Ithaca",
    "GIT_COMMITTER_EMAIL": "ithaca@localhost",
}
# Files in the Git directory whose presence means an operation is half done.
_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "BISECT_LOG": "a bisect",
}
_GIT_PATHS = ("index", *_IN_PROGRESS)
# Porcelain v2 records: how many space-separated fields come before the path.
_FIELDS_BEFORE_PATH = {b"1": 8, b"2": 9, b"u": 10, b"?": 1}
_GITLINK = "160000"


class GitFailed(Refused):
    """A Git command failed (``GIT_FAILED``). Coded, so that where it is not turned into
    a diagnostic the user reads what Git said (and, mid-rollback, where the worktree was
    saved) instead of a traceback."""

    def __init__(self, message: str, details: dict[str, Any] | None = None):
        super().__init__("GIT_FAILED", message, details)


class _Repo(NamedTuple):
    top: str
    head: str | None
    git_paths: dict[str, str]


class _Change(NamedTuple):
    path: str
    raw: bytes
    sha256: str | None
    size: int | None


class _Snapshot(NamedTuple):
    commit: str
    left_out: list[str]


def observe(
    root: str, *, session_id: str, label: str, settings: dict[str, Any], snapshot: bool = True
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Record checkpoint ``label``; a snapshot is taken when asked and enabled in ``settings``.

    ``settings`` is ``config["ulysses"]``. Outside Git every Git field is null and the
    diagnostics say ``no_git``; a snapshot Git refused is a diagnostic (the checkpoint is
    then not restorable), while a worktree Git cannot even list raises ``GitFailed``.
    """
    _check_ref_part("/session_id", session_id)
    _check_ref_part("/label", label)
    at = clock.now()
    repo = _locate(root)
    if repo is None:
        checkpoint = _checkpoint(label, at, None, None)
        message = "not inside a Git worktree; the checkpoint records no Git state"
        return checkpoint, [{"code": "no_git", "message": message}]
    wanted = snapshot and bool(settings["checkpoint_snapshots"])
    checkpoint, diagnostics, _ = _observe(repo, session_id, label, at, settings, wanted)
    return checkpoint, diagnostics


def worktree_digest(root: str) -> str | None:
    """The digest of the uncommitted changes outside ``.ithaca/``; ``None`` outside Git,
    ``GitFailed`` when Git cannot list them."""
    repo = _locate(root)
    return None if repo is None else _digest(_changes(repo.top))


def rollback(
    root: str,
    *,
    session_id: str,
    checkpoint: dict[str, Any],
    pre_label: str,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Bring branch, index and worktree back to ``checkpoint``, saving the present first.

    The present is recorded as checkpoint ``pre_label`` with a snapshot whatever
    ``checkpoint_snapshots`` says, so the rollback itself can be rolled back; when that
    snapshot fails nothing is changed. Paths either snapshot left out for size are left
    as they are and listed under ``kept``. A Git failure after the first change raises
    ``GitFailed`` naming the saved state.
    """
    _check_ref_part("/session_id", session_id)
    _check_ref_part("/pre_label", pre_label)
    ref = checkpoint.get("snapshot_ref")
    if not checkpoint.get("restorable") or not isinstance(ref, str):
        raise _not_restorable(checkpoint, "the checkpoint has no snapshot")
    repo = _locate(root)
    if repo is None:
        raise _not_restorable(checkpoint, "not inside a Git worktree")
    busy = [what for name, what in _IN_PROGRESS.items() if os.path.exists(repo.git_paths[name])]
    if busy:
        raise Refused(
            "ROLLBACK_UNSAFE",
            f"{busy[0]} is in progress; finish or abort it before rolling back",
            {"in_progress": busy},
        )
    target = _read_snapshot(repo.top, checkpoint, ref)
    pre, diagnostics, pre_left_out = _observe(
        repo, session_id, pre_label, clock.now(), settings, snapshot=True
    )
    if pre["snapshot_ref"] is None:
        raise Refused(
            "ROLLBACK_UNSAFE",
            "the current worktree could not be saved, so a rollback could not be undone",
            {"diagnostics": diagnostics},
        )
    kept = set(target.left_out) | set(pre_left_out)
    restore, delete, warnings = _plan(repo.top, pre["snapshot_ref"], target.commit, kept)
    try:
        _move_branch(repo.top, checkpoint.get("git_head"))
        _delete(repo.top, delete)
        _restore(repo.top, target.commit, restore)
    except (GitFailed, OSError) as exc:
        saved = pre["snapshot_ref"]
        message = f"rollback stopped half-way ({_reason(exc)}); the worktree before it is {saved}"
        raise GitFailed(message, {"pre_rollback": pre}) from exc
    if kept:
        warnings.append(
            f"{len(kept)} file(s) over checkpoint_max_file_mb were left as they are: "
            + ", ".join(sorted(kept))
        )
    return {
        "pre_rollback": pre,
        "restored": [_display(raw) for raw in restore],
        "deleted": [_display(raw) for raw in delete],
        "kept": sorted(kept),
        "warnings": warnings,
    }


def status_entries(output: bytes) -> dict[bytes, bytes]:
    """Each path of ``git status --porcelain=v2 -z`` output, mapped to its record.

    Ordinary (``1``), unmerged (``u``) and untracked (``?``) records name one path; a
    rename or copy (``2``) names two, both kept. Ignored (``!``) and header (``#``)
    records are skipped.
    """
    entries: dict[bytes, bytes] = {}
    tokens = iter(output.split(b"\0"))
    for record in tokens:
        fields = _FIELDS_BEFORE_PATH.get(record[:1])
        parts = record.split(b" ", fields) if fields else []
        if len(parts) != (fields or 0) + 1 or not parts[-1]:
            continue
        entries[parts[-1]] = record
        if record[:1] == b"2":
            original = next(tokens, b"")
            if original:
                entries[original] = record
    return entries


def _observe(
    repo: _Repo,
    session_id: str,
    label: str,
    at: str,
    settings: dict[str, Any],
    snapshot: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    changes = _changes(repo.top)
    checkpoint = _checkpoint(label, at, repo.head, _digest(changes))
    if not snapshot:
        return checkpoint, [], []
    limit = settings["checkpoint_max_file_mb"] * 1024 * 1024
    too_large = [change for change in changes if change.size is not None and change.size > limit]
    left_out = [change.path for change in too_large]
    try:
        ref = _save_snapshot(
            repo, session_id, label, [change.raw for change in too_large], left_out
        )
    except (GitFailed, OSError) as exc:
        diagnostic = {
            "code": "checkpoint_snapshot_failed",
            "message": f"no snapshot for checkpoint {label}, so it cannot be restored:"
            f" {_reason(exc)}",
        }
        return checkpoint, [diagnostic], left_out
    checkpoint["snapshot_ref"] = ref
    checkpoint["restorable"] = "partial" if left_out else True
    return checkpoint, [], left_out


def _checkpoint(label: str, at: str, head: str | None, digest: str | None) -> dict[str, Any]:
    return {
        "label": label,
        "at": at,
        "git_head": head,
        "worktree_digest": digest,
        "snapshot_ref": None,
        "restorable": False,
    }


def _check_ref_part(pointer: str, value: object) -> None:
    if not isinstance(value, str) or not _REF_PART.fullmatch(value):
        raise invalid_field(
            pointer, "WRONG_FORMAT", f"{pointer[1:]} must be 1-200 of A-Z a-z 0-9 _ -"
        )


def _git(top: str, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> bytes:
    """Run Git in ``top``; a failure raises ``GitFailed`` naming the command and its error."""
    command = next(arg for arg in args if not arg.startswith("-"))
    try:
        done = git.run([*_CONFIG, *args], cwd=top, input=stdin, git_env=env, timeout=None)
    except OSError as exc:  # Git gone since _locate found it, or no memory to start it
        raise GitFailed(f"git {command} could not start: {exc}", {"command": command}) from exc
    if done.returncode != 0:
        error = done.stderr.decode("utf-8", "replace").strip()
        raise GitFailed(f"git {command} failed: {error}", {"command": command, "stderr": error})
    return done.stdout


def _locate(root: str) -> _Repo | None:
    """The worktree containing ``root``, its ``HEAD`` and Git-directory paths; one Git call."""
    here = os.path.abspath(root)
    asked = [arg for name in _GIT_PATHS for arg in ("--git-path", name)]
    located = [*_CONFIG, "rev-parse", "--show-toplevel", *asked, "--verify", "-q", "HEAD"]
    try:
        done = git.run(located, cwd=here, timeout=None)
    except OSError:
        return None
    lines = [os.fsdecode(line) for line in done.stdout.splitlines()]
    known = 1 + len(_GIT_PATHS)
    # Exit 1 with every path printed is an unborn branch: HEAD names no commit yet.
    if done.returncode not in (0, 1) or len(lines) < known:
        return None
    head = lines[known] if done.returncode == 0 and len(lines) > known else None
    git_paths = {
        name: os.path.normpath(os.path.join(here, path))
        for name, path in zip(_GIT_PATHS, lines[1:known], strict=True)
    }
    return _Repo(lines[0], head, git_paths)


def _changes(top: str) -> list[_Change]:
    """Every changed, deleted or untracked path outside ``.ithaca/``, sorted, with its hash."""
    output = _git(top, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames")
    changes = []
    base = os.fsencode(top)
    for raw, record in status_entries(output).items():
        if _in_state_dir(raw):
            continue
        sha256, size = _hash(os.path.join(base, raw), record)
        changes.append(_Change(_display(raw), raw, sha256, size))
    return sorted(changes)


def _hash(path: bytes, record: bytes) -> tuple[str | None, int | None]:
    """SHA-256 and size of a file, the link text of a symlink, ``None`` when it is gone.

    Content Git cannot read as a file (a submodule, a nested repository, an unreadable
    file) is represented by the digest of its status record.
    """
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return canon.digest_bytes(os.readlink(path)), None
        if stat.S_ISREG(info.st_mode):
            with open(path, "rb") as handle:
                return hashlib.file_digest(handle, "sha256").hexdigest(), info.st_size
    except FileNotFoundError:
        return None, None
    except OSError:
        pass
    return canon.digest_bytes(record), None


def _digest(changes: list[_Change]) -> str:
    return canon.digest([{"path": change.path, "sha256": change.sha256} for change in changes])


def _submodules(top: str, env: dict[str, str]) -> list[bytes]:
    """The paths the index records as submodules (mode 160000)."""
    listed = _git(top, "ls-files", "-z", "--stage", env=env).split(b"\0")
    return [entry.split(b"\t", 1)[1] for entry in listed if entry.startswith(b"160000 ")]


def _save_snapshot(
    repo: _Repo, session_id: str, label: str, too_large: list[bytes], left_out: list[str]
) -> str:
    """Commit the worktree from a scratch copy of the index; returns the ref that keeps it."""
    with tempfile.TemporaryDirectory(prefix="ithaca-checkpoint-") as scratch:
        index = os.path.join(scratch, "index")
        if os.path.exists(repo.git_paths["index"]):
            # copy2 keeps the index's mtime: Git rereads a file whose stat is not older
            # than the index ("racily clean"); a fresh mtime would hide a same-tick edit.
            shutil.copy2(repo.git_paths["index"], index)
        scratch_env = {"GIT_INDEX_FILE": index}
        # ``git add`` looks inside every submodule the index lists, with that repository's
        # own settings (a filter the agent planted there would run as the user): the
        # snapshot keeps each submodule's recorded commit instead.
        skipped = [*too_large, *_submodules(repo.top, scratch_env)]
        pathspecs = [b".", b":(exclude).ithaca", *(b":(exclude,literal)" + p for p in skipped)]
        _git(
            repo.top,
            "add",
            "-A",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            stdin=b"\0".join(pathspecs),
            env=scratch_env,
        )
        tree = _git(repo.top, "write-tree", env=scratch_env).decode().strip()
    message = (
        f"Ithaca checkpoint {label} of {session_id}\n\n"
        f"{LEFT_OUT_MARKER}{canon.canonical_text(left_out)}\n"
    )
    parents = ["-p", repo.head] if repo.head else []
    commit = _git(
        repo.top,
        "commit-tree",
        tree,
        *parents,
        "-F",
        "-",
        stdin=message.encode("utf-8"),
        env=_IDENTITY,
    )
    ref = f"{REF_PREFIX}/{session_id}/{label}"
    _git(repo.top, "update-ref", ref, commit.decode().strip())
    return ref


def _read_snapshot(top: str, checkpoint: dict[str, Any], ref: str) -> _Snapshot:
    """The snapshot commit behind ``ref``, refused unless it still belongs to ``checkpoint``."""
    if not ref.startswith(REF_PREFIX + "/"):
        raise _not_restorable(checkpoint, f"{ref} is not a checkpoint ref")
    try:
        commit = _git(top, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}").decode().strip()
        body = _git(top, "cat-file", "commit", commit).decode("utf-8", "replace")
    except GitFailed:
        raise _not_restorable(checkpoint, f"the snapshot ref {ref} is gone") from None
    headers, _, message = body.partition("\n\n")
    parents = [line[7:] for line in headers.splitlines() if line.startswith("parent ")]
    head = checkpoint.get("git_head")
    if parents != ([head] if head else []):
        raise _not_restorable(checkpoint, f"{ref} no longer holds this checkpoint")
    left_out: list[str] = []
    for line in message.splitlines():
        if line.startswith(LEFT_OUT_MARKER):
            left_out = [str(path) for path in json.loads(line[len(LEFT_OUT_MARKER) :])]
    return _Snapshot(commit, left_out)


def _plan(
    top: str, present: str, target: str, kept: set[str]
) -> tuple[list[bytes], list[bytes], list[str]]:
    """Paths to restore from ``target`` and to delete, from the diff of the two snapshots."""
    output = _git(top, "diff-tree", "-r", "-z", "--no-renames", present, target)
    tokens = output.split(b"\0")
    restore: list[bytes] = []
    delete: list[bytes] = []
    warnings: list[str] = []
    for header, raw in zip(tokens[0::2], tokens[1::2], strict=False):
        old_mode, new_mode, _, _, status = header[1:].decode().split(" ")
        if _in_state_dir(raw) or _display(raw) in kept:
            continue
        if _GITLINK in (old_mode, new_mode):
            warnings.append(f"submodule {_display(raw)} was left as it is")
        elif status == "D":
            delete.append(raw)
        else:
            restore.append(raw)
    return restore, delete, warnings


def _move_branch(top: str, head: str | None) -> None:
    """Point the branch at ``head`` and the index at its tree; an unborn head empties both."""
    if head:
        _git(top, "reset", "-q", head, "--")
    else:
        _git(top, "update-ref", "-d", "HEAD")
        _git(top, "read-tree", "--empty")


def _restore(top: str, commit: str, paths: list[bytes]) -> None:
    """Write ``paths`` into the worktree as ``commit`` holds them; the index is not touched."""
    if paths:
        _git(
            top,
            "--literal-pathspecs",
            "restore",
            f"--source={commit}",
            "--worktree",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            stdin=b"\0".join(paths),
        )


def _delete(top: str, paths: list[bytes]) -> None:
    """Remove files, then the folders they leave empty (never ``top`` itself)."""
    base = os.fsencode(top)
    for path in paths:
        target = os.path.join(base, path)
        try:
            os.unlink(target)
        except FileNotFoundError:
            pass
        folder = os.path.dirname(target)
        while folder.startswith(base + b"/"):
            try:
                os.rmdir(folder)
            except OSError:
                break
            folder = os.path.dirname(folder)


def _in_state_dir(raw: bytes) -> bool:
    return raw == STATE_DIR or raw.startswith(STATE_DIR + b"/")


def _display(raw: bytes) -> str:
    """A path as reported: UTF-8, with undecodable bytes shown as escapes."""
    return raw.decode("utf-8", "backslashreplace")


def _reason(exc: Exception) -> str:
    return exc.message if isinstance(exc, GitFailed) else str(exc)


def _not_restorable(checkpoint: dict[str, Any], why: str) -> Refused:
    return Refused(
        "CHECKPOINT_NOT_RESTORABLE",
        f"checkpoint {checkpoint.get('label')} cannot be restored: {why}",
        {"label": checkpoint.get("label")},
    )
