"""The ``verify`` MCP tool: the agent's way to a verification Ithaca ran itself, over the
real server; its own arguments can choose nothing but a fresh run."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.calc_project import lay_calc


@pytest.fixture
def calc(project_dir: Path) -> Path:
    return lay_calc(project_dir)


def test_the_verify_tool_runs_for_the_agent_and_refuses_bad_input(calc, client):
    assert "verify" in client.tools()
    answer = client.ok("verify", {})

    assert answer["status"] == "passed" and answer["counts"]["passed"] == 2
    assert answer["verifies_turn"] is True and answer["problems"] is None
    assert client.ok("verify", {})["reused"]
    assert client.refused("verify", {"fresh": "yes"})["code"] == "INVALID_INPUT"
    assert client.refused("verify", {"command": "true"})["code"] == "INVALID_INPUT"
    assert not client.ok("verify", {"fresh": True})["reused"]
