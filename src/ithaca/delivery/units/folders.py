"""Folders walked through descriptors that never follow a symlink, and moved whole.

A unit's folder moves and its rollback's sweeps must not be led out of the state root by
a symlink planted on the way, so every folder is opened one name at a time with
``O_NOFOLLOW`` (a symlink on the way is ``PATH_UNSAFE``) and files are looked at through
the folder's descriptor.
"""

from __future__ import annotations

import errno
import os
import stat

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput


def rename_folder(state_root: str, source: str, target: str) -> bool:
    """Move the folder ``source`` to ``target`` (both under the state root) and fsync
    both parents; False when ``source`` is no folder or ``target`` exists."""
    source_parts, target_parts = source.split("/"), target.split("/")
    source_fd = open_folders(state_root, source_parts[:-1], create=False)
    if source_fd is None:
        return False
    try:
        if file_type(source_fd, source_parts[-1]) != stat.S_IFDIR:
            return False
        target_fd = open_folders(state_root, target_parts[:-1], create=True)
        assert target_fd is not None
        try:
            if file_type(target_fd, target_parts[-1]) is not None:
                return False
            os.rename(
                source_parts[-1],
                target_parts[-1],
                src_dir_fd=source_fd,
                dst_dir_fd=target_fd,
            )
            os.fsync(target_fd)
            os.fsync(source_fd)
        finally:
            os.close(target_fd)
    finally:
        os.close(source_fd)
    return True


def open_folders(root: str, folders: list[str], *, create: bool) -> int | None:
    """A descriptor of ``root/folders…`` walked without following symlinks (made when
    ``create``); None when a folder is missing. A symlink on the way is ``PATH_UNSAFE``."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for name in folders:
        try:
            if create and file_type(fd, name) is None:
                os.mkdir(name, dir_fd=fd)
            child = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise InvalidInput(
                    "PATH_UNSAFE",
                    f"{'/'.join(folders)} passes through a symlink or a file",
                    {"path": "/".join(folders)},
                ) from exc
            raise
        finally:
            os.close(fd)
        fd = child
    return fd


def file_type(folder_fd: int, name: str) -> int | None:
    """The file type of ``name`` in the folder (not following a symlink), None if absent."""
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None


def digest_at(folder_fd: int, name: str) -> str | None:
    """The digest of the regular file ``name`` in the folder, None if it cannot be read."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return canon.digest_bytes(handle.read())
