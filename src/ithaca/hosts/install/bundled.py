"""Whole files Ithaca ships into a project: its skills and the Ultragoal reviewer agent.

Each host's install places them from the ``ithaca.skills`` package, as they are (Claude
Code's Markdown skill and agent files) or rendered for the host (Codex's agent role, a
TOML file made from the same agent text). The manifest keeps each file's digest under its
kind (``skills``, ``agents``): a file at one of those paths that an earlier install did
not write is the user's and refuses the install before anything is written, and
uninstall removes only files that are still as installed.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any, NamedTuple

from ithaca.hosts.install.files import file_bytes
from ithaca.hosts.install.manifest import file_entry
from ithaca.hosts.install.report import InstallReport
from ithaca.hosts.install.staged import Staged
from ithaca.kernel import Conflict, digest_bytes, resolve_confined

KIND_LABELS = {"skills": "skill", "agents": "agent"}


def as_shipped(data: bytes) -> bytes:
    return data


class Bundled(NamedTuple):
    """One shipped file: the manifest list that records it, its name, where it goes, the
    package resource it comes from, the code refusing a path someone else holds, and how
    the resource becomes the file."""

    kind: str
    name: str
    relpath: str
    resource: tuple[str, ...]
    taken_code: str
    render: Callable[[bytes], bytes] = as_shipped

    @property
    def label(self) -> str:
        return f"{KIND_LABELS[self.kind]} {self.name}"


Planned = list[tuple[Bundled, bytes]]


def plan(
    root: Path, items: tuple[Bundled, ...], previous: dict[str, Any] | None, report: InstallReport
) -> Planned:
    """Each file to install with its bytes, checked before anything is written."""
    ours_before = {
        item["path"]: item["sha256"]
        for kind in KIND_LABELS
        for item in (previous or {}).get(kind, [])
    }
    planned = []
    for item in items:
        data = item.render(files("ithaca.skills").joinpath(*item.resource).read_bytes())
        resolve_confined(root, item.relpath)
        current = file_bytes(root / item.relpath)
        if current == data:
            report.unchanged.append(item.label)
        elif current is None or digest_bytes(current) == ours_before.get(item.relpath):
            report.added.append(item.label)
        else:
            raise Conflict(
                item.taken_code,
                f"{root / item.relpath} exists and was not written by Ithaca; move it away first",
                {"path": str(root / item.relpath)},
            )
        planned.append((item, data))
    return planned


def manifest_lists(planned: Planned) -> dict[str, list[dict[str, str]]]:
    """The manifest's record of the files, one list per kind."""
    return {
        kind: [
            {"path": item.relpath, "sha256": digest_bytes(data)}
            for item, data in planned
            if item.kind == kind
        ]
        for kind in KIND_LABELS
    }


def entries(planned: Planned) -> list[dict[str, Any]]:
    """Their provenance entries (what ``ithaca install --doctor`` checks)."""
    return [file_entry(item.label, item.relpath, data) for item, data in planned]


def stage_writes(staged: Staged, root: Path, planned: Planned) -> None:
    for item, data in planned:
        if file_bytes(root / item.relpath) != data:
            staged.write(root, item.relpath, data)


def take_back(staged: Staged, root: Path, manifest: dict[str, Any], report: InstallReport) -> None:
    """Stage the removal of each listed file still as installed, and of the folders that
    leaves empty."""
    for kind, label in KIND_LABELS.items():
        for item in manifest.get(kind, []):
            relpath = Path(item["path"])
            name = relpath.parent.name if kind == "skills" else relpath.stem
            current = file_bytes(root / relpath)
            if current is None or digest_bytes(current) != item["sha256"]:
                report.unchanged.append(f"{label} {name}")
                continue
            staged.remove(root, item["path"], prune=True)
            report.removed.append(f"{label} {name}")
