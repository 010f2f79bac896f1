"""Reading what Ithaca protects: by its bytes, and only where a regular file stands.

A protected file is judged by what it holds. Its size, inode and times say nothing a
process cannot put back after an edit (``os.utime`` restores the modification time), so
nothing here looks at them. And inside the project a file Ithaca protects must be a
regular file with one name: a symbolic link can lead anywhere and be pointed elsewhere
later, a second hard link lets a path outside the protected folders change the file, and
a FIFO, socket or device would hang or feed whoever reads it. So ``read`` never follows a
link, opens with ``O_NONBLOCK`` (a FIFO opens at once and is never read), and checks the
open descriptor before it reads a byte; anything but a singly linked regular file comes
back as its kind (``SYMLINK``, ``HARD_LINK``, ``FIFO`` …), never as content.

The user's own settings files outside the project (``~/.ithaca/config.toml``, the hosts'
user settings) may be links, as dotfile managers make them. ``read_through`` follows
those, still refusing anything but a regular file at the end, and its token names the
link as well as the bytes it leads to, so pointing it elsewhere or editing what it leads
to both show.

``rule_files`` is the one definition of a team rule file that the protocol loader and the
effect check share. Standard library and light modules only (hook path).
"""

from __future__ import annotations

import errno
import os
import stat

from ithaca.kernel.canon import sha256  # not hashlib: OpenSSL costs every hook milliseconds

REGULAR = "regular"  # what ``load`` calls a file it read
SYMLINK = "symlink"
HARD_LINK = "hard link"
FIFO = "fifo"
SOCKET = "socket"
DEVICE = "device"
FOLDER = "folder"
UNREADABLE = "unreadable"
TOO_LARGE = "too large"
# No protected file is near this; a larger one is not read (each hook would pay for it).
MAX_BYTES = 16 * 1024 * 1024
# How each kind reads in a message: "<path> is <phrase> where a regular file belongs".
KINDS = {
    SYMLINK: "a symbolic link",
    HARD_LINK: "a hard link (another name can change the same file)",
    FIFO: "a FIFO",
    SOCKET: "a socket",
    DEVICE: "a device",
    FOLDER: "a folder",
    UNREADABLE: "unreadable",
    TOO_LARGE: f"larger than Ithaca reads ({MAX_BYTES // 1048576} MiB)",
}
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_GONE = (errno.ENOENT, errno.ENOTDIR)  # nothing stands there


def read(path: str) -> tuple[str | None, bytes | None]:
    """``(token, data)`` for ``path``, never following a link: ``(None, None)`` when nothing
    is there, ``(sha256 hex, bytes)`` for a singly linked regular file, ``(kind, None)``
    for anything else (a key of ``KINDS``)."""
    kind, data = load(path)
    return (kind if data is None else sha256(data).hexdigest()), data


def load(path: str) -> tuple[str | None, bytes | None]:
    """``read`` without the digest: ``(REGULAR, bytes)`` for a singly linked regular file,
    else as ``read``."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:
        if exc.errno in _GONE:
            return None, None
        return (SYMLINK if exc.errno == errno.ELOOP else _kind_at(path)), None
    except ValueError:  # a NUL in a path a manifest named
        return UNREADABLE, None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _kind(info.st_mode), None
        if info.st_nlink != 1:
            return HARD_LINK, None
        if info.st_size > MAX_BYTES:
            return TOO_LARGE, None
        return REGULAR, _all(fd, info.st_size)
    except OSError:
        return UNREADABLE, None
    finally:
        os.close(fd)


def read_through(path: str) -> tuple[str | None, bytes | None]:
    """``read`` for the user's own files outside the project: a link is followed (what it
    leads to must be a regular file, of any number of names) and the token names it. A
    link that leads nowhere reads as nothing."""
    link = None
    if "\0" in path:
        return UNREADABLE, None
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            link = os.readlink(path)
            info = os.stat(path)  # no open before the kind is known: a device is never opened
    except OSError as exc:
        return (None if exc.errno in _GONE else UNREADABLE), None
    if not stat.S_ISREG(info.st_mode):
        return _kind(info.st_mode), None
    if info.st_size > MAX_BYTES:
        return TOO_LARGE, None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return (None if exc.errno in _GONE else UNREADABLE), None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _kind(info.st_mode), None
        data = _all(fd, info.st_size)
    except OSError:
        return UNREADABLE, None
    finally:
        os.close(fd)
    digest = sha256(data).hexdigest()
    return (digest if link is None else f"{SYMLINK} {link} {digest}"), data


def odd(token: str | None) -> bool:
    """Whether ``token`` (from ``read``) stands for something other than a regular file or
    nothing: a link, a FIFO, a folder …"""
    return token in KINDS


def rule_files(folder: str) -> tuple[str | None, list[str]]:
    """The team rule files in ``folder``: every entry directly in it whose name ends in
    ``.json`` and does not start with ``.``, whatever it is (``read`` tells whether it is
    a regular file), sorted. The first item is the folder's own kind when it is not a
    real folder (a link to one is not listed through), else None.

    Hidden names are left out: no protocol id starts with ``.``, and an editor's lock file
    is not a rule (Emacs makes ``.#team.json`` a symbolic link while a rule is edited)."""
    kind = _kind_at(folder)
    if kind is None:
        return None, []
    if kind != FOLDER:
        return kind, []
    try:  # by name: ``listdir`` of a descriptor costs five more system calls
        names = [name for name in os.listdir(folder) if name.endswith(".json") and name[0] != "."]
    except OSError as exc:
        return (None if exc.errno in _GONE else UNREADABLE), []
    names.sort()
    return None, names


def _all(fd: int, size: int) -> bytes:
    """What ``fd`` (a regular file of ``size`` bytes when it was looked at) holds, read to
    its end; ``OSError`` when it grew past ``MAX_BYTES`` meanwhile."""
    chunks = [os.read(fd, size + 1)]
    read = len(chunks[0])
    while chunks[-1]:
        if read > MAX_BYTES:
            raise OSError(errno.EFBIG, "grew past what Ithaca reads")
        chunks.append(os.read(fd, 65536))
        read += len(chunks[-1])
    return b"".join(chunks)


def _kind_at(path: str) -> str | None:
    try:
        info = os.lstat(path)
    except OSError as exc:
        return None if exc.errno in _GONE else UNREADABLE
    return SYMLINK if stat.S_ISLNK(info.st_mode) else _kind(info.st_mode)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return FOLDER
    if stat.S_ISFIFO(mode):
        return FIFO
    if stat.S_ISSOCK(mode):
        return SOCKET
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return DEVICE
    return UNREADABLE
