"""Rolling a pending unit back: its files restored, its temps swept, its folders undone.

A failure before T2 commits, or a dead owner's ``pending`` intent, is undone from what
the intent recorded: a target bearing the new digest is deleted (it was new) or replaced
by its copy; the folders the unit made are removed when empty, deepest first; then each
moved folder goes back, and the folders that leaves empty go too.

A process killed inside the kernel's atomic write leaves its temp file
(``.ithaca-<16 hex>.tmp``) beside the target, and maybe folders it made for it, so a
rollback also sweeps them (``_sweep_temps``, ``_remove_created``). Only what the unit
can be shown to own, or what no one holds, goes: in a target's folder, a temp with
exactly the kernel's name that holds the target's new bytes, or any such temp when the
intent recorded the folder as missing at T1 (nothing else writes into a folder a
pending unit is bringing into being), or a half-written one no live writer holds (the
kernel's writer keeps a ``flock`` on its temp until its rename: ``files.abandoned``);
then the recorded folders, deepest first, if they are empty. A temp a live writer
holds is left alone: deleting it would fail that write.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ithaca.delivery.units import registry
from ithaca.delivery.units.folders import digest_at, file_type, open_folders, rename_folder
from ithaca.kernel import canon
from ithaca.kernel.files import TEMP_NAME, abandoned, remove_confined, write_atomic


def roll_back(
    state_root: str,
    runtime: str,
    targets: list[dict[str, Any]],
    renames: list[dict[str, str]],
    created: list[str],
) -> None:
    """Undo a pending unit: files and their temps, the folders it made (some lie in
    a moved folder), then the moves."""
    _restore(state_root, runtime, targets, created)
    _remove_created(state_root, created)
    _move_back(state_root, renames)


def _restore(
    state_root: str, runtime: str, targets: list[dict[str, Any]], created: list[str]
) -> None:
    """Put back every target this unit wrote (its copy, or nothing if it was new) and
    sweep the temps a write killed before its rename left beside it. Folders are
    left for ``_remove_created``."""
    for target in targets:
        path = target["path"]
        _sweep_temps(state_root, path, target["expected"], created)
        if registry.file_digest(state_root, path) != target["expected"]:
            continue  # never written by this unit (or already restored)
        if target["previous"] is None:
            remove_confined(state_root, path)
            continue
        copy = registry.read_bytes(runtime, target["copy"])
        if copy is not None and canon.digest_bytes(copy) == target["previous"]:
            write_atomic(state_root, path, copy)


def _sweep_temps(state_root: str, path: str, expected: str, created: list[str]) -> None:
    """Delete the kernel temps beside ``path`` that this unit owns: all of them in a
    folder it made, else those holding its new bytes (digest ``expected``), and any no
    live writer holds (a write killed before its rename)."""
    folders = path.split("/")[:-1]
    made = "/".join(folders) in created
    folder_fd = open_folders(state_root, folders, create=False)
    if folder_fd is None:
        return
    try:
        swept = False
        for name in os.listdir(folder_fd):
            if not TEMP_NAME.fullmatch(name) or file_type(folder_fd, name) != stat.S_IFREG:
                continue
            if made or digest_at(folder_fd, name) == expected:
                os.unlink(name, dir_fd=folder_fd)
                swept = True
            elif abandoned(folder_fd, name, remove=True):
                swept = True  # a write killed before its rename (a partial temp)
        if swept:
            os.fsync(folder_fd)
    finally:
        os.close(folder_fd)


def _remove_created(state_root: str, created: list[str]) -> None:
    """Remove the folders the intent recorded as made by it, deepest first, when
    empty; a folder something else has filled since stays, and so does the parent of
    a moved folder until ``_move_back`` empties it."""
    for folder in sorted(created, key=lambda name: name.count("/"), reverse=True):
        try:
            os.rmdir(os.path.join(state_root, folder))
        except OSError:
            continue


def _move_back(state_root: str, renames: list[dict[str, str]]) -> None:
    """Undo the moves a unit made (those it did not make are left alone)."""
    for move in reversed(renames):
        if rename_folder(state_root, move["target"], move["source"]):
            _prune_empty_folders(state_root, move["target"])


def _prune_empty_folders(state_root: str, path: str) -> None:
    """Remove the folders a folder moved back leaves empty, from its old parent up."""
    parts = path.split("/")[:-1]
    while parts:
        try:
            os.rmdir(os.path.join(state_root, *parts))
        except OSError:
            return
        parts.pop()
