"""Fixtures for the real-host suite: a scripted model and a host wired into a scratch repo."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hosts_real.claude_host import ClaudeHost, ClaudePluginHost
from tests.hosts_real.codex_host import CodexHost
from tests.hosts_real.host import Host
from tests.hosts_real.messages_api import MessagesWire
from tests.hosts_real.responses_api import ResponsesWire
from tests.hosts_real.scripted import ScriptedModel

ITHACA = Path(sys.executable).parent / "ithaca"
HOSTS = {"claude": (ClaudeHost, MessagesWire), "codex": (CodexHost, ResponsesWire)}
# Claude Code with Ithaca as its plugin: its own fixture, not one more ``host``.
PLUGIN_HOST = (ClaudePluginHost, MessagesWire)


def _installed(name: str, root: Path) -> Iterator[Host]:
    kind, wire = PLUGIN_HOST if name == "claude-plugin" else HOSTS[name]
    with ScriptedModel(wire()) as model:
        host = kind(root, model, ITHACA)
        try:
            host.install()
            yield host
        finally:
            host.close()


@pytest.fixture(params=sorted(HOSTS))
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Host]:
    """Each real host in turn, in a scratch home, with Ithaca installed in its repository."""
    yield from _installed(request.param, tmp_path)


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[ClaudeHost]:
    """Claude Code alone, for what only Claude Code has (subagents, permission rules)."""
    for host in _installed("claude", tmp_path):
        assert isinstance(host, ClaudeHost)
        yield host


@pytest.fixture
def codex(tmp_path: Path) -> Iterator[CodexHost]:
    """Codex alone, for what only Codex has (the trust in the user's config)."""
    for host in _installed("codex", tmp_path):
        assert isinstance(host, CodexHost)
        yield host


@pytest.fixture
def plugin_host(tmp_path: Path) -> Iterator[ClaudePluginHost]:
    """Claude Code with the Ithaca plugin from this repository's marketplace, and no
    ``ithaca install claude`` in the repository."""
    for host in _installed("claude-plugin", tmp_path):
        assert isinstance(host, ClaudePluginHost)
        yield host
