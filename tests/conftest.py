"""Shared fixtures: a hermetic environment for every test and an initialised project."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ithaca.kernel.authority import AGENT_ENVIRONMENT


@pytest.fixture(autouse=True)
def hermetic_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """User settings in a temporary home, and no coding-agent or state-root variables."""
    monkeypatch.setenv("ITHACA_HOME", str(tmp_path_factory.mktemp("ithaca-home")))
    for name in (*AGENT_ENVIRONMENT, "ITHACA_DIR", "ITHACA_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A fresh Git repository with ``ithaca init`` applied."""
    from ithaca import init_project

    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    project, _ = init_project(root)
    project.close()
    return root
