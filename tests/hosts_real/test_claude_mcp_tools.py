"""Every one of Ithaca's MCP tools, called by the model through the real Claude Code with
Ithaca's hooks active: each reaches its service with the caller's session bound, and the
user's own permission rules still decide whether a tool runs."""

from __future__ import annotations

import json

from tests.hosts_real.claude_host import (
    DEFAULT_ALLOW,
    ITHACA_TOOLS,
    ClaudeHost,
    ithaca,
    load_ithaca_tools,
    load_protocols,
)
from tests.hosts_real.scripted import Script

DECISION = {
    "kind": "decision",
    "action": "accept",
    "idempotency_key": "dec-real-host",
    "data": {
        "scope": {"baseline": True},
        "question": "Which database?",
        "recommendation": "SQLite: one file, no server.",
        "selection": {"choice": "sqlite", "rationale": "single-user tool"},
        "owner": "team",
    },
}

# One call per tool, each one a service answers; (tool, arguments).
CALLS = (
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
    ("ulysses", {"operation": "status"}),
    ("knowledge", {"operation": "search", "query": "database"}),
)


def _code(text: str) -> str | None:
    """The error code of a refused call's text (Claude Code appends notes after it)."""
    return json.loads(text.split("\n\n")[0]).get("code")


def test_every_ithaca_tool_works_under_the_hooks(claude: ClaudeHost):
    assert {tool for tool, _ in CALLS} | {"load_protocols"} == set(ITHACA_TOOLS)
    run = claude.run(
        "Use every Ithaca tool once",
        Script(main=[load_ithaca_tools(), load_protocols, *(ithaca(t, a) for t, a in CALLS)]),
    )
    assert run.exit_code == 0, run.stderr
    answers = {tool: run.result_of(f"mcp__ithaca__{tool}") for tool in ITHACA_TOOLS}
    # Checkpoint and archive need a change in flight: their own checks answer, which shows
    # the call reached the service with nothing of the hook's in the way.
    refused = {tool for tool, (is_error, _) in answers.items() if is_error}
    assert refused == {"checkpoint", "archive"}, answers
    assert _code(answers["checkpoint"][1]) == _code(answers["archive"][1]) == "VALIDATION_ERROR"
    assert "/payload" in answers["checkpoint"][1] and "/payload" in answers["archive"][1]
    log = json.loads(claude.ithaca_cli("log", "--json").stdout)
    assert [event["kind"] for event in log].count("protocols.bundle_loaded") == 1
    assert any(event["kind"] == "delivery.decision_accepted" for event in log)
    # Each call found the ticket its PreToolUse hook left, by Claude Code's tool-use id.
    tickets = (
        claude.state()
        .execute("SELECT tool, host_session_id, claimed_at IS NOT NULL FROM mcp_call_tickets")
        .fetchall()
    )
    assert sorted(tickets) == sorted((tool, run.session_id, 1) for tool in ITHACA_TOOLS)


def test_the_users_permission_rules_still_decide_ithacas_mutating_tools(claude: ClaudeHost):
    """The hook never answers ``allow`` for Ithaca's tools: a tool the user did not allow
    is refused by Claude Code itself (headless, nobody can be asked)."""
    allowed = tuple(rule for rule in DEFAULT_ALLOW if rule != "mcp__ithaca")
    claude.user_settings(allow=(*allowed, "mcp__ithaca__load_protocols"))
    run = claude.run(
        "Record a decision",
        Script(
            main=[load_ithaca_tools(), load_protocols, ithaca("record", {"entries": [DECISION]})]
        ),
    )
    assert not run.result_of("mcp__ithaca__load_protocols")[0]
    is_error, text = run.result_of("mcp__ithaca__record")
    assert is_error and "permission" in text.lower(), text
    assert not list((claude.repo / ".ithaca" / "decisions").rglob("*.json"))
