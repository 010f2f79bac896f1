"""``load_protocols`` and the lookup contract (protocols reference §7, §8, §13 Lookup)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ithaca.kernel import canon
from ithaca.kernel.errors import Corrupt, InvalidInput, NotFound, Refused

CODING_BASE = [
    "ithaca.protocols-first",
    "ithaca.state-off-limits",
    "ithaca.no-self-approval",
    "ithaca.coding.required-loop",
    "ithaca.coding.verify-before-done",
    "ithaca.coding.approval-when-asked",
    "ithaca.coding.progress",
    "ithaca.coding.completion-report",
]


def load(governed, arguments):
    return governed.protocols.load_protocols(arguments)


def journal_length(governed) -> int:
    count: int = governed.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0]
    return count


def tamper_event(governed, event_id: str, column: str, value) -> None:
    """Edit an admitted event behind Ithaca's back: drop the guard trigger first."""
    conn = governed.store.connection()
    conn.execute("DROP TRIGGER protocol_events_no_update")
    conn.execute(f"UPDATE protocol_events SET {column} = ? WHERE id = ?", (value, event_id))


# --- the event id ---------------------------------------------------------------------


@pytest.mark.parametrize("arguments", [{}, {"eventId": ""}, {"eventId": "   "}, {"eventId": 7}])
def test_load_without_an_event_id_fails_with_event_id_required(arguments, governed):
    with pytest.raises(InvalidInput) as caught:
        load(governed, arguments)

    assert caught.value.code == "EVENT_ID_REQUIRED"


def test_load_of_an_unknown_event_fails_with_event_not_found(governed, journaled):
    with pytest.raises(NotFound) as caught:
        load(governed, {"eventId": "evt_01J9Z3V6Q2X8M4K7T1R5B0C9DE"})

    assert caught.value.code == "EVENT_NOT_FOUND"
    assert journaled("protocols.bundle_loaded") == []


@pytest.mark.parametrize(
    ("column", "value"),
    [("workflow", "debugging"), ("actor_id", "someone-else"), ("task", "injected")],
)
def test_load_of_a_tampered_event_fails_with_event_context_invalid(
    column, value, hook, governed, journaled
):
    event_id = hook.admit()
    tamper_event(governed, event_id, column, value)

    with pytest.raises(Corrupt) as caught:
        load(governed, {"eventId": event_id})

    assert caught.value.code == "EVENT_CONTEXT_INVALID"
    assert journaled("protocols.bundle_loaded") == []


def test_tampered_event_is_never_counted_as_loaded(hook, governed):
    event_id = hook.admit()
    tamper_event(governed, event_id, "workflow", "chat")

    with pytest.raises(Corrupt):
        load(governed, {"eventId": event_id})

    assert hook.write("notes.txt").decision == "deny"


# --- arguments ------------------------------------------------------------------------


def test_load_refuses_an_unknown_field(hook, governed, journaled):
    event_id = hook.admit()

    with pytest.raises(InvalidInput) as caught:
        load(governed, {"eventId": event_id, "protocolIds": ["team.rule"]})

    assert caught.value.code == "UNKNOWN_FIELD"
    assert journaled("protocols.bundle_loaded") == []


def test_spoofed_selector_arguments_are_ignored_and_reported(hook, governed):
    event_id = hook.admit()
    honest = load(governed, {"eventId": event_id})

    spoofed = load(
        governed,
        {"eventId": event_id, "workflow": "debugging", "connector": "cli", "task": "x"},
    )

    assert [p["id"] for p in spoofed["protocols"]] == CODING_BASE
    assert spoofed["digest"] == honest["digest"]
    assert spoofed["selectorValues"]["workflow"] == "coding"
    assert spoofed["selectorValues"]["connector"] == "claude-code"
    assert sorted(d["field"] for d in spoofed["diagnostics"]) == ["connector", "task", "workflow"]
    assert {d["code"] for d in spoofed["diagnostics"]} == {"SELECTOR_ARGUMENT_IGNORED"}
    assert "diagnostics" not in honest


# --- the bundle -------------------------------------------------------------------------


def test_bundle_lists_the_matching_protocols_in_priority_then_id_order(hook, governed):
    event_id = hook.admit()

    bundle = load(governed, {"eventId": event_id})

    assert bundle["eventId"] == event_id
    assert [p["id"] for p in bundle["protocols"]] == CODING_BASE
    assert bundle["selectorValues"] == {
        "connector": "claude-code",
        "messageKind": "chat.message",
        "userId": governed.protocols.get_event(event_id)["actor"]["id"],
        "clientId": None,
        "projectId": None,
        "workflow": "coding",
        "task": None,
    }


def test_digest_covers_only_the_protocols_so_it_ignores_loaded_at(hook, governed):
    event_id = hook.admit()

    first = load(governed, {"eventId": event_id})
    second = load(governed, {"eventId": event_id})

    assert first["digest"] == canon.digest(first["protocols"])
    assert second["digest"] == first["digest"]
    assert governed.protocols.compute_bundle(event_id)["digest"] == first["digest"]


def test_digest_is_the_same_in_another_process(hook, governed, governed_dir):
    event_id = hook.admit()
    here = load(governed, {"eventId": event_id})

    script = (
        "import json, sys\n"
        "from ithaca.app import open_project\n"
        "project = open_project(sys.argv[1])\n"
        "print(json.dumps(project.protocols.compute_bundle(sys.argv[2])))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(governed_dir), event_id],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    there = json.loads(result.stdout)

    assert there["digest"] == here["digest"]
    assert there["protocols"] == here["protocols"]


def test_load_journals_bundle_loaded_as_the_agent(hook, governed, journaled):
    event_id = hook.admit()

    bundle = load(governed, {"eventId": event_id})

    loaded = journaled("protocols.bundle_loaded")
    assert len(loaded) == 1
    assert loaded[0]["actor"] == "agent"
    assert loaded[0]["subject"] == event_id
    assert loaded[0]["payload"] == {
        "eventId": event_id,
        "revision": bundle["revision"],
        "digest": bundle["digest"],
        "protocolIds": CODING_BASE,
    }


def test_compute_bundle_records_no_load(hook, governed, journaled):
    event_id = hook.admit()

    governed.protocols.compute_bundle(event_id)

    assert journaled("protocols.bundle_loaded") == []
    assert hook.write("notes.txt").decision == "deny"


# --- corrupt authority ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("selector_json", '{"workflow": 5}'),
        ("selector_json", '{"flavour": "coding"}'),
        ("rules_json", "[]"),
        ("constraints_json", '[{"kind": "allow_everything"}]'),
        ("name", "Renamed behind Ithaca's back"),
        ("priority", 1000),
    ],
)
def test_corrupt_protocol_row_fails_every_lookup_with_store_corrupt_and_journals_nothing(
    column, value, hook, governed, make_record
):
    governed.protocols.create_protocol(
        make_record("team.scoped", selector={"workflow": "debugging"}), actor="user"
    )
    event_id = hook.admit()
    conn = governed.store.connection()
    conn.execute(f"UPDATE protocols SET {column} = ? WHERE id = 'team.scoped'", (value,))
    before = journal_length(governed)

    for _ in range(2):
        with pytest.raises(Corrupt) as caught:
            load(governed, {"eventId": event_id})
        assert caught.value.code == "STORE_CORRUPT"
        assert caught.value.details["protocolId"] == "team.scoped"

    assert journal_length(governed) == before


def test_corrupt_disabled_row_still_fails_lookups(hook, governed, make_record):
    governed.protocols.create_protocol(make_record("team.off", enabled=False), actor="user")
    event_id = hook.admit()
    governed.store.connection().execute(
        "UPDATE protocols SET selector_json = '{\"workflow\": 5}' WHERE id = 'team.off'"
    )

    with pytest.raises(Corrupt) as caught:
        load(governed, {"eventId": event_id})

    assert caught.value.code == "STORE_CORRUPT"


def test_corrupt_seed_row_fails_lookups_instead_of_becoming_a_wildcard(hook, governed):
    event_id = hook.admit()
    governed.store.connection().execute(
        "UPDATE protocols SET selector_json = '{}' WHERE id = 'ithaca.debugging.ulysses'"
    )

    with pytest.raises(Corrupt) as caught:
        load(governed, {"eventId": event_id})

    assert caught.value.code == "STORE_CORRUPT"
    assert caught.value.details["protocolId"] == "ithaca.debugging.ulysses"


# --- protocol files -----------------------------------------------------------------


def test_invalid_protocol_file_fails_every_lookup_until_fixed_while_list_and_get_work(
    governed_dir, hook, governed, make_record
):
    event_id = hook.admit()
    folder = governed_dir / ".ithaca" / "protocols"
    (folder / "team.review.json").write_text('{"id": "team.review", "name": ', encoding="utf-8")

    for _ in range(2):
        with pytest.raises(Corrupt) as caught:
            load(governed, {"eventId": event_id})
        assert caught.value.code == "PROTOCOL_FILE_INVALID"
    with pytest.raises(Corrupt):
        governed.protocols.compute_bundle(event_id)
    assert [p["id"] for p in governed.protocols.list_protocols(scope="base")]
    assert governed.protocols.get_protocol("ithaca.protocols-first")["scope"] == "base"

    fixed = make_record("team.review", selector={"workflow": "coding"})
    (folder / "team.review.json").write_text(json.dumps(fixed), encoding="utf-8")
    bundle = load(governed, {"eventId": event_id})
    assert "team.review" in [p["id"] for p in bundle["protocols"]]


@pytest.mark.parametrize(
    "content",
    [
        {"id": "team.review", "name": "x", "description": "y", "priority": 1, "selector": {}},
        {
            "id": "team.review",
            "name": "x",
            "description": "y",
            "priority": 1,
            "selector": {"workflow": "coding"},
            "rules": ["r"],
            "colour": "blue",
        },
        {
            "id": "team.other-name",
            "name": "x",
            "description": "y",
            "priority": 1,
            "selector": {},
            "rules": ["r"],
        },
    ],
    ids=["missing-rules", "unknown-field", "id-differs-from-file-name"],
)
def test_semantically_invalid_protocol_file_fails_lookups(content, governed_dir, hook, governed):
    event_id = hook.admit()
    path = governed_dir / ".ithaca" / "protocols" / "team.review.json"
    path.write_text(json.dumps(content), encoding="utf-8")

    with pytest.raises(Corrupt) as caught:
        load(governed, {"eventId": event_id})

    assert caught.value.code == "PROTOCOL_FILE_INVALID"


def test_broken_file_keeps_the_previous_rows(governed_dir, governed, make_record):
    path = governed_dir / ".ithaca" / "protocols" / "team.review.json"
    path.write_text(json.dumps(make_record("team.review")), encoding="utf-8")
    governed.protocols.reconcile()
    stored = governed.protocols.get_protocol("team.review")

    path.write_text("{not json", encoding="utf-8")
    governed.protocols.reconcile()

    assert governed.protocols.get_protocol("team.review") == stored


def test_user_operations_refuse_any_actor_but_the_user(governed, make_record):
    service = governed.protocols
    service.create_protocol(make_record("team.a"), actor="user")
    before = journal_length(governed)
    for attempt in (
        lambda: service.create_protocol(make_record("team.b"), actor="agent"),
        lambda: service.update_protocol("team.a", {"priority": 5}, actor="hook"),
        lambda: service.set_enabled("team.a", False, actor="agent"),
        lambda: service.remove_protocol("team.a", actor="system"),
        lambda: service.grant_approval("apr_7K2M9QXD", actor="agent"),
    ):
        with pytest.raises(Refused) as raised:
            attempt()
        assert raised.value.code == "USER_ONLY"
    assert journal_length(governed) == before


def test_override_of_an_id_that_is_not_a_base_protocol_is_refused(governed, make_record):
    with pytest.raises(Refused) as raised:
        governed.protocols.create_protocol(make_record("team.new"), actor="user", override=True)
    assert raised.value.code == "NOT_A_BASE_PROTOCOL"


@pytest.mark.parametrize("session", [5, {"a": 1}, "", "has space"])
def test_load_protocols_refuses_a_malformed_session_field(governed, session):
    event = governed.protocols.admit_event(connector="test", host_session_id="s1")
    before = journal_length(governed)
    with pytest.raises(InvalidInput) as raised:
        governed.protocols.load_protocols({"eventId": event["id"], "session": session})
    assert raised.value.details == {"pointer": "/session", "problem": "WRONG_TYPE"}
    assert journal_length(governed) == before
