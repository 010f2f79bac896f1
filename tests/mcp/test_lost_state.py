"""``ithaca mcp`` in a project whose state is lost: each tool refuses with the code the
hooks and ``ithaca status`` give and the commands that restore it, instead of
``NOT_INITIALISED``, and nothing sets the project up again on the agent's behalf."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from jsonschema import Draft202012Validator
from tests.lost_states import garbage, with_backup
from tests.mcp.conftest import ToolClient, text_of
from tests.mcp.test_no_project import CALLS, INITIALIZE

from ithaca import init_project


def refusal(client: ToolClient, tool: str, arguments: dict[str, object]) -> dict[str, object]:
    result = client.call(tool, arguments)
    assert result.is_error, (tool, result.structured_content)
    refused: dict[str, object] = json.loads(text_of(result))
    schema = client.tools()[tool].output_schema
    assert schema is not None
    assert not list(Draft202012Validator(schema).iter_errors(refused)), tool
    return refused


def test_every_tool_says_the_state_folder_is_gone_and_nothing_remakes_it(
    project_dir: Path, connect: Callable[[Path], ToolClient]
):
    shutil.rmtree(project_dir / ".ithaca")
    client = connect(project_dir)

    for tool, arguments in {**CALLS, "record": INITIALIZE}.items():
        refused = refusal(client, tool, arguments)
        assert refused["code"] == "STATE_MISSING", (tool, refused)
        assert "`.ithaca/` is gone" in str(refused["message"])
        assert "`ithaca init`" in str(refused["message"])
    assert not (project_dir / ".ithaca").exists()

    init_project(project_dir)[0].close()  # the user restores it
    assert client.ok("context", {})["id"].startswith("ctx-")


def test_a_database_that_cannot_be_read_is_named_with_its_backup(
    project_dir: Path, connect: Callable[[Path], ToolClient]
):
    garbage(with_backup(project_dir))

    refused = refusal(connect(project_dir), "context", {})

    assert refused["code"] == "STATE_UNREADABLE"
    assert "`ithaca doctor restore state-" in str(refused["message"])
