"""The MCP server through the SDK's in-memory client: what an agent sees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.hosts_real.host import ITHACA_TOOLS

from ithaca.app import IthacaProject
from ithaca.cli.entry import cli
from ithaca.kernel import canon

UNKNOWN_EVENT = "evt_" + "0" * 26


def loaded_digest(project: IthacaProject, session: str) -> str | None:
    row: tuple[str | None] = (
        project.store.connection()
        .execute(
            "SELECT loaded_digest FROM protocol_sessions WHERE host_session_id = ?", (session,)
        )
        .fetchone()
    )
    return row[0]


def last_journal_event(project: IthacaProject) -> dict[str, Any]:
    actor, kind, subject, payload = (
        project.store.connection()
        .execute("SELECT actor, kind, subject, payload FROM journal ORDER BY seq DESC LIMIT 1")
        .fetchone()
    )
    return {"actor": actor, "kind": kind, "subject": subject, "payload": json.loads(payload)}


# --- tools/list -----------------------------------------------------------------------


def test_the_server_offers_the_agents_tools_and_marks_the_read_only_ones(client):
    tools = client.tools()

    assert set(tools) == set(ITHACA_TOOLS)
    read_only = {name for name, tool in tools.items() if tool.annotations.read_only_hint}
    assert read_only == {"protocols", "knowledge", "context"}


def test_load_protocols_schema_publishes_the_event_id_alone(client):
    # The seed's selector arguments are still accepted and reported ignored (below); the
    # listing does not invite an agent to send them, nor the session the server fills in.
    tool = client.tools()["load_protocols"]
    schema = tool.input_schema

    assert schema["required"] == ["eventId"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"eventId"}
    assert "first" in tool.description and "eventId" in tool.description


def test_protocols_schema_names_its_operations_and_refuses_other_fields(client):
    schema = client.tools()["protocols"].input_schema

    assert schema["required"] == ["operation"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["operation"]["enum"] == ["list", "get", "explain"]
    assert set(schema["properties"]) == {
        "operation",
        "id",
        "eventId",
        "scope",
        "source",
        "enabled",
        "tag",
    }


def test_the_server_is_named_after_the_configured_mcp_server_name(connect, project_dir: Path):
    (project_dir / ".ithaca" / "config.toml").write_text(
        '[protocols]\nmcp_server_name = "governor"\n', encoding="utf-8"
    )

    assert connect(project_dir).server_name == "governor"


def test_the_server_is_named_ithaca_by_default(client):
    assert client.server_name == "ithaca"


# --- load_protocols ---------------------------------------------------------------------


def test_load_protocols_returns_the_events_bundle_in_priority_order(client, event):
    bundle = client.ok("load_protocols", {"eventId": event["id"]})

    ids = [protocol["id"] for protocol in bundle["protocols"]]
    assert bundle["eventId"] == event["id"]
    assert bundle["selectorValues"]["workflow"] == "coding"
    assert ids[0] == "ithaca.protocols-first"
    assert "ithaca.coding.required-loop" in ids and "ithaca.debugging.ulysses" not in ids
    assert ids == [
        p["id"] for p in sorted(bundle["protocols"], key=lambda p: (-p["priority"], p["id"]))
    ]
    assert bundle["digest"] == canon.digest(bundle["protocols"])
    assert "diagnostics" not in bundle


def test_load_protocols_journals_the_load_as_the_agent_and_marks_the_session_loaded(
    client, project, event
):
    bundle = client.ok("load_protocols", {"eventId": event["id"], "session": "s1"})

    assert last_journal_event(project) == {
        "actor": "agent",
        "kind": "protocols.bundle_loaded",
        "subject": event["id"],
        "payload": {
            "eventId": event["id"],
            "revision": bundle["revision"],
            "digest": bundle["digest"],
            "protocolIds": [protocol["id"] for protocol in bundle["protocols"]],
        },
    }
    assert loaded_digest(project, "s1") == bundle["digest"]


@pytest.mark.parametrize("arguments", [{}, {"eventId": ""}, {"eventId": "   "}, {"eventId": 7}])
def test_load_protocols_without_an_event_id_is_event_id_required(
    client, project, journal_length, arguments
):
    before = journal_length()

    error = client.refused("load_protocols", arguments)

    assert error["code"] == "EVENT_ID_REQUIRED"
    assert error["details"]["pointer"] == "/eventId"
    assert journal_length() == before


def test_load_protocols_for_an_event_never_admitted_is_event_not_found(client, journal_length):
    before = journal_length()

    error = client.refused("load_protocols", {"eventId": UNKNOWN_EVENT})

    assert error == {
        "code": "EVENT_NOT_FOUND",
        "message": error["message"],
        "details": {"eventId": UNKNOWN_EVENT},
    }
    assert journal_length() == before


def test_load_protocols_refuses_an_unknown_field_and_records_no_load(
    client, project, event, journal_length
):
    before = journal_length()

    error = client.refused("load_protocols", {"eventId": event["id"], "prompt": "hi"})

    assert error["code"] == "UNKNOWN_FIELD"
    assert error["details"] == {"pointer": "/prompt", "problem": "UNKNOWN_FIELD"}
    assert journal_length() == before
    assert loaded_digest(project, "s1") is None


def test_spoofed_selector_arguments_are_ignored_and_reported_as_diagnostics(client, event):
    honest = client.ok("load_protocols", {"eventId": event["id"]})

    spoofed = client.ok(
        "load_protocols",
        {"eventId": event["id"], "workflow": "debugging", "connector": "codex"},
    )

    assert spoofed["selectorValues"] == honest["selectorValues"]
    assert spoofed["digest"] == honest["digest"]
    assert spoofed["diagnostics"] == [
        {"code": "SELECTOR_ARGUMENT_IGNORED", "field": "workflow"},
        {"code": "SELECTOR_ARGUMENT_IGNORED", "field": "connector"},
    ]


def test_a_corrupt_protocol_row_fails_the_load_with_store_corrupt_and_records_nothing(
    client, project, event, journal_length
):
    project.store.connection().execute(
        "UPDATE protocols SET selector_json = ? WHERE id = ?",
        ('{"workflow": ["coding", 5]}', "ithaca.coding.progress"),
    )
    before = journal_length()

    error = client.refused("load_protocols", {"eventId": event["id"]})

    assert error["code"] == "STORE_CORRUPT"
    assert error["details"]["protocolId"] == "ithaca.coding.progress"
    assert journal_length() == before
    assert loaded_digest(project, "s1") is None


def test_the_digest_is_the_same_from_two_servers_and_does_not_depend_on_loaded_at(
    connect, project_dir, project, event
):
    first = connect(project_dir).ok("load_protocols", {"eventId": event["id"]})
    second = connect(project_dir).ok("load_protocols", {"eventId": event["id"]})
    computed_later = project.protocols.compute_bundle(event["id"])

    assert first["digest"] == second["digest"] == computed_later["digest"]
    assert first["digest"] == canon.digest(first["protocols"])


def test_a_lone_surrogate_in_the_arguments_is_refused_as_invalid_input(client, journal_length):
    before = journal_length()

    error = client.refused("load_protocols", {"eventId": "evt_\ud800"})

    assert error["code"] == "INVALID_INPUT"
    assert error["details"] == {"pointer": "/eventId", "problem": "INVALID_TEXT"}
    assert journal_length() == before


# --- protocols ----------------------------------------------------------------------------


def cli_json(project_dir: Path, *arguments: str) -> Any:
    """What ``ithaca protocols … --json`` prints."""
    result = CliRunner().invoke(
        cli, ["--project", str(project_dir), "protocols", *arguments, "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("filters", "flags"),
    [
        ({}, []),
        ({"scope": "base"}, ["--scope", "base"]),
        ({"scope": "user"}, ["--scope", "user"]),
        ({"source": "seed"}, ["--source", "seed"]),
        ({"enabled": False}, ["--disabled"]),
        ({"tag": "core"}, ["--tag", "core"]),
    ],
)
def test_protocols_list_answers_the_cli_listing_under_a_protocols_key(
    client, project_dir, filters, flags
):
    listed = client.ok("protocols", {"operation": "list", **filters})

    assert listed == {"protocols": cli_json(project_dir, "list", *flags)}


def test_protocols_get_answers_what_the_cli_prints(client, project_dir):
    record = client.ok("protocols", {"operation": "get", "id": "ithaca.coding.progress"})

    assert record == cli_json(project_dir, "get", "ithaca.coding.progress")


def test_protocols_explain_answers_what_the_cli_prints(client, project_dir, event):
    explained = client.ok("protocols", {"operation": "explain", "eventId": event["id"]})

    assert explained == cli_json(project_dir, "explain", event["id"])


def test_protocols_reads_change_nothing(client, event, journal_length):
    before = journal_length()

    client.ok("protocols", {"operation": "list", "session": "s1"})
    client.ok("protocols", {"operation": "get", "id": "ithaca.protocols-first"})
    client.ok("protocols", {"operation": "explain", "eventId": event["id"]})

    assert journal_length() == before


def test_protocols_list_sees_a_protocol_file_added_while_the_server_runs(client, project_dir):
    client.ok("protocols", {"operation": "list"})
    record = {
        "id": "team.no-force-push",
        "name": "No force push",
        "description": "Shared history is never rewritten.",
        "priority": 100,
        "selector": {},
        "rules": ["Never force-push a shared branch."],
    }
    (project_dir / ".ithaca" / "protocols" / "team.no-force-push.json").write_text(
        json.dumps(record), encoding="utf-8"
    )

    listed = client.ok("protocols", {"operation": "list", "source": "file"})

    assert [protocol["id"] for protocol in listed["protocols"]] == ["team.no-force-push"]


@pytest.mark.parametrize(
    ("arguments", "pointer", "problem"),
    [
        ({}, "/operation", "REQUIRED"),
        ({"operation": "create"}, "/operation", "NOT_ALLOWED"),
        ({"operation": "list", "force": True}, "/force", "UNKNOWN_FIELD"),
        ({"operation": "list", "enabled": "yes"}, "/enabled", "WRONG_TYPE"),
        ({"operation": "list", "scope": "team"}, "/scope", "NOT_ALLOWED"),
        ({"operation": "list", "tag": 3}, "/tag", "WRONG_TYPE"),
        ({"operation": "get"}, "/id", "REQUIRED"),
        (
            {"operation": "get", "id": "ithaca.protocols-first", "scope": "base"},
            "/scope",
            "NOT_FOR_OPERATION",
        ),
        ({"operation": "explain"}, "/eventId", "REQUIRED"),
        ({"operation": "list", "eventId": UNKNOWN_EVENT}, "/eventId", "NOT_FOR_OPERATION"),
    ],
)
def test_protocols_refuses_input_outside_its_schema_with_a_pointer(
    client, arguments, pointer, problem
):
    error = client.refused("protocols", arguments)

    assert error["code"] == "INVALID_INPUT"
    assert error["details"] == {"pointer": pointer, "problem": problem}


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"operation": "get", "id": "team.missing"}, "PROTOCOL_NOT_FOUND"),
        ({"operation": "explain", "eventId": UNKNOWN_EVENT}, "EVENT_NOT_FOUND"),
    ],
)
def test_protocols_reports_what_it_cannot_find_with_its_code(client, arguments, code):
    assert client.refused("protocols", arguments)["code"] == code


def test_an_error_carries_the_same_object_as_text_and_structured_content(client):
    result = client.call("protocols", {"operation": "get", "id": "team.missing"})

    assert result.is_error
    assert json.loads(result.content[0].text) == result.structured_content


def test_the_server_opens_a_part_only_when_one_of_its_tools_is_called(
    connect, project_dir: Path, event: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Opening delivery recovers dead writers' units: an agent's first load_protocols must
    # not wait for it, nor fail with it.
    from ithaca.delivery import DeliveryService

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("delivery opened")

    monkeypatch.setattr(DeliveryService, "__init__", refuse)
    client = connect(project_dir)
    assert client.ok("load_protocols", {"eventId": event["id"]})["eventId"] == event["id"]
