"""Confined, atomic file writes: the one helper that writes every file Ithaca writes.

Ithaca's files are evidence (protocol files, decision records, the team ledger, blobs), so
a write must never land outside the project and never leave a half-written file behind.
Targets are named relative to a trusted root; the root's own path is the caller's and
may pass through symlinks, but nothing below it may: an agent that plants a symlink
inside the project could otherwise redirect a write anywhere on the machine.

The walk below the root goes folder by folder through file descriptors opened with
``O_NOFOLLOW``, and every later step (mkdir, temp file, rename, unlink) is relative to
those descriptors, so a symlink swapped in after a check cannot redirect the write.
The data goes to a randomly named temp file in the target's folder, is fsynced, renamed
over the target and the folder fsynced: a reader sees the old file or the new one,
never a mix, even across a crash.

A writer killed before its rename leaves its temp file behind. So that the temp can be
told apart from a live writer's, the writer holds an exclusive ``flock`` on it from just
after creating it until just after the rename; the kernel drops the lock with the
process, however it dies. ``remove_abandoned`` (what ``ithaca doctor --repair`` runs,
docs/delivery.md, ``doctor``) removes a temp only once it has taken that lock itself;
a writer that finds its new temp was removed in the instant before it locked it makes
another.
"""

from __future__ import annotations

import errno
import fcntl
import fnmatch
import os
import re
import secrets
import stat
from pathlib import Path

from ithaca.kernel.errors import Refused

_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# The name ``write_atomic`` gives its temp file (``secrets.token_hex(8)``).
TEMP_NAME = re.compile(r"\.ithaca-[0-9a-f]{16}\.tmp")
# Opening a temp to test its lock: never follow a link nor wait on a FIFO in its place.
_PROBE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def resolve_confined(root: str | os.PathLike[str], relpath: str | Path) -> Path:
    """The absolute path of ``relpath`` inside ``root``, refused if it could escape it.

    Refuses (``UNSAFE_PATH``) NUL bytes, absolute paths outside ``root``, ``..`` that
    climbs above ``root``, an existing symlink at the target or on the way to it, and an
    existing non-folder on the way.
    """
    base, parts = _confined_parts(root, relpath)
    try:
        folder_fd = _open_folder(base, parts[:-1], relpath, create=False)
    except FileNotFoundError:
        return base.joinpath(*parts)
    try:
        _target_kind(folder_fd, parts[-1], relpath)
    finally:
        os.close(folder_fd)
    return base.joinpath(*parts)


def write_atomic(
    root: str | os.PathLike[str], relpath: str | Path, data: bytes | str, *, mode: int = 0o644
) -> Path:
    """Write ``data`` (text as UTF-8) to ``relpath`` inside ``root`` atomically.

    Missing folders, the root included, are created; returns the absolute target path.
    """
    base, parts = _confined_parts(root, relpath)
    name = parts[-1]
    os.makedirs(base, exist_ok=True)
    folder_fd = _open_folder(base, parts[:-1], relpath, create=True)
    try:
        if _target_kind(folder_fd, name, relpath) == stat.S_IFDIR:
            raise _unsafe(relpath, "IS_A_DIRECTORY", "the target is a folder")
        _replace_with_temp(folder_fd, name, data, mode)
    finally:
        os.close(folder_fd)
    return base.joinpath(*parts)


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush a file's bytes to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_folders(root: str | os.PathLike[str], relpath: str | Path) -> Path:
    """Make the folder ``relpath`` inside ``root`` and the folders on the way (the root
    included), refusing a symlink or a non-folder anywhere below the root; its path."""
    base, parts = _confined_parts(root, relpath)
    os.makedirs(base, exist_ok=True)
    os.close(_open_folder(base, parts, relpath, create=True))
    return base.joinpath(*parts)


def remove_confined(root: str | os.PathLike[str], relpath: str | Path) -> bool:
    """Remove the file at ``relpath`` inside ``root``; False when there was none."""
    base, parts = _confined_parts(root, relpath)
    name = parts[-1]
    try:
        folder_fd = _open_folder(base, parts[:-1], relpath, create=False)
    except FileNotFoundError:
        return False
    try:
        kind = _target_kind(folder_fd, name, relpath)
        if kind is None:
            return False
        if kind == stat.S_IFDIR:
            raise _unsafe(relpath, "IS_A_DIRECTORY", "the target is a folder")
        os.unlink(name, dir_fd=folder_fd)
        os.fsync(folder_fd)
    finally:
        os.close(folder_fd)
    return True


def _confined_parts(root: str | os.PathLike[str], relpath: str | Path) -> tuple[Path, list[str]]:
    """The resolved root and the lexically normalised path components below it."""
    text = os.fspath(relpath)
    if "\0" in text:
        raise _unsafe(relpath, "NUL_BYTE", "the path holds a NUL byte")
    base = Path(root).resolve()
    candidate = Path(text)
    if candidate.is_absolute():
        candidate = _relative_to_root(candidate, Path(root), base, relpath)
    parts: list[str] = []
    for part in candidate.parts:
        if part == "..":
            if not parts:
                raise _unsafe(relpath, "TRAVERSAL", "'..' climbs above the root")
            parts.pop()
        elif part != ".":
            parts.append(part)
    if not parts:
        raise _unsafe(relpath, "EMPTY_PATH", "the path names no file below the root")
    return base, parts


def _relative_to_root(candidate: Path, root: Path, base: Path, relpath: str | Path) -> Path:
    for prefix in (Path(os.path.abspath(root)), base):
        if candidate.parts[: len(prefix.parts)] == prefix.parts:
            return Path(*candidate.parts[len(prefix.parts) :])
    raise _unsafe(relpath, "OUTSIDE_ROOT", "the absolute path is outside the root")


def _open_folder(base: Path, folders: list[str], relpath: str | Path, *, create: bool) -> int:
    """A descriptor of the target's folder; FileNotFoundError if missing and not created."""
    fd = os.open(base, _ROOT_FLAGS)
    for name in folders:
        try:
            child = _open_child_folder(fd, name, relpath, create=create)
        finally:
            os.close(fd)
        fd = child
    return fd


def _open_child_folder(parent_fd: int, name: str, relpath: str | Path, *, create: bool) -> int:
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        # Linux answers ENOTDIR for a symlink opened with O_NOFOLLOW|O_DIRECTORY.
        if _is_symlink(parent_fd, name):
            raise _unsafe(relpath, "SYMLINK", f"{name!r} is a symlink") from exc
        raise _unsafe(relpath, "NOT_A_DIRECTORY", f"{name!r} is not a folder") from exc
    try:
        os.mkdir(name, dir_fd=parent_fd)
        os.fsync(parent_fd)
    except FileExistsError:
        pass  # another writer made it first; the reopen below still refuses a symlink
    return _open_child_folder(parent_fd, name, relpath, create=False)


def _is_symlink(folder_fd: int, name: str) -> bool:
    return stat.S_ISLNK(os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode)


def _target_kind(folder_fd: int, name: str, relpath: str | Path) -> int | None:
    """The file type of the target (``stat.S_IFMT``), None if absent; symlinks refused."""
    try:
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise _unsafe(relpath, "SYMLINK", "the target is a symlink")
    return stat.S_IFMT(info.st_mode)


def _replace_with_temp(folder_fd: int, name: str, data: bytes | str, mode: int) -> None:
    payload = data.encode("utf-8") if isinstance(data, str) else data
    temp, fd = _locked_temp(folder_fd, mode)
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            os.replace(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        finally:
            os.close(fd)  # the lock goes with it, once the temp has its new name
    except BaseException:
        try:
            os.unlink(temp, dir_fd=folder_fd)
        except FileNotFoundError:
            pass
        raise
    os.fsync(folder_fd)


def _locked_temp(folder_fd: int, mode: int) -> tuple[str, int]:
    """A new temp file in ``folder_fd`` and its descriptor, locked (``flock``) for as long
    as this writer holds it open. A sweep that took the temp for a dead writer's in the
    instant between its creation and the lock has unlinked it: then another is made."""
    while True:
        temp = f".ithaca-{secrets.token_hex(8)}.tmp"
        fd = os.open(temp, _TEMP_FLAGS, mode, dir_fd=folder_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink > 0:
                return temp, fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def create_locked(path: str | os.PathLike[str], mode: int = 0o644) -> int:
    """Create ``path`` (which must not exist) and hold an exclusive ``flock`` on it while
    the returned descriptor stays open: a temp file of Ithaca's own that
    ``remove_abandoned`` leaves alone until its writer closes it or dies."""
    fd = os.open(path, _TEMP_FLAGS, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def abandoned(folder_fd: int, name: str, *, remove: bool = False) -> bool:
    """Whether the regular file ``name`` in ``folder_fd`` is a temp no live writer holds
    (its ``flock`` is free: the writer died before its rename, or predates the lock);
    with ``remove``, it is then unlinked while this process holds the lock, so a writer
    that was about to lock it makes another. A link, a folder or a FIFO is never one."""
    try:
        fd = os.open(name, _PROBE_FLAGS, dir_fd=folder_fd)
    except OSError:
        return False  # gone meanwhile, a link, or unreadable: not ours to judge
    try:
        held = os.fstat(fd)
        if not stat.S_ISREG(held.st_mode):
            return False
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if remove else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError:
            return False  # a live writer holds it
        if not remove:
            return True
        try:
            now = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            return False  # renamed over by now: another file bears the name
        os.unlink(name, dir_fd=folder_fd)
        return True
    finally:
        os.close(fd)


def abandoned_temps(
    root: str | os.PathLike[str],
    names: re.Pattern[str] = TEMP_NAME,
    *,
    skip: tuple[str, ...] = (),
    remove: bool = False,
) -> list[str]:
    """The temp files under ``root`` whose name ``names`` matches and that no live writer
    holds (``abandoned``), as root-relative POSIX paths, sorted; with ``remove``, the ones
    removed. Links are never followed, and a folder whose root-relative path matches a
    pattern of ``skip`` (``fnmatch``, where ``*`` also crosses ``/``) is not entered."""
    found = []
    top = os.fspath(root)
    for folder, subfolders, files in os.walk(top, followlinks=False):
        relative = os.path.relpath(folder, top).replace(os.sep, "/")
        prefix = "" if relative == "." else f"{relative}/"
        subfolders[:] = sorted(
            name
            for name in subfolders
            if not any(fnmatch.fnmatchcase(prefix + name, pattern) for pattern in skip)
        )
        candidates = [name for name in files if names.fullmatch(name)]
        if not candidates:
            continue
        try:
            folder_fd = os.open(folder, _FOLDER_FLAGS)
        except OSError:
            continue
        try:
            gone = False
            for name in sorted(candidates):
                if abandoned(folder_fd, name, remove=remove):
                    found.append(prefix + name)
                    gone = gone or remove
            if gone:
                os.fsync(folder_fd)
        finally:
            os.close(folder_fd)
    return sorted(found)


def _unsafe(relpath: str | Path, problem: str, message: str) -> Refused:
    return Refused(
        "UNSAFE_PATH",
        f"refused to use {os.fspath(relpath)!r}: {message}",
        {"path": os.fspath(relpath), "problem": problem},
    )
