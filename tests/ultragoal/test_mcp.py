"""The ``ultragoal`` tool through the MCP SDK's in-memory client, as an agent calls it.

The server here carries only this tool, built the way Ithaca's server builds its tools
(``ithaca.mcp.server._tool`` over ``UltragoalService.dispatch``), so the test does not
depend on the tool being wired into ``build_server`` yet.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client import Client
from mcp.server.mcpserver import MCPServer

from ithaca.mcp.server import _dispatch, _tool
from ithaca.ultragoal.tool import ULTRAGOAL_DESCRIPTION, ULTRAGOAL_SCHEMA, ULTRAGOAL_TITLE


class Agent:
    def __init__(self, portal: Any, client: Client):
        self.portal = portal
        self.client = client

    def result(self, operation: str, **fields: Any) -> Any:
        arguments = {"operation": operation, "session": "sess-a", **fields}
        return self.portal.call(self.client.call_tool, "ultragoal", arguments)

    def ok(self, operation: str, **fields: Any) -> dict[str, Any]:
        result = self.result(operation, **fields)
        assert not result.is_error, result.content
        return dict(result.structured_content)

    def refused(self, operation: str, **fields: Any) -> dict[str, Any]:
        result = self.result(operation, **fields)
        assert result.is_error
        return dict(json.loads(result.content[0].text))


@pytest.fixture
def agent(ug: Any) -> Iterator[Agent]:
    tool = _tool(
        "ultragoal",
        title=ULTRAGOAL_TITLE,
        description=ULTRAGOAL_DESCRIPTION,
        schema=ULTRAGOAL_SCHEMA,
        read_only=False,
        handler=partial(_dispatch, ug.service),
    )
    server = MCPServer("ithaca-test", tools=[tool])
    with start_blocking_portal() as portal:
        client = Client(server, read_timeout_seconds=60)
        with portal.wrap_async_context_manager(client) as connected:
            yield Agent(portal, connected)


def test_the_seed_sequence_reaches_complete_over_mcp(ug: Any, agent: Agent) -> None:
    agent.ok("set", phase="planning", outcome=ug.OUTCOME, verification_surface=ug.SURFACE)
    agent.ok("set_stories", stories=[ug.STORY_A, ug.STORY_B])
    agent.ok("confirm_all_stories")
    agent.ok("set", phase="pursuing", completion_evidence=[ug.write("evidence/final.txt")])
    for story in ("A", "B"):
        agent.ok(
            "record_story_verdict",
            id=story,
            verdict="APPROVE",
            evidence_refs=[ug.write(f"evidence/{story}.txt")],
            verifier="self-check",
        )
    nonce = ug.claim()["nonce"]
    assert agent.ok("submit_review", nonce=nonce, artifact=ug.artifact())["verdict"] == "APPROVE"
    agent.ok("set_verdict", verdict="APPROVE")
    assert agent.ok("request_complete")["phase"] == "complete"
    assert agent.ok("get") == {"state": None}


def test_refusals_and_the_users_levers_carry_their_codes(agent: Agent) -> None:
    assert agent.refused("set", phase="done")["code"] == "PHASE_NOT_SETTABLE"
    unknown = agent.refused("set", phase="planning", colour="red")
    assert (unknown["code"], unknown["details"]["problem"]) == ("INVALID_INPUT", "UNKNOWN_FIELD")
    lever = agent.refused("resume_pursuit")
    assert lever["code"] == "AUTHORITY_USER_ONLY"
    assert "ithaca ultragoal resume-pursuit" in lever["message"]
    assert agent.refused("claim_review_dispatch")["code"] == "AUTHORITY_HOOK_ONLY"
