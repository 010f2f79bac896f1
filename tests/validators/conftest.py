"""Fixtures the validator tests share: short clocks, a project with its notebook service,
a runtime that measures the same everywhere, and waits for processes to end."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject, init_project
from ithaca.kernel.config import defaults
from ithaca.validators import runtimes
from ithaca.validators.notebooks import NotebookService


@pytest.fixture
def settings() -> dict[str, Any]:
    """``validators`` settings with a wall clock and grace short enough for timeout tests."""
    values: dict[str, Any] = defaults()["validators"]
    values.update(timeout_s=2, grace_s=0.2)
    return values


@pytest.fixture
def project(tmp_path: Path) -> Iterator[IthacaProject]:
    opened, _ = init_project(tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def notebooks(project: IthacaProject) -> NotebookService:
    return NotebookService(project.project, project.store, project.config)


@pytest.fixture
def fixed_runtime(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every language measures as this runtime, so snapshots do not depend on the machine."""
    runtime = {"name": "cpython", "version": "3.12.4"}
    monkeypatch.setattr(runtimes, "measure", lambda language, settings: dict(runtime))
    return runtime


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """True once ``pid`` has ended (a zombie counts as ended), waiting at most ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rpartition(")")[2].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def gone() -> Callable[..., bool]:
    return _gone


def _left_running(token: str, within_s: float = 10.0) -> list[int]:
    """The processes whose command line still holds ``token`` after waiting at most
    ``within_s`` for them to end (a zombie has none, so it counts as ended).

    A confined validator sees only its own PID namespace, so it cannot name its processes
    as this side sees them; what it can name is its run folder, which every process of the
    run holds on its command line (bubblewrap's binding, the runtime's entrypoint)."""
    wanted = token.encode()
    deadline = time.monotonic() + within_s
    while True:
        holding = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if wanted in handle.read():
                        holding.append(int(name))
            except OSError:
                continue
        if not holding or time.monotonic() >= deadline:
            return holding
        time.sleep(0.05)


@pytest.fixture
def left_running() -> Callable[..., list[int]]:
    return _left_running
