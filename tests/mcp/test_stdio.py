"""``ithaca mcp``: the installed console script over real stdio, driven by the SDK's stdio
client, and the command's behaviour around it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from ithaca.app import IthacaProject
from ithaca.cli.entry import cli

CONSOLE_SCRIPT = Path(sys.executable).parent / "ithaca"


def test_the_installed_console_script_serves_load_protocols_over_stdio(
    project_dir: Path, project: IthacaProject, event: dict[str, Any]
):
    server = StdioServerParameters(
        command=str(CONSOLE_SCRIPT),
        args=["--project", str(project_dir), "mcp"],
        env=dict(os.environ),
    )

    async def session() -> tuple[set[str], Any]:
        with anyio.fail_after(120):
            async with Client(server, read_timeout_seconds=60) as client:
                listing = await client.list_tools()
                result = await client.call_tool("load_protocols", {"eventId": event["id"]})
        return {tool.name for tool in listing.tools}, result

    names, result = anyio.run(session)

    assert {"load_protocols", "protocols", "ulysses", "record", "context"} <= names
    assert not result.is_error, result.content
    bundle = result.structured_content
    assert bundle["digest"] == project.protocols.compute_bundle(event["id"])["digest"]
    loaded = (
        project.store.connection()
        .execute("SELECT loaded_digest FROM protocol_sessions WHERE host_session_id = 's1'")
        .fetchone()[0]
    )
    assert loaded == bundle["digest"]


def test_ithaca_mcp_outside_a_project_starts_and_writes_nothing(tmp_path):
    """A host plugin starts the server everywhere: without a project it still serves (and
    stops at the end of its input), and creates no state (``tests/mcp/test_no_project.py``
    has what it answers)."""
    result = CliRunner().invoke(cli, ["--project", str(tmp_path), "mcp"], input="")

    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert not (tmp_path / ".ithaca").exists()


def test_the_cli_loads_the_mcp_sdk_only_for_ithaca_mcp():
    probe = (
        "import sys, ithaca.cli.entry; print(any(m.split('.')[0] == 'mcp' for m in sys.modules))"
    )

    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout

    assert loaded.strip() == "False"
