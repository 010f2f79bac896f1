"""Every one of Ithaca's MCP tools, called by the model through each real host with Ithaca's
hooks active: each reaches its service with the caller's session bound, and the user's
own rules still decide whether a tool runs (Claude Code's permission rules; Codex asks
before ``archive``, the one tool published as destructive)."""

from __future__ import annotations

import json
from typing import Any

from tests.hosts_real.claude_host import DEFAULT_ALLOW, ClaudeHost
from tests.hosts_real.codex_host import CodexHost
from tests.hosts_real.host import ITHACA_TOOLS, Host
from tests.hosts_real.scripted import Script
from tests.mcp.test_record_tool import DECISION as RECORDED

DECISION = {**RECORDED, "idempotency_key": "dec-real-host"}

# One call per tool, each one a service answers; (tool, arguments).
CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("protocols", {"operation": "list"}),
    ("ultragoal", {"operation": "status"}),
    ("context", {}),
    ("record", {"entries": [DECISION]}),
    ("checkpoint", {"stage": "research", "operation": "draft", "idempotency_key": "cp-1"}),
    ("archive", {"change_id": "no-such-change", "payload": {}, "idempotency_key": "ar-1"}),
    ("sync", {"action": "inspect"}),
    ("session", {"operation": "admission", "task_id": "no-such-task"}),
    ("doctor", {"operation": "inspect"}),
    ("notebook", {"operation": "list"}),
    ("verify", {}),
    ("ulysses", {"operation": "status"}),
    ("knowledge", {"operation": "search", "query": "database"}),
)


def test_every_ithaca_tool_works_under_the_hooks(host: Host):
    assert {tool for tool, _ in CALLS} | {"load_protocols"} == set(ITHACA_TOOLS)
    if isinstance(host, CodexHost):
        approve_archive(host)  # as a user who lets the agent archive unasked would
    run = host.run(
        "Use every Ithaca tool once",
        Script(main=[*host.protocols_loaded(), *(host.tool(t, a) for t, a in CALLS)]),
    )
    assert run.exit_code == 0, run.stderr
    answers = {tool: run.call(f"ithaca:{tool}").answer() for tool in ITHACA_TOOLS}
    # Checkpoint and archive need a change in flight, verify a project with tests: their
    # own checks answer, which shows the call reached the service with nothing of the
    # hook's in the way.
    refused = {tool: answer["code"] for tool, answer in answers.items() if "code" in answer}
    assert refused == {
        "checkpoint": "VALIDATION_ERROR",
        "archive": "VALIDATION_ERROR",
        "verify": "VERIFY_NO_RUNNER",
    }, answers
    assert "/payload" in json.dumps(answers["checkpoint"]) + json.dumps(answers["archive"])
    log = host.log()
    assert [event["kind"] for event in log].count("protocols.bundle_loaded") == 1
    assert any(event["kind"] == "delivery.decision_accepted" for event in log)
    # Each call found the ticket its PreToolUse hook left, by the host's call id.
    tickets = (
        host.state().execute("SELECT tool, claimed_at IS NOT NULL FROM mcp_call_tickets").fetchall()
    )
    assert sorted(tickets) == sorted((tool, 1) for tool in ITHACA_TOOLS)
    assert "mcp.call_unhooked" not in {event["kind"] for event in log}


def test_the_users_permission_rules_still_decide_ithacas_mutating_tools(claude: ClaudeHost):
    """The hook never answers ``allow`` for Ithaca's tools: a tool the user did not allow
    is refused by Claude Code itself (headless, nobody can be asked)."""
    allowed = tuple(rule for rule in DEFAULT_ALLOW if rule != "mcp__ithaca")
    claude.user_settings(allow=(*allowed, "mcp__ithaca__load_protocols"))
    run = claude.run(
        "Record a decision",
        Script(main=[*claude.protocols_loaded(), claude.tool("record", {"entries": [DECISION]})]),
    )
    assert not run.call("ithaca:load_protocols").is_error
    refused = run.call("ithaca:record")
    assert refused.is_error and "permission" in refused.text.lower(), refused
    assert not list((claude.repo / ".ithaca" / "decisions").rglob("*.json"))


def test_codex_asks_the_user_before_the_agent_archives_a_change(codex: CodexHost):
    """``archive`` is published as destructive, so Codex wants the user's approval for it;
    headless (approval policy ``never``) nobody can give it, and Codex refuses the call
    itself. The other tools are closed-world and not destructive: they run unasked."""
    run = codex.run(
        "Archive the change",
        Script(main=[*codex.protocols_loaded(), codex.tool("archive", dict(CALLS[5][1]))]),
    )
    refused = run.call("ithaca:archive")
    assert "requires approval" in refused.text, refused
    tickets = codex.state().execute(
        "SELECT tool FROM mcp_call_tickets WHERE claimed_at IS NOT NULL"
    )
    assert [tool for (tool,) in tickets] == ["load_protocols"]  # the server never saw it


def approve_archive(codex: CodexHost) -> None:
    """The project's Codex config with ``archive`` approved ahead (Codex's per-tool
    ``approval_mode``), under the MCP server table ``ithaca install codex`` wrote."""
    config = codex.repo / ".codex" / "config.toml"
    config.write_text(
        config.read_text() + '\n[mcp_servers.ithaca.tools.archive]\napproval_mode = "approve"\n'
    )
