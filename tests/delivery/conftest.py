"""Fixtures for delivery: an initialised project in a fresh Git repository, its delivery
service, and ``record`` helpers that build the request an agent would send."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject, open_project
from ithaca.delivery.service import DeliveryService

Record = Callable[..., dict[str, Any]]

_KEYS = itertools.count(1)


@pytest.fixture
def project(project_dir: Path) -> Iterator[IthacaProject]:
    opened = open_project(project_dir)
    yield opened
    opened.close()


@pytest.fixture
def service(project: IthacaProject) -> DeliveryService:
    return DeliveryService(project.project, project.store, project.config)


@pytest.fixture
def state_root(project: IthacaProject) -> Path:
    return Path(project.project.state_root)


def entry(kind: str, action: str, data: dict[str, Any] | None = None, key: str | None = None):
    return {
        "kind": kind,
        "action": action,
        "data": data or {},
        "idempotency_key": key or f"test-{next(_KEYS)}",
    }


@pytest.fixture
def record(service: DeliveryService) -> Record:
    """``record(kind, action, data, key=None)`` → that entry's result object."""

    def call(kind: str, action: str, data: dict[str, Any] | None = None, key: str | None = None):
        return service.record({"entries": [entry(kind, action, data, key)]})["results"][0]

    return call


@pytest.fixture
def make_entry() -> Callable[..., dict[str, Any]]:
    return entry


def journal_count(project: IthacaProject, kind_prefix: str = "") -> int:
    query = "SELECT count(*) FROM journal WHERE kind LIKE ?"
    return int(project.store.connection().execute(query, (kind_prefix + "%",)).fetchone()[0])


@pytest.fixture
def count_events(project: IthacaProject) -> Callable[..., int]:
    """``count_events(kind_prefix="")``: how many journal events have a kind so prefixed."""
    return lambda prefix="": journal_count(project, prefix)


def open_change(
    record: Record, change_id: str = "add-login", kind: str = "standard", **data: Any
) -> dict[str, Any]:
    """Open a change with a complete enough contract."""
    body = {
        "id": change_id,
        "kind": kind,
        "title": "Add login",
        "intent": "# Add login\n\nUsers sign in with email.\n",
        **data,
    }
    return record("change_contract", "open", body)


@pytest.fixture
def opened_change(record: Record) -> dict[str, Any]:
    return open_change(record)


@pytest.fixture
def new_change(record: Record) -> Callable[..., dict[str, Any]]:
    return lambda change_id="add-login", kind="standard", **data: open_change(
        record, change_id, kind, **data
    )


@pytest.fixture
def define_task(record: Record, new_change: Callable[..., Any]) -> Callable[..., str]:
    """``define_task(argv=...)``: open change add-login and define its task T-1 (one file,
    the given verification command); returns the task id."""

    def define(argv: tuple[str, ...] = ("pytest", "-q")) -> str:
        new_change()
        record(
            "task_contract",
            "define",
            {
                "id": "T-1",
                "change_id": "add-login",
                "title": "Add login form",
                "verification": {"argv": list(argv)},
                "files_modified": ["src/app.py"],
            },
        )
        return "T-1"

    return define
