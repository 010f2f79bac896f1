"""The ``ultragoal`` tool through the MCP SDK's in-memory client, as an agent calls it.

The server is Ithaca's own (``build_server`` over the test's project), so these tests
also prove the tool is offered there and that its schema leaves the user's levers out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client import Client

from ithaca.mcp.server import build_server

# The user's levers and the hook's claim: an agent is never offered them.
NOT_FOR_AGENTS = {
    "resume_pursuit",
    "set_budget_limited",
    "approve_review_dispatch_renewal",
    "dismiss_review_finding",
    "claim_review_dispatch",
}


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

    def tools(self) -> dict[str, Any]:
        listing = self.portal.call(self.client.list_tools)
        return {tool.name: tool for tool in listing.tools}


@pytest.fixture
def agent(opened: Any, project_dir: Path) -> Iterator[Agent]:
    """A client of Ithaca's server for the already initialised project."""
    with start_blocking_portal() as portal:
        client = Client(build_server(str(project_dir)), read_timeout_seconds=60)
        with portal.wrap_async_context_manager(client) as connected:
            yield Agent(portal, connected)


def test_the_server_offers_ultragoal_without_the_users_levers(agent: Agent) -> None:
    tools = agent.tools()
    assert "ultragoal" in tools
    offered = set(tools["ultragoal"].input_schema["properties"]["operation"]["enum"])
    assert {"set", "get", "submit_review", "request_complete"} <= offered
    assert not offered & NOT_FOR_AGENTS


def test_the_agent_cannot_confirm_its_own_stories_over_mcp(ug: Any, agent: Agent) -> None:
    agent.ok("set", phase="planning", outcome=ug.OUTCOME, verification_surface=ug.SURFACE)
    agent.ok("set_stories", stories=ug.measured(ug.STORY_A))
    for operation, fields in (("confirm_all_stories", {}), ("confirm_story", {"id": "A"})):
        refusal = agent.refused(operation, **fields)
        assert refusal["code"] == "AUTHORITY_USER_ONLY"
        assert "strict approval is on" in refusal["message"]
    assert [s["status"] for s in ug.call("get")["state"]["stories"]] == ["unconfirmed"]


def test_the_seed_sequence_reaches_complete_over_mcp(ug: Any, agent: Agent) -> None:
    agent.ok("set", phase="planning", outcome=ug.OUTCOME, verification_surface=ug.SURFACE)
    agent.ok("set_stories", stories=ug.measured(ug.STORY_A, ug.STORY_B))
    ug.as_user("confirm_all_stories")
    agent.ok("set", phase="pursuing", completion_evidence=[ug.write("evidence/final.txt")])
    for story in ("A", "B"):
        agent.ok("run_story_validator", id=story, observed={"ok": True})
        agent.ok(
            "record_story_verdict",
            id=story,
            verdict="APPROVE",
            evidence_refs=[ug.write(f"evidence/{story}.txt")],
            verifier="self-check",
        )
    nonce = ug.claim()["nonce"]
    ug.seen(ug.artifact())  # the hook saw the reviewer subagent submit it
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
