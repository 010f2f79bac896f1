"""Fixtures for the real-host suite: a scripted model and a host wired into a scratch repo."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hosts_real.claude_host import ClaudeHost, make_claude_host
from tests.hosts_real.codex_host import CodexHost, make_codex_host

ITHACA = Path(sys.executable).parent / "ithaca"


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[ClaudeHost]:
    """Claude Code in a scratch home, with Ithaca installed in its repository."""
    host, model = make_claude_host(tmp_path, ITHACA)
    with model:
        host.install()
        yield host


@pytest.fixture
def codex(tmp_path: Path) -> Iterator[CodexHost]:
    """Codex in a scratch CODEX_HOME, with Ithaca installed (and trusted) in its repo."""
    host, model = make_codex_host(tmp_path, ITHACA)
    with model:
        host.install()
        yield host
