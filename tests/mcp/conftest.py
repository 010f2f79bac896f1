"""Fixtures for the MCP server tests: the project beside the server, and in-memory clients.

``project_dir`` and the hermetic environment come from ``tests/conftest.py``. The SDK
client is asynchronous; a blocking portal runs it on its own event loop so the
tests (Hypothesis included) stay synchronous and one client serves many calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client import Client
from mcp.types import CallToolResult, TextContent

from ithaca.app import IthacaProject, open_project
from ithaca.mcp.server import build_server


class ToolClient:
    """A connected in-memory client with synchronous calls."""

    def __init__(self, portal: BlockingPortal, client: Client):
        self.portal = portal
        self.client = client

    def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        result: CallToolResult = self.portal.call(self.client.call_tool, tool, arguments)
        return result

    def ok(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The structured answer of a call that must succeed."""
        result = self.call(tool, arguments)
        assert not result.is_error, result.content
        structured: dict[str, Any] = result.structured_content
        assert json.loads(text_of(result)) == structured
        return structured

    def refused(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The ``{code, message, details}`` of a call that must fail."""
        result = self.call(tool, arguments)
        assert result.is_error, result.structured_content
        refusal: dict[str, Any] = json.loads(text_of(result))
        return refusal

    def tools(self) -> dict[str, Any]:
        listing = self.portal.call(self.client.list_tools)
        return {tool.name: tool for tool in listing.tools}

    @property
    def server_name(self) -> str:
        info = self.client.server_info
        assert info is not None
        return info.name


def text_of(result: CallToolResult) -> str:
    """The text of a result's first content block (the server answers in JSON text)."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


@pytest.fixture
def project(project_dir: Path) -> Iterator[IthacaProject]:
    """The test's own handle on the project, beside the server's."""
    opened = open_project(project_dir)
    yield opened
    opened.close()


@pytest.fixture
def event(project: IthacaProject) -> dict[str, Any]:
    """An event admitted for host session ``s1`` in the coding workflow."""
    return project.protocols.admit_event(connector="test", workflow="coding", host_session_id="s1")


@pytest.fixture
def connect() -> Iterator[Callable[[Path], ToolClient]]:
    """Build a server for a project folder and connect a new in-memory client to it."""
    with ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal())

        def connected(folder: Path) -> ToolClient:
            client = Client(build_server(str(folder)), read_timeout_seconds=60)
            return ToolClient(
                portal, stack.enter_context(portal.wrap_async_context_manager(client))
            )

        yield connected


@pytest.fixture
def client(connect: Callable[[Path], ToolClient], project_dir: Path) -> ToolClient:
    return connect(project_dir)


@pytest.fixture
def journal_length(project: IthacaProject) -> Callable[[], int]:
    def length() -> int:
        count: int = (
            project.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0]
        )
        return count

    return length
