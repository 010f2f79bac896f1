"""Fixtures for ``ithaca import``: the peer sources under ``fixtures/`` (written the way
each tool writes them), a copy of one to edit, the import call, and a snapshot of
everything an import could change (the database and the files under ``.ithaca/``)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService

FIXTURES = Path(__file__).parent / "fixtures"
# The fixture folder of each format, as a user would point at it: the project folder.
SOURCES = {
    "taskmaster": FIXTURES / "taskmaster",
    "openspec": FIXTURES / "openspec",
    "speckit": FIXTURES / "speckit",
    "ultra": FIXTURES / "ultra",
}

Import = Callable[..., dict[str, Any]]


def copy_source(name: str, where: Path) -> Path:
    """A copy of a fixture source that a test may edit."""
    target = where / f"peer-{name}"
    shutil.copytree(SOURCES[name], target)
    return target


def snapshot(project: IthacaProject) -> tuple[list[str], dict[str, str]]:
    """Every row of the database and every file under ``.ithaca/`` (by digest)."""
    rows = list(project.store.connection().iterdump())
    files = {}
    root = Path(project.project.state_root)
    for here, dirs, names in os.walk(root):
        dirs[:] = [name for name in dirs if name != ".runtime"]
        for name in names:
            path = Path(here, name)
            files[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return rows, files


@pytest.fixture
def run_import(service: DeliveryService) -> Import:
    """``run_import(source, **options)``: the service call the CLI makes."""

    def call(source: Path | str, **options: Any) -> dict[str, Any]:
        return service.import_peer({"source": str(source), **options})

    return call


def task_of(service: DeliveryService, task_id: str) -> dict[str, Any]:
    """The task as ``context`` shows it (status, contract, deps with their status)."""
    found: dict[str, Any] = service.context({"scope": {"task_id": task_id}, "detail": "full"})[
        "task"
    ]
    return found


def change_of(service: DeliveryService, change_id: str) -> dict[str, Any]:
    found: dict[str, Any] = service.context({"scope": {"change_id": change_id}, "detail": "full"})[
        "change"
    ]
    return found


def listed(answer: dict[str, Any], kind: str = "tasks") -> dict[str, dict[str, Any]]:
    """The answer's items of ``kind`` by Ithaca id, inside changes and outside them."""
    found = {item["id"]: item for item in answer["outside_changes"].get(kind, [])}
    for change in answer["changes"]:
        found.update({item["id"]: item for item in change[kind]})
    return found


def task_ids(project: IthacaProject) -> set[str]:
    rows = project.store.connection().execute("SELECT id FROM delivery_tasks").fetchall()
    return {row[0] for row in rows}
