"""What tools/list shows an agent: small, titled, honestly hinted, and typed both ways.

The listing is measured through the installed console script over real stdio, as a host
starts it. Every tool's output schema is checked against real answers of that tool,
successes and refusals alike: the structured content of a refusal is its ``{code,
message, details}``, and clients built on the TypeScript SDK 1.x validate that too.
"""

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
from jsonschema import Draft202012Validator
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult
from tests.hosts_real.host import ITHACA_TOOLS
from tests.mcp.conftest import ToolClient

CONSOLE_SCRIPT = Path(sys.executable).parent / "ithaca"

# tools/list as one compact JSON document (UTF-8 bytes): it is read into the agent's
# context on every request. 12 KiB held thirteen tools; ``verify`` (issue 26) takes 600 B.
LISTING_BUDGET = 12800
# The MCP defaults of the hints a tool leaves out.
HINT_DEFAULTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}

# (readOnlyHint, destructiveHint, idempotentHint) per tool; see ithaca.kernel.tools for
# what each hint means here, and each tool record for why it has these.
HINTS = {
    "load_protocols": (False, False, False),  # each load is journaled
    "protocols": (True, False, True),
    "notebook": (False, False, False),  # create / add_cell / update_cell add each time
    "verify": (False, False, True),  # each run is journaled; a run of the same content reused
    "ulysses": (False, False, False),  # journaled state machine: a repeat is another move
    "knowledge": (True, False, True),
    "context": (True, False, True),
    "record": (False, False, True),  # every entry's idempotency_key replays
    "checkpoint": (False, False, True),
    "archive": (False, True, True),  # closes the change for good, overwrites baseline files
    "sync": (False, False, True),  # inspect reads; the rest need an idempotency_key
    "session": (False, False, False),  # heartbeat moves the lease on each call
    "doctor": (False, False, False),  # every repair takes a new backup
    "ultragoal": (False, False, False),
}

REFUSAL = {"code": "SOME_CODE", "message": "what to do next", "details": {"pointer": "/x"}}


def listed_over_stdio(project: Path) -> dict[str, Any]:
    """The tools/list result of ``ithaca --project PROJECT mcp``, as JSON."""
    server = StdioServerParameters(
        command=str(CONSOLE_SCRIPT), args=["--project", str(project), "mcp"], env=dict(os.environ)
    )

    async def listing() -> dict[str, Any]:
        with anyio.fail_after(120):
            async with Client(server, read_timeout_seconds=60) as client:
                result = await client.list_tools()
        dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped

    return anyio.run(listing)


def compact_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


@pytest.fixture
def tools(client: ToolClient) -> dict[str, dict[str, Any]]:
    """Each tool object as the client received it (JSON, by its wire names)."""
    return {
        name: tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        for name, tool in client.tools().items()
    }


# --- the listing ------------------------------------------------------------------------


def test_the_listing_of_all_fourteen_tools_fits_its_budget_over_stdio(project_dir: Path):
    listing = listed_over_stdio(project_dir)

    assert [tool["name"] for tool in listing["tools"]] == list(HINTS)
    size = compact_size(listing)
    assert size <= LISTING_BUDGET, {t["name"]: compact_size(t) for t in listing["tools"]}


def test_every_tool_has_a_title_and_its_hints_as_a_client_reads_them(tools):
    assert set(tools) == set(ITHACA_TOOLS) == set(HINTS)
    for name, tool in tools.items():
        assert tool["title"].strip(), name
        hints = {**HINT_DEFAULTS, **tool["annotations"]}
        assert hints["openWorldHint"] is False, name  # every tool works on the project's state
        assert hints["readOnlyHint"] is HINTS[name][0], name
        if hints["readOnlyHint"]:
            # The other two mean nothing for a read-only tool (MCP), so none is sent.
            assert set(tool["annotations"]) == {"readOnlyHint", "openWorldHint"}, name
            assert HINTS[name][1:] == (False, True), name
        else:
            assert (hints["destructiveHint"], hints["idempotentHint"]) == HINTS[name][1:], name
        # Only what differs from a default is published.
        assert all(HINT_DEFAULTS[k] is not v for k, v in tool["annotations"].items()), name


def test_every_tool_declares_an_open_object_output_schema(tools):
    for name, tool in tools.items():
        schema = tool["outputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object", name
        # A refusal's structured content is {code, message, details}: the schema must hold
        # for it as well, so it requires nothing and forbids nothing.
        assert "required" not in schema and "additionalProperties" not in schema, name
        assert not list(Draft202012Validator(schema).iter_errors(REFUSAL)), name


def test_input_schemas_refuse_unknown_fields_and_type_every_property(tools):
    for name, tool in tools.items():
        schema = tool["inputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["additionalProperties"] is False, name
        for field, rule in schema["properties"].items():
            assert "type" in rule or "anyOf" in rule or "const" in rule, (name, field)


# --- real answers against the output schemas ---------------------------------------------


class Answers:
    """Calls through the in-memory client, keeping every structured result."""

    def __init__(self, client: ToolClient):
        self.client = client
        self.seen: list[tuple[str, dict[str, Any], CallToolResult]] = []

    def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        result = self.client.call(tool, arguments)
        self.seen.append((tool, arguments, result))
        return result

    def ok(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.call(tool, arguments)
        assert not result.is_error, (tool, arguments, result.structured_content)
        answer: dict[str, Any] = result.structured_content
        return answer

    def refused(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.call(tool, arguments)
        assert result.is_error, (tool, arguments, result.structured_content)
        answer: dict[str, Any] = result.structured_content
        assert set(answer) == {"code", "message", "details"}, answer
        return answer


PASSES_ON_ZERO = """\
from tb_validate import observed, pass_, fail
seen = observed()
pass_("zero errors") if seen == {"errors": 0} else fail("errors remain", seen)
"""


def protocols_answers(calls: Answers, event: dict[str, Any]) -> None:
    calls.ok("load_protocols", {"eventId": event["id"], "workflow": "ignored"})
    calls.refused("load_protocols", {"eventId": "evt_" + "0" * 26})
    calls.ok("protocols", {"operation": "list"})
    calls.ok("protocols", {"operation": "get", "id": "ithaca.protocols-first"})
    calls.ok("protocols", {"operation": "explain", "eventId": event["id"]})
    calls.refused("protocols", {"operation": "get", "id": "team.missing"})


def debugging_answers(calls: Answers, event: dict[str, Any]) -> None:
    notebook = calls.ok("notebook", {"operation": "create", "title": "checks"})["notebookId"]
    cell = calls.ok(
        "notebook", {"operation": "add_cell", "notebookId": notebook, "source": PASSES_ON_ZERO}
    )["cellId"]
    ref = {"notebookId": notebook, "cellId": cell}
    calls.ok("notebook", {"operation": "update_cell", **ref, "source": PASSES_ON_ZERO + "\n"})
    calls.ok("notebook", {"operation": "get", "notebookId": notebook})
    calls.ok("notebook", {"operation": "get", **ref, "version": 1})
    calls.ok("notebook", {"operation": "list"})
    calls.ok("notebook", {"operation": "export", "notebookId": notebook})
    calls.ok("notebook", {"operation": "run_cell", **ref, "observed": {"errors": 0}})
    calls.refused("notebook", {"operation": "get", "notebookId": "nb_missing"})
    calls.refused("notebook", {"operation": "create"})

    session = {"session": "s1"}
    calls.ok("ulysses", {"operation": "init", "problem": "the importer drops rows", **session})
    calls.ok("ulysses", {"operation": "bind_final_validator", **ref, "observed": {"errors": 1}})
    plan = {"primary": "skip the header", "recovery": "restore the importer"}
    calls.ok(
        "ulysses",
        {"operation": "plan", **plan, "primaryValidator": ref, "recoveryValidator": ref},
    )
    calls.ok("ulysses", {"operation": "outcome", "observed": {"errors": 3}})
    calls.ok("ulysses", {"operation": "outcome", "observed": {"errors": 2}})
    calls.ok(
        "ulysses",
        {
            "operation": "reflect",
            "hypothesis": "the header is read twice",
            "falsification": "a file without a header still loses a row",
        },
    )
    calls.ok("ulysses", {"operation": "note", "thought": "rows 1 and 2 differ", "data": [1, 2]})
    calls.ok("ulysses", {"operation": "status"})
    calls.ok("ulysses", {"operation": "resume"})
    calls.refused("ulysses", {"operation": "plan"})
    lesson = calls.ok(
        "ulysses",
        {
            "operation": "complete",
            "terminalState": "resolved",
            "observed": {"errors": 0},
            "summary": "The importer read the header twice; it now reads it once.",
        },
    )["lesson"]["id"]
    calls.ok("knowledge", {"operation": "search", "query": "importer header"})
    calls.ok("knowledge", {"operation": "get", "id": lesson})
    calls.refused("knowledge", {"operation": "get", "id": "lesson-missing"})
    calls.refused("knowledge", {"operation": "search", "query": "x", "limit": 99})


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def delivery_answers(calls: Answers, project_dir: Path) -> None:
    git(project_dir, "config", "user.email", "dev@example.com")
    git(project_dir, "config", "user.name", "Dev")
    (project_dir / "src").mkdir()
    (project_dir / "src" / "app.py").write_text("print('hi')\n")
    git(project_dir, "add", "-A")
    git(project_dir, "commit", "-qm", "first")

    calls.ok("context", {})
    calls.ok("context", {"detail": "full"})
    calls.refused("context", {"colour": "blue"})
    change = {"id": "add-login", "kind": "standard", "title": "Add login", "intent": "# Login\n"}
    task = {
        "id": "T-1",
        "change_id": "add-login",
        "title": "Add the login form",
        "verification": {"argv": ["pytest", "-q"]},
        "files_modified": ["src/app.py"],
    }
    entries = [
        {"kind": "change_contract", "action": "open", "idempotency_key": "c1", "data": change},
        {"kind": "task_contract", "action": "define", "idempotency_key": "t1", "data": task},
    ]
    calls.ok("record", {"entries": entries})
    calls.ok("record", {"entries": entries})  # replayed
    calls.refused("record", {"entries": [{**entries[0], "colour": "blue"}]})
    plan = {
        "stage": "plan",
        "scope": {"change_id": "add-login"},
        "payload": {"summary": "One form."},
        "idempotency_key": "p1",
    }
    calls.ok("checkpoint", plan)
    calls.refused("checkpoint", {**plan, "idempotency_key": "p2", "stage": "launch"})

    calls.ok("sync", {"action": "inspect"})
    calls.ok("sync", {"action": "publish", "idempotency_key": "s1"})
    calls.refused("sync", {"action": "merge"})

    who = {"session": "host-1"}
    calls.ok("session", {"operation": "admission", "task_id": "T-1", **who})
    acquired = calls.ok(
        "session",
        {
            "operation": "acquire",
            "task_id": "T-1",
            "strategy": "spawn",
            "worktree": "none",
            "idempotency_key": "a1",
            **who,
        },
    )
    session_id = acquired["session"]["id"]
    calls.ok("session", {"operation": "heartbeat", "session_id": session_id, **who})
    calls.ok(
        "session",
        {"operation": "close", "session_id": session_id, "idempotency_key": "x1", **who},
    )
    calls.refused("session", {"operation": "heartbeat", "session_id": "ses_" + "0" * 26})

    archive = {
        "change_id": "add-login",
        "payload": {"summary": "Login form added.", "no_baseline_change_reason": "none"},
        "idempotency_key": "ar1",
    }
    calls.ok("archive", archive)
    calls.refused("archive", {**archive, "change_id": "no-such-change", "idempotency_key": "ar2"})

    calls.ok("doctor", {"operation": "inspect"})
    calls.ok("doctor", {"operation": "repair"})
    calls.refused("doctor", {"operation": "rebuild"})


def ultragoal_answers(calls: Answers) -> None:
    me = {"session": "s1"}
    calls.ok("ultragoal", {"operation": "get", **me})
    calls.ok("ultragoal", {"operation": "status", **me})
    calls.ok(
        "ultragoal",
        {
            "operation": "set",
            "phase": "planning",
            "outcome": "the importer keeps every row",
            "verification_surface": "pytest tests/test_importer.py passes",
            **me,
        },
    )
    calls.ok("ultragoal", {"operation": "set_stories", "single": True, **me})
    calls.ok("ultragoal", {"operation": "get", **me})
    calls.ok("ultragoal", {"operation": "serialize_requirements", **me})
    calls.ok("ultragoal", {"operation": "list_others", **me})
    calls.refused("ultragoal", {"operation": "confirm_all_stories", **me})
    calls.refused("ultragoal", {"operation": "set", "phase": "done", **me})
    calls.refused("ultragoal", {"operation": "resume_pursuit", **me})


def check_answers(calls: Answers, tools: dict[str, dict[str, Any]]) -> set[str]:
    """Validate every answer seen; return the names of the tools that answered."""
    for tool, arguments, result in calls.seen:
        assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
        validator = Draft202012Validator(tools[tool]["outputSchema"])
        problems = [error.message for error in validator.iter_errors(result.structured_content)]
        assert not problems, (tool, arguments, problems)
    return {tool for tool, _, _ in calls.seen}


@pytest.mark.parametrize(
    "part", ["protocols", "debugging", "delivery", "ultragoal"], ids=lambda part: part
)
def test_real_answers_and_refusals_of_every_tool_match_its_output_schema(
    part: str, client: ToolClient, tools: dict[str, dict[str, Any]], event, project_dir
):
    calls = Answers(client)
    scenarios: dict[str, Callable[[], None]] = {
        "protocols": lambda: protocols_answers(calls, event),
        "debugging": lambda: debugging_answers(calls, event),
        "delivery": lambda: delivery_answers(calls, project_dir),
        "ultragoal": lambda: ultragoal_answers(calls),
    }
    scenarios[part]()

    answered = check_answers(calls, tools)
    expected = {
        "protocols": {"load_protocols", "protocols"},
        "debugging": {"notebook", "ulysses", "knowledge"},
        "delivery": {"context", "record", "checkpoint", "sync", "session", "archive", "doctor"},
        "ultragoal": {"ultragoal"},
    }[part]
    assert answered == expected
    for tool in expected:  # a successful answer and a refusal of each tool were checked
        outcomes = {result.is_error for name, _, result in calls.seen if name == tool}
        assert outcomes == {True, False}, tool
    # Each field an output schema declares is one a real answer carries.
    for tool in expected:
        carried = {
            key
            for name, _, result in calls.seen
            if name == tool and not result.is_error
            for key in result.structured_content
        }
        declared = set(tools[tool]["outputSchema"]["properties"])
        assert declared <= carried, (tool, declared - carried)
