from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ithaca.kernel import canon
from ithaca.protocols.matcher import (
    BundleIndex,
    matches,
    mismatches,
    naive_match,
    selector_values,
)
from ithaca.protocols.seeds import BASE_PROTOCOLS
from ithaca.protocols.validate import SELECTOR_KEYS

VALUES = {
    "connector": "claude-code",
    "messageKind": "chat.message",
    "userId": "dev-7",
    "clientId": None,
    "projectId": "customer-portal",
    "workflow": "coding",
    "task": None,
}


def protocol(
    protocol_id: str, priority: int = 0, selector: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": protocol_id,
        "name": protocol_id,
        "description": "A test protocol.",
        "scope": "user",
        "enabled": True,
        "priority": priority,
        "selector": selector or {},
        "rules": [f"Follow {protocol_id}."],
        "constraints": [],
        "source": "sqlite",
        "tags": [],
        **extra,
    }


def ids(bundle: tuple[list[dict[str, Any]], str]) -> list[str]:
    return [record["id"] for record in bundle[0]]


# --- selector values ---------------------------------------------------------------------


def test_selector_values_map_event_fields_to_the_seven_keys() -> None:
    event = {
        "id": "evt_01J9Z3V6Q2X8M4K7T1R5B0C9DE",
        "connector": "codex",
        "kind": "command",
        "actor": {"id": "dev-7", "kind": "user"},
        "hostSessionId": "s-1",
        "context": {"clientId": "acme", "projectId": "portal", "workflow": "goal", "task": "T-3"},
    }
    assert selector_values(event) == {
        "connector": "codex",
        "messageKind": "command",
        "userId": "dev-7",
        "clientId": "acme",
        "projectId": "portal",
        "workflow": "goal",
        "task": "T-3",
    }


def test_selector_values_of_absent_context_fields_are_null() -> None:
    event = {
        "connector": "cli",
        "kind": "chat.message",
        "actor": {"id": "u", "kind": "user"},
        "context": {"workflow": "coding"},
    }
    values = selector_values(event)
    assert list(values) == list(SELECTOR_KEYS)
    assert values["clientId"] is None and values["task"] is None


# --- matching ----------------------------------------------------------------------------


def test_empty_selector_matches_every_event() -> None:
    assert matches({}, VALUES)
    assert matches({}, dict.fromkeys(SELECTOR_KEYS))


def test_comparison_is_exact_and_case_sensitive() -> None:
    assert matches({"workflow": "coding"}, VALUES)
    assert not matches({"workflow": "Coding"}, VALUES)
    assert not matches({"userId": "DEV-7"}, VALUES)
    assert not matches({"projectId": "customer-portal "}, VALUES)


def test_list_value_matches_any_of_its_members() -> None:
    assert matches({"connector": ["codex", "claude-code"]}, VALUES)
    assert not matches({"connector": ["codex", "opencode"]}, VALUES)


def test_every_key_of_a_selector_must_match() -> None:
    assert matches({"workflow": "coding", "userId": "dev-7"}, VALUES)
    assert not matches({"workflow": "coding", "userId": "dev-8"}, VALUES)


def test_null_event_value_never_matches_a_present_key() -> None:
    assert not matches({"task": "T-1"}, VALUES)
    assert not matches({"clientId": ["acme", "globex"]}, VALUES)


def test_mismatches_name_each_failing_key_with_expected_and_actual() -> None:
    selector = {"task": "T-1", "workflow": "coding", "connector": ["codex", "cli"]}
    assert mismatches(selector, VALUES) == [
        {"key": "connector", "expected": ["codex", "cli"], "actual": "claude-code"},
        {"key": "task", "expected": "T-1", "actual": None},
    ]
    assert mismatches({"workflow": "coding"}, VALUES) == []


# --- bundles -----------------------------------------------------------------------------


def test_bundle_orders_by_priority_descending_then_id_ascending() -> None:
    records = [
        protocol("team.b", 10),
        protocol("team.c", 50),
        protocol("team.a", 10),
        protocol("team.z", -5),
        protocol("ithaca.x", 10),
    ]
    expected = ["team.c", "ithaca.x", "team.a", "team.b", "team.z"]
    assert ids(BundleIndex(records).match(VALUES)) == expected
    assert ids(BundleIndex(reversed(records)).match(VALUES)) == expected
    assert ids(naive_match(records, VALUES)) == expected


def test_disabled_records_never_enter_a_bundle() -> None:
    records = [protocol("team.on"), protocol("team.off", enabled=False)]
    assert ids(BundleIndex(records).match(VALUES)) == ["team.on"]
    assert len(BundleIndex(records)) == 1


def test_index_applies_wildcards_any_of_lists_and_null_values() -> None:
    records = [
        protocol("team.everywhere"),
        protocol("team.coding", selector={"workflow": "coding"}),
        protocol("team.debugging", selector={"workflow": "debugging"}),
        protocol("team.agents", selector={"connector": ["codex", "claude-code"]}),
        protocol("team.task", selector={"task": "T-1"}),
        protocol("team.upper", selector={"workflow": "Coding"}),
    ]
    index = BundleIndex(records)
    assert ids(index.match(VALUES)) == ["team.agents", "team.coding", "team.everywhere"]
    assert ids(index.match(dict(VALUES, task="T-1", workflow="debugging"))) == [
        "team.agents",
        "team.debugging",
        "team.everywhere",
        "team.task",
    ]


def test_bundle_digest_is_the_canonical_digest_of_its_protocols() -> None:
    records = [dict(seed, source="seed") for seed in BASE_PROTOCOLS]
    protocols, digest = BundleIndex(records).match(VALUES)
    assert [p["id"] for p in protocols][:3] == [
        "ithaca.protocols-first",
        "ithaca.state-off-limits",
        "ithaca.no-self-approval",
    ]
    assert digest == canon.digest(protocols)


def test_bundle_carries_exactly_the_bundle_fields() -> None:
    record = protocol("team.a", overrides_base=False, content_hash="0" * 64)
    protocols, digest = BundleIndex([record]).match(VALUES)
    assert set(protocols[0]) == {
        "id",
        "name",
        "description",
        "scope",
        "enabled",
        "priority",
        "selector",
        "rules",
        "constraints",
        "source",
        "tags",
    }
    assert digest == canon.digest(protocols)


def test_empty_bundle_has_the_digest_of_an_empty_list() -> None:
    index = BundleIndex([protocol("team.task", selector={"task": "T-1"})])
    assert index.match(VALUES) == ([], canon.digest([]))


def test_changing_a_returned_bundle_does_not_change_the_next_one() -> None:
    index = BundleIndex([protocol("team.a"), protocol("team.b")])
    first, _ = index.match(VALUES)
    first.clear()
    assert ids(index.match(VALUES)) == ["team.a", "team.b"]


# --- index ≡ naive matcher ---------------------------------------------------------------

VALUE_POOL = {
    "connector": ["claude-code", "codex", "cli"],
    "messageKind": ["chat.message", "command"],
    "userId": ["dev-7", "Dev-7", "ops"],
    "clientId": ["acme", "globex"],
    "projectId": ["portal", "api"],
    "workflow": ["coding", "debugging", "goal", "release"],
    "task": ["T-1", "T-2", "t-1"],
}


@st.composite
def selectors(draw: st.DrawFn) -> dict[str, Any]:
    selector: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(SELECTOR_KEYS), unique=True, max_size=3)):
        pool = VALUE_POOL[key]
        if draw(st.booleans()):
            selector[key] = draw(st.sampled_from(pool))
        else:
            selector[key] = draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))
    return selector


@st.composite
def record_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    protocol_ids = draw(
        st.lists(
            st.from_regex(r"(team|ithaca)\.[a-c]{1,3}", fullmatch=True), unique=True, max_size=25
        )
    )
    return [
        protocol(
            protocol_id,
            draw(st.integers(-3, 3)),
            draw(selectors()),
            enabled=draw(st.booleans()),
        )
        for protocol_id in protocol_ids
    ]


event_values = st.fixed_dictionaries(
    {key: st.none() | st.sampled_from(pool) for key, pool in VALUE_POOL.items()}
)


@settings(max_examples=300, deadline=None)
@given(records=record_sets(), events=st.lists(event_values, min_size=1, max_size=8))
def test_index_match_equals_the_naive_matcher(
    records: list[dict[str, Any]], events: list[dict[str, Any]]
) -> None:
    index = BundleIndex(records)
    for values in events + events:
        protocols, digest = index.match(values)
        expected, expected_digest = naive_match(records, values)
        assert [p["id"] for p in protocols] == [p["id"] for p in expected]
        assert protocols == expected
        assert digest == expected_digest == canon.digest(protocols)
