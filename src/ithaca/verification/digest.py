"""The content digest of a project: what its files hold, read from the file system itself.

The end-of-turn critic asks whether the project now is the project a verification run
passed on. Git cannot be asked: an agent can hide a change from ``git status`` with
``git update-index --assume-unchanged`` or ``--skip-worktree``, a new ``.gitignore`` rule,
or an embedded repository (``sub/.git``). So ``tree`` walks the folder with ``os.scandir``
and takes every file, whatever Git or ``.gitignore`` say: a regular file by the SHA-256 of
its bytes (``x`` before it when an execute bit is set), a symbolic link by its text (``l``
before it; links are never followed), a file it cannot read as ``?``. It enters no folder
named in ``SKIPPED`` (Git's own folder, Ithaca's state, Python's and the tools' caches) or
in ``skip``, and skips a file named ``.git`` (the link of a worktree or a submodule);
sockets, FIFOs and devices are left out, and so are empty folders, which hold no content.
The digest is SHA-256 over the sorted entries.

Speed: a stat cache. Hashing every byte of a 10,000-file project costs far more than a hook
may spend, so ``tree(root, cache=path)`` keeps, per file, the key ``(st_dev, st_ino,
st_size, st_mtime_ns, st_ctime_ns, st_mode)`` with the entry it hashed, and on the next run
reuses the entry of a file whose key is unchanged instead of reading it again. This is
still a judgement of content, not of metadata an agent controls: ``st_ctime`` (the inode
change time) cannot be set by any call a process makes (short of setting the system clock,
which takes root); writing a file moves it to the current time, and so does
``os.utime``/``touch``, which set the other times. Editing a file
and putting its size and modification time back therefore still changes its key, and the
file is read again. What remains is the clock's grain: a file changed twice within one
timestamp tick keeps its ``st_ctime``. As Git does with its index ("racy" entries), a
cached entry is trusted only for a file whose ``st_ctime`` is more than ``RACY_NS`` (2 s,
the coarsest grain of common file systems) older than the cache's recorded time, which
is the moment its walk *began* (earlier than it was written, so stricter); a newer file is
read on every run until it has aged. The cache also stores the digest of the whole tree,
reused when every entry is unchanged.

The cache is written atomically (a temporary file in the same folder, then
``os.replace``), only when something changed. It is a ``marshal`` image: ``marshal`` is
built into the interpreter (nothing to import) and loads a 10,000-entry cache in a
millisecond or two, several times faster than JSON. ``marshal`` is not meant for data from
an adversary, and it does not need to be: the cache lives in Ithaca's state folder, which
the agent cannot write (and nothing loaded from it is ever run). A missing, unreadable,
corrupt or other-version cache is ignored and rebuilt; the cache never makes ``tree``
raise. Keep the cache outside the walked tree (or under a skipped folder such as
``.ithaca/``), or it becomes part of the digest.

Standard library only, and little of it: this runs in a hook process (``gc``, ``marshal``
and ``time`` are built in). The files a run must read are hashed with CPython's built-in
SHA-256; when they add up to more than ``BULK_BYTES``, ``hashlib`` (OpenSSL, several times
faster, a few milliseconds to import) is loaded for them. They are read one after the
other: hashing them in two threads was measured slower (small files cost system calls, not
hashing), and so was ``stat`` in two threads. Each folder is listed through a descriptor,
so ``stat`` looks up one name; the cyclic garbage collector is paused during a run.
``bench/verify_digest.py`` measures it all.
"""

from __future__ import annotations

import gc
import os
from marshal import dumps, loads
from time import monotonic, time_ns

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _hashlib import HASH
    from collections.abc import Callable, Iterable, Mapping
    from hashlib import sha256  # the same interface; the private modules have no stubs

    Key = tuple[int, ...]
    Cache = tuple[str, int, str, dict[str, str], dict[str, Key]]
else:
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # Python 3.12+
        except ImportError:
            from hashlib import sha256

SKIPPED = frozenset(
    {
        ".git",
        ".ithaca",
        ".ithaca-work",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
    }
)
# A cached entry is trusted only for a file whose ctime is this much older than the
# moment the cache's walk began (see the module's docstring).
RACY_NS = 2_000_000_000
# Above this many bytes to read, hash with OpenSSL (``hashlib``) rather than CPython's own.
BULK_BYTES = 1 << 20
CHUNK = 1 << 20
CACHE_FORMAT = "ithaca.verification.digest/1"
# What the digest is taken over begins with this, so another scheme cannot collide with it.
DIGEST_PREFIX = b"ithaca-tree/1\0"
UNREADABLE = "?"
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Tree:
    """A project's content: ``digest``, the hex SHA-256 over the sorted entries, and
    ``files``, each POSIX relative path with its entry (``"<sha256 hex>"`` for a regular
    file, ``"x<sha256 hex>"`` if executable, ``"l<link text>"`` for a symbolic link,
    ``"?"`` for a file or folder that could not be read). Read-only, like a frozen
    dataclass (which a hook process cannot afford to import)."""

    __slots__ = ("digest", "files")
    digest: str
    files: dict[str, str]

    def __init__(self, digest: str, files: dict[str, str]) -> None:
        object.__setattr__(self, "digest", digest)
        object.__setattr__(self, "files", files)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Tree:
            return NotImplemented
        return self.digest == other.digest and self.files == other.files

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"Tree(digest={self.digest!r}, files=<{len(self.files)} entries>)"


class Unfinished(Exception):
    """The digest was not done by its deadline; what it read is in the cache."""


def tree(
    root: str,
    *,
    cache: str | None = None,
    skip: Iterable[str] = (),
    until: float | None = None,
) -> Tree:
    """The content of the folder ``root``. ``cache``: the stat cache's file (its folder
    must exist), read if it is usable and rewritten when something changed. ``skip``:
    more folders never entered, each a name (``"node_modules"``, at any depth) or a POSIX
    path relative to ``root`` (``"data/big"``). ``until``: a ``time.monotonic()`` by which
    to be done, else ``Unfinished`` is raised once the files read so far are cached (a
    hook's first digest of a large project then goes on where it stopped). Raises
    ``OSError`` only when ``root`` itself cannot be listed."""
    # The walk and the cache make tens of thousands of tuples that all live until the
    # end: the cyclic collector would scan them again and again for nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _tree(root, cache, skip, until)
    finally:
        if collecting:
            gc.enable()


def _tree(root: str, cache: str | None, skip: Iterable[str], until: float | None) -> Tree:
    began = time_ns()
    root = os.fspath(root)  # a Path works too
    skip_names = set(SKIPPED)
    skip_paths = set()
    for item in skip:
        cleaned = item.replace(os.sep, "/").strip("/")
        while cleaned.startswith("./"):
            cleaned = cleaned[2:].lstrip("/")
        if "/" in cleaned:
            skip_paths.add(cleaned)
        elif cleaned and cleaned != ".":
            skip_names.add(cleaned)
    old = _load(cache) if cache is not None else None
    old_time, old_digest, old_files, old_keys = old or (0, "", {}, {})
    trusted_before = old_time - RACY_NS
    files: dict[str, str] = {}
    keys: dict[str, Key] = {}
    # Files to read: (relative path, stat key).
    misses: list[tuple[str, Key]] = []
    # Each folder is listed through a descriptor, so that ``stat`` and ``readlink`` look
    # up one name (``fstatat``) instead of resolving the whole path again.
    base = root if root.endswith("/") else root + "/"
    folders = [("", _DIRECTORY_FLAGS & ~os.O_NOFOLLOW)]  # the root may be a link
    while folders:
        prefix, flags = folders.pop()
        try:
            handle = os.open(base + prefix if prefix else root, flags)
        except OSError:
            if not prefix:
                raise  # the root itself must be readable
            files[prefix[:-1]] = UNREADABLE
            continue
        try:
            with os.scandir(handle) as listing:
                for entry in listing:
                    name = entry.name
                    path = prefix + name
                    try:
                        if entry.is_file(follow_symlinks=False):
                            if name == ".git":
                                continue  # a worktree's or submodule's link to its repository
                            st = entry.stat(follow_symlinks=False)
                            key = _key(st)
                            known = old_keys.get(path)
                            if known == key and st.st_ctime_ns < trusted_before:
                                found = old_files.get(path)
                                if type(found) is str:
                                    files[path] = found
                                    keys[path] = known
                                    continue
                            misses.append((path, key))
                        elif entry.is_dir(follow_symlinks=False):
                            if name in skip_names or (skip_paths and path in skip_paths):
                                continue
                            folders.append((path + "/", _DIRECTORY_FLAGS))
                        elif entry.is_symlink() and name != ".git":
                            files[path] = "l" + os.readlink(name, dir_fd=handle)
                        # else: a socket, a FIFO or a device, which holds no content
                    except OSError:
                        files[path] = UNREADABLE
        except OSError:
            files[prefix[:-1] if prefix else "."] = UNREADABLE  # the listing broke off
        finally:
            os.close(handle)
    if misses and not _read(base, misses, files, keys, until):
        if cache is not None:  # keep what was read for the next try; no digest stands
            done = {path: files[path] for path in keys}
            _store(cache, (CACHE_FORMAT, began, "", done, keys))
        raise Unfinished(f"{len(misses)} files to read, and the deadline came first")
    # Every entry as the cache had it: the digest it stored is this tree's.
    digest = old_digest if files == old_files and old_digest else _digest(files)
    if cache is not None and (misses or files != old_files):
        _store(cache, (CACHE_FORMAT, began, digest, files, keys))
    return Tree(digest, files)


def changed(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The paths added, removed or whose entry differs between two ``Tree.files``, sorted."""
    moved = {path for path, entry in after.items() if before.get(path) != entry}
    moved.update(path for path in before if path not in after)
    return sorted(moved)


def _digest(files: dict[str, str]) -> str:
    text = "".join([f"{path}\0{files[path]}\0" for path in sorted(files)])
    hashed = sha256(DIGEST_PREFIX)
    hashed.update(text.encode("utf-8", "surrogateescape"))
    return hashed.hexdigest()


def _read(
    base: str,
    misses: list[tuple[str, Key]],
    files: dict[str, str],
    keys: dict[str, Key],
    until: float | None = None,
) -> bool:
    """Hash the files in ``misses`` into ``files``, and note in ``keys`` those whose stat
    key held while they were read; False when ``until`` came before the last."""
    new: Callable[[], HASH] = sha256
    if sum(key[2] for _, key in misses) > BULK_BYTES:
        import hashlib  # OpenSSL: worth its import only for many bytes

        new = hashlib.sha256
    for done, (path, key) in enumerate(misses):
        if until is not None and done % 64 == 0 and monotonic() > until:
            return False
        hashed = _hash_file(base + path, new)
        if hashed is None:
            files[path] = UNREADABLE
            continue
        hexdigest, after = hashed
        files[path] = "x" + hexdigest if key[5] & 0o111 else hexdigest
        if after == key:
            keys[path] = key
        # else the file changed while it was read: hash it again on the next run
    return True


def _hash_file(full: str, new: Callable[[], HASH]) -> tuple[str, Key] | None:
    """The SHA-256 of the regular file ``full`` and its stat key once read, or None when
    it cannot be read (or is no longer a regular file)."""
    try:
        handle = os.open(full, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        hashed = new()
        while chunk := os.read(handle, CHUNK):
            hashed.update(chunk)
        st = os.fstat(handle)
    except OSError:
        return None
    finally:
        os.close(handle)
    if st.st_mode & 0o170000 != 0o100000:  # S_IFREG: it was swapped for something else
        return None
    return hashed.hexdigest(), _key(st)


def _key(st: os.stat_result) -> Key:
    """What the cache compares of a file: where it is, its size, its times, its mode."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _load(cache: str) -> tuple[int, str, dict[str, str], dict[str, Key]] | None:
    """The cache's (walk time, digest, files, keys), or None when it is missing or not a
    cache this version wrote."""
    try:
        with open(cache, "rb") as handle:
            value = loads(handle.read())
    except Exception:  # missing, unreadable or not marshal data: start afresh
        return None
    if type(value) is not tuple or len(value) != 5 or value[0] != CACHE_FORMAT:
        return None
    _, began, digest, files, keys = value
    if type(began) is not int or type(digest) is not str:
        return None
    if type(files) is not dict or type(keys) is not dict:
        return None
    # Entries are checked where they are used: a key that is not a tuple never matches,
    # and an entry that is not a string is not reused.
    return began, digest, files, keys


def _store(cache: str, value: Cache) -> None:
    """Write ``value`` to ``cache`` atomically; on any failure leave things as they were."""
    temporary = f"{cache}.{os.getpid()}.{time_ns()}.tmp"
    try:
        data = dumps(value)
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except Exception:  # the folder is missing or read-only: run without a cache
        return
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view) :]
        finally:
            os.close(handle)
        os.replace(temporary, cache)
    except Exception:
        try:
            os.unlink(temporary)
        except OSError:
            pass
