"""Fuzzing both tools: every answer is a result or a coded error, and only a successful
load moves the journal."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings, target
from hypothesis import event as record_outcome
from hypothesis import strategies as st

from ithaca.protocols.loading import SELECTOR_ARGUMENTS

WEIRD_STRINGS = [
    "",
    " ",
    "\x00",
    "\ud800",
    "evt_\udfff",
    "\udc80" * 3,
    "evt_",
    "evt_" + "Z" * 26,
    "'; DROP TABLE journal; --",
    "../../.ithaca/.runtime/state.db",
    "ithaca.*",
    "%s%n",
    "\u202egnp.exe",
    "🚢" * 40,
    "x" * 5000,
]

weird_strings = st.sampled_from(WEIRD_STRINGS)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**53, max_value=2**200),
    st.integers(min_value=-(2**200), max_value=-(2**53)),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(exclude_categories=()), max_size=20),
    weird_strings,
)
junk = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
junk_names = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=12),
    weird_strings,
    st.sampled_from(["operation", "eventId", "id", "prompt", "actor", "constraints"]),
)

OPERATION_FIELDS = {
    "list": ("scope", "source", "enabled", "tag"),
    "get": ("id",),
    "explain": ("eventId",),
}


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` most of the time, else a weird string or junk of any shape."""
    return st.one_of(good, good, good, weird_strings, junk)


def field_values(event_id: str) -> dict[str, st.SearchStrategy[Any]]:
    """For each real field, values that are mostly plausible and sometimes junk."""
    plausible = {
        "eventId": st.just(event_id),
        "session": st.just("s1"),
        "id": st.sampled_from(["ithaca.protocols-first", "ithaca.coding.progress", "team.gone"]),
        "scope": st.sampled_from(["base", "user"]),
        "source": st.sampled_from(["seed", "sqlite", "file"]),
        "enabled": st.booleans(),
        "tag": st.sampled_from(["core", "coding"]),
    }
    return {name: mostly(value) for name, value in plausible.items()}


def with_extra_fields(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    extra = st.dictionaries(junk_names, junk, min_size=1, max_size=2)
    return st.one_of(base, st.builds(lambda known, more: {**known, **more}, base, extra))


def load_arguments(event_id: str) -> st.SearchStrategy[dict[str, Any]]:
    values = field_values(event_id)
    return with_extra_fields(
        st.fixed_dictionaries(
            {},
            optional={
                "eventId": values["eventId"],
                "session": values["session"],
                **{name: junk for name in sorted(SELECTOR_ARGUMENTS)[:4]},
            },
        )
    )


def protocols_arguments(event_id: str) -> st.SearchStrategy[dict[str, Any]]:
    values = field_values(event_id)

    def for_operation(operation: str) -> st.SearchStrategy[dict[str, Any]]:
        fields = (*OPERATION_FIELDS[operation], "session")
        needed = {name: values[name] for name in fields if name in ("id", "eventId")}
        return st.fixed_dictionaries(
            {"operation": mostly(st.just(operation)), **needed},
            optional={name: values[name] for name in fields if name not in needed},
        )

    return with_extra_fields(st.sampled_from(sorted(OPERATION_FIELDS)).flatmap(for_operation))


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_answer_is_a_result_or_a_coded_error_and_only_loads_are_journaled(
    client, event, journal_length, data
):
    calls = [
        ("load_protocols", data.draw(load_arguments(event["id"]), label="load_protocols")),
        ("protocols", data.draw(protocols_arguments(event["id"]), label="protocols")),
    ]
    before = journal_length()
    loads = 0

    for tool, arguments in calls:
        result = client.call(tool, arguments)
        if result.is_error:
            error = json.loads(result.content[0].text)
            assert set(error) == {"code", "message", "details"}
            assert isinstance(error["code"], str) and error["code"].isupper(), error
            record_outcome(f"{tool}: {error['code']}")
        else:
            assert isinstance(result.structured_content, dict)
            record_outcome(f"{tool}: answered")
            if tool == "load_protocols":
                assert result.structured_content["eventId"] == event["id"]
                loads += 1

    target(loads, label="successful loads")
    assert journal_length() == before + loads
