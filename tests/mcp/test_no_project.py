"""``ithaca mcp`` where there is no project yet: a host plugin starts the server in every
repository, and in folders outside any. It lists its tools and answers every call with
``NOT_INITIALISED`` and the step that fixes it, as a tool error; ``record`` with a first
``baseline initialize`` entry sets a repository up (delivery reference §6.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from jsonschema import Draft202012Validator
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import Implementation
from tests.mcp.conftest import ToolClient, text_of

from ithaca import init_project
from ithaca.mcp.server import build_server

CONSOLE_SCRIPT = Path(sys.executable).parent / "ithaca"

# One call per tool, each one it would answer in a project.
CALLS: dict[str, dict[str, Any]] = {
    "load_protocols": {"eventId": "evt_" + "0" * 26},
    "protocols": {"operation": "list"},
    "notebook": {"operation": "list"},
    "verify": {},
    "ulysses": {"operation": "status", "session": "s1"},
    "knowledge": {"operation": "search", "query": "importer"},
    "context": {},
    "record": {
        "entries": [
            {"kind": "event", "action": "append", "idempotency_key": "e1", "data": {}},
        ]
    },
    "checkpoint": {"stage": "research", "operation": "draft", "idempotency_key": "cp-1"},
    "archive": {"change_id": "a-change", "payload": {}, "idempotency_key": "ar-1"},
    "sync": {"action": "inspect"},
    "session": {"operation": "admission", "task_id": "T-1"},
    "doctor": {"operation": "inspect"},
    "ultragoal": {"operation": "get", "session": "s1"},
}
INITIALIZE = {
    "entries": [{"kind": "baseline", "action": "initialize", "idempotency_key": "b1", "data": {}}]
}


@pytest.fixture
def bare_repo(tmp_path: Path) -> Path:
    """A Git repository in which ``ithaca init`` was never run."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def no_repo(tmp_path: Path) -> Path:
    """A folder in no Git repository (the tests' temporary folders are in none)."""
    folder = tmp_path / "loose"
    folder.mkdir()
    assert not any((parent / ".git").exists() for parent in (folder, *folder.parents))
    return folder


def assert_not_initialised(client: ToolClient, tool: str, arguments: dict[str, Any]) -> None:
    result = client.call(tool, arguments)
    assert result.is_error, (tool, result.structured_content)
    refusal = json.loads(text_of(result))
    assert refusal == result.structured_content
    assert refusal["code"] == "NOT_INITIALISED", (tool, refusal)
    assert "`ithaca init`" in refusal["message"], refusal
    assert "Traceback" not in refusal["message"]
    schema = client.tools()[tool].output_schema
    assert schema is not None
    assert not list(Draft202012Validator(schema).iter_errors(refusal)), tool


@pytest.mark.parametrize("folder", ["bare_repo", "no_repo"])
def test_without_a_project_the_server_lists_every_tool_and_each_call_says_run_ithaca_init(
    folder: str, request: pytest.FixtureRequest, connect: Callable[[Path], ToolClient]
):
    root: Path = request.getfixturevalue(folder)
    client = connect(root)

    assert set(client.tools()) == set(CALLS)
    assert client.server_name == "ithaca"
    for tool, arguments in CALLS.items():
        assert_not_initialised(client, tool, arguments)
    assert not (root / ".ithaca").exists()


def test_the_refusal_says_whether_the_folder_is_in_a_git_repository(
    bare_repo: Path, no_repo: Path, connect: Callable[[Path], ToolClient]
):
    inside = connect(bare_repo).refused("context", {})
    outside = connect(no_repo).refused("context", {})

    assert inside["details"] == {"path": str(bare_repo), "gitRepository": True}
    assert str(bare_repo) in inside["message"]
    assert outside["details"] == {"path": str(no_repo), "gitRepository": False}
    assert "not in a Git repository" in outside["message"]


def test_a_user_named_server_keeps_its_name_without_a_project(
    bare_repo: Path, connect: Callable[[Path], ToolClient]
):
    home = Path(os.environ["ITHACA_HOME"])
    (home / "config.toml").write_text('[protocols]\nmcp_server_name = "governor"\n')

    assert connect(bare_repo).server_name == "governor"


def test_the_tools_work_once_the_user_has_run_ithaca_init(
    bare_repo: Path, connect: Callable[[Path], ToolClient]
):
    client = connect(bare_repo)
    assert_not_initialised(client, "context", {})

    project, _ = init_project(bare_repo)
    project.close()

    assert client.ok("context", {})["id"].startswith("ctx-")


def test_record_baseline_initialize_sets_up_a_repository_and_records_the_baseline(
    bare_repo: Path, connect: Callable[[Path], ToolClient]
):
    client = connect(bare_repo)

    answer = client.ok("record", INITIALIZE)

    assert answer["results"][0]["status"] == "committed"
    assert (bare_repo / ".ithaca").is_dir()
    assert client.ok("context", {})["baseline"] is not None
    assert client.ok("record", INITIALIZE)["results"][0]["status"] == "replayed"


def test_only_baseline_initialize_as_the_first_entry_sets_a_repository_up(
    bare_repo: Path, connect: Callable[[Path], ToolClient]
):
    client = connect(bare_repo)
    later = {"entries": [*CALLS["record"]["entries"], *INITIALIZE["entries"]]}

    assert_not_initialised(client, "record", later)
    assert_not_initialised(client, "checkpoint", {**CALLS["checkpoint"], **INITIALIZE})
    assert not (bare_repo / ".ithaca").exists()


def test_outside_a_git_repository_baseline_initialize_sets_nothing_up(
    no_repo: Path, connect: Callable[[Path], ToolClient]
):
    assert_not_initialised(connect(no_repo), "record", INITIALIZE)
    assert not (no_repo / ".ithaca").exists()


@pytest.mark.parametrize("folder", ["bare_repo", "no_repo"])
def test_the_console_script_serves_over_stdio_without_a_project(
    folder: str, request: pytest.FixtureRequest
):
    root: Path = request.getfixturevalue(folder)
    server = StdioServerParameters(
        command=str(CONSOLE_SCRIPT), args=["--project", str(root), "mcp"], env=dict(os.environ)
    )

    async def session() -> tuple[set[str], Any]:
        with anyio.fail_after(120):
            async with Client(server, read_timeout_seconds=60) as client:
                listing = await client.list_tools()
                result = await client.call_tool("protocols", {"operation": "list"})
        return {tool.name for tool in listing.tools}, result

    names, result = anyio.run(session)

    assert names == set(CALLS)
    assert result.is_error
    assert result.structured_content["code"] == "NOT_INITIALISED"
    assert "`ithaca init`" in result.structured_content["message"]
    assert not (root / ".ithaca").exists()


def test_a_hosts_initialize_call_needs_no_hook_ticket_but_its_next_call_does(
    bare_repo: Path,
):
    """Before ``.ithaca/`` exists no hook can leave a call ticket, so the call that sets the
    project up is not refused ``HOOKS_NOT_RUNNING``; every later one is checked again."""
    claude = Implementation(name="claude-code", version="2")
    with start_blocking_portal() as portal:
        client = Client(build_server(str(bare_repo)), client_info=claude)
        with portal.wrap_async_context_manager(client) as connected:
            set_up = portal.call(connected.call_tool, "record", INITIALIZE)
            refused = portal.call(connected.call_tool, "context", {})

    assert not set_up.is_error, set_up.structured_content
    assert refused.is_error
    assert refused.structured_content["code"] == "HOOKS_NOT_RUNNING"
