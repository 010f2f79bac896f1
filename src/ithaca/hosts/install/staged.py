"""Staged changes to a host's files: all of them, checked first, or none.

A host wired halfway is worse than one not wired at all: hooks that run an interpreter the
server entry does not, a manifest listing entries a failed write never placed, a user's
settings file rewritten while the next one could not be. So an install or uninstall first
stages every file it would write or remove in a private staging folder (in the system's
temporary folder, so a refused change leaves no trace) and touches nothing in the
project. A preflight reads the staged files back and checks them (``hosts.install.preflight``);
a problem refuses the change with the project untouched.

Then the files are swapped in order, each by one atomic replace that keeps the file's
permission bits. The previous bytes of every target are kept in the staging folder first,
with ``plan.json`` naming where each goes (``null``: the file did not exist). If any write
fails, every file already swapped is put back as it was (a file the swap created is
removed again, with the folders it made), so the project is as it was before the command.
The staging folder is removed afterwards, unless a rollback itself fails: then the error
names it, and it holds the previous versions to restore by hand.
"""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from ithaca.hosts.install.files import file_bytes
from ithaca.hosts.install.report import InstallReport
from ithaca.kernel import (
    Corrupt,
    IthacaError,
    Refused,
    remove_confined,
    resolve_confined,
    write_atomic,
)

ROLLBACK_FAILED = "INSTALL_ROLLBACK_FAILED"


class Change(NamedTuple):
    """One staged change: the target, its staged bytes (None: the file is removed), and
    whether a removal also removes the folders it leaves empty, up to the root."""

    root: Path
    relpath: str
    staged: Path | None
    prune: bool

    @property
    def target(self) -> Path:
        return self.root / self.relpath


class _Before(NamedTuple):
    """A target as it was before the swap, to put back."""

    data: bytes | None
    kept: Path | None
    mode: int
    missing_folders: list[Path]


class Staged:
    """The changes one install or uninstall will make, staged in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.changes: list[Change] = []

    def write(self, root: Path, relpath: str, data: str | bytes) -> None:
        """Stage ``data`` for ``relpath`` under ``root`` (refused now if the path is unsafe)."""
        resolve_confined(root, relpath)
        staged = self.folder / "new" / str(len(self.changes))
        staged.parent.mkdir(exist_ok=True)
        staged.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        self.changes.append(Change(root, relpath, staged, prune=False))

    def remove(self, root: Path, relpath: str, *, prune: bool) -> None:
        """Stage the removal of ``relpath`` under ``root``."""
        resolve_confined(root, relpath)
        self.changes.append(Change(root, relpath, None, prune))

    def settle(self, root: Path, relpath: str, text: str, *, remove: bool) -> None:
        """Stage what an uninstall leaves of a file, or, with ``remove`` (the install
        created it and nothing else is in it now), its removal and that of the folders it
        leaves empty."""
        if remove:
            self.remove(root, relpath, prune=True)
        else:
            self.write(root, relpath, text)

    def read(self, root: Path, relpath: str) -> bytes | None:
        """The bytes ``relpath`` will hold once swapped in: staged, else as it is now."""
        for change in reversed(self.changes):
            if change.root == root and change.relpath == relpath:
                return None if change.staged is None else change.staged.read_bytes()
        return file_bytes(root / relpath)

    def commit(self, report: InstallReport, preflight: Callable[[Staged], list[str]]) -> None:
        """Check the staged files, then swap them in, or put everything back."""
        if not self.changes:
            return
        problems = preflight(self)
        if problems:
            raise Refused(
                "INSTALL_PREFLIGHT_FAILED",
                f"the staged files failed their preflight ({problems[0]}); nothing was written",
                {"problems": problems},
            )
        befores = [self._keep(index, change) for index, change in enumerate(self.changes)]
        plan = [
            {"target": str(change.target), "previous": str(before.kept) if before.kept else None}
            for change, before in zip(self.changes, befores, strict=True)
        ]
        (self.folder / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
        swapped = 0
        try:
            for change, before in zip(self.changes, befores, strict=True):
                swapped += 1
                _swap_in(change, before)
        except BaseException as exc:
            self._roll_back(self.changes[:swapped], befores, exc)
            if isinstance(exc, Exception) and not isinstance(exc, IthacaError):
                change = self.changes[swapped - 1]
                raise Refused(
                    "INSTALL_WRITE_FAILED",
                    f"changing {change.target} failed ({exc}); every file is back as it was",
                    {"path": str(change.target), "reason": str(exc)},
                ) from exc
            raise
        for change in self.changes:
            if change.staged is None and change.prune:
                _prune(change.root, change.target.parent)
        report.files.extend(str(change.target) for change in self.changes)

    def _keep(self, index: int, change: Change) -> _Before:
        """The target as it is now, its bytes saved in the staging folder."""
        target = change.target
        data = file_bytes(target)
        kept = None
        if data is not None:
            kept = self.folder / "previous" / str(index)
            kept.parent.mkdir(exist_ok=True)
            kept.write_bytes(data)
        mode = stat.S_IMODE(target.stat().st_mode) if data is not None else 0o644
        missing = [
            folder
            for folder in target.parents
            if folder.is_relative_to(change.root) and not folder.exists()
        ]
        return _Before(data, kept, mode, missing)

    def _roll_back(
        self, swapped: list[Change], befores: list[_Before], cause: BaseException
    ) -> None:
        failed = []
        for change, before in reversed(list(zip(swapped, befores, strict=False))):
            try:
                _put_back(change, before)
            except Exception as exc:
                failed.append(f"{change.target}: {exc}")
        if failed:
            raise Corrupt(
                ROLLBACK_FAILED,
                f"a change failed ({cause}) and {len(failed)} file(s) could not be put back; "
                f"their previous versions are in {self.folder} (see plan.json)",
                {"folder": str(self.folder), "failed": failed},
            ) from cause


@contextmanager
def staging(host: str) -> Iterator[Staged]:
    """A fresh staging folder for one change to ``host``'s files, removed afterwards
    unless a failed rollback left the only copy of a previous version in it."""
    folder = Path(tempfile.mkdtemp(prefix=f"ithaca-install-{host}-"))
    keep = False
    try:
        yield Staged(folder)
    except Corrupt as exc:
        keep = exc.code == ROLLBACK_FAILED
        raise
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _swap_in(change: Change, before: _Before) -> None:
    if change.staged is None:
        remove_confined(change.root, change.relpath)
    else:
        write_atomic(change.root, change.relpath, change.staged.read_bytes(), mode=before.mode)


def _put_back(change: Change, before: _Before) -> None:
    current = file_bytes(change.target)
    if before.data is None:
        if current is not None:
            remove_confined(change.root, change.relpath)
        for folder in before.missing_folders:  # nearest first
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
    elif current != before.data:
        write_atomic(change.root, change.relpath, before.data, mode=before.mode)


def _prune(root: Path, folder: Path) -> None:
    """Remove ``folder`` and its parents below ``root`` while they are empty."""
    while folder != root and folder.is_relative_to(root) and folder.is_dir():
        if any(folder.iterdir()):
            return
        folder.rmdir()
        folder = folder.parent
