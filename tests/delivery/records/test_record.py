"""The ``record`` tool's contract: strict input at every level, limits, batches, and that
nothing waits for an accepted baseline."""

from __future__ import annotations

from typing import Any

import pytest

from ithaca.delivery.service import DeliveryService
from ithaca.kernel.errors import InvalidInput, IthacaError, NotFound

DECISION = {
    "scope": {"baseline": True},
    "question": "Which database?",
    "recommendation": "SQLite",
    "selection": {"choice": "SQLite", "rationale": "one file, no server"},
    "owner": "maria",
}


def refusal(service: DeliveryService, request: Any) -> IthacaError:
    with pytest.raises(IthacaError) as caught:
        service.record(request)
    return caught.value


@pytest.mark.parametrize(
    ("request_", "pointer"),
    [
        ({"entries": [], "extra": 1}, "/extra"),
        (
            {"entries": [{"kind": "event", "action": "append", "idempotency_key": "k", "x": 1}]},
            "/entries/0/x",
        ),
        (
            {
                "entries": [
                    {
                        "kind": "event",
                        "action": "append",
                        "idempotency_key": "k",
                        "data": {"type": "seen", "payload": {}, "colour": "red"},
                    }
                ]
            },
            "/entries/0/data/colour",
        ),
        (
            {
                "entries": [
                    {
                        "kind": "decision",
                        "action": "accept",
                        "idempotency_key": "k",
                        "data": {**DECISION, "scope": {"baseline": True, "team": "a"}},
                    }
                ]
            },
            "/entries/0/data/scope/team",
        ),
        (
            {
                "entries": [
                    {
                        "kind": "decision",
                        "action": "accept",
                        "idempotency_key": "k",
                        "data": {
                            **DECISION,
                            "selection": {"choice": "x", "rationale": "y", "z": 0},
                        },
                    }
                ]
            },
            "/entries/0/data/selection/z",
        ),
        (
            {
                "entries": [
                    {
                        "kind": "task_contract",
                        "action": "revise",
                        "idempotency_key": "k",
                        "data": {"id": "T-1", "patch": {"verification": {"argv": ["x"], "sh": 1}}},
                    }
                ]
            },
            "/entries/0/data/patch/verification/sh",
        ),
        (
            {
                "entries": [
                    {
                        "kind": "change_contract",
                        "action": "open",
                        "idempotency_key": "k",
                        "data": {
                            "kind": "major",
                            "title": "t",
                            "intent": "i",
                            "contract": {"acceptance": [{"id": "A1", "criterion": "c", "y": 1}]},
                        },
                    }
                ]
            },
            "/entries/0/data/contract/acceptance/0/y",
        ),
    ],
)
def test_unknown_fields_are_refused_at_every_level(
    service: DeliveryService, request_: dict[str, Any], pointer: str
) -> None:
    error = refusal(service, request_)
    assert isinstance(error, InvalidInput)
    assert error.code == "VALIDATION_ERROR"
    assert (error.details["pointer"], error.details["problem"]) == (pointer, "UNKNOWN_FIELD")


def test_every_problem_of_an_entry_is_listed_at_once(service: DeliveryService) -> None:
    error = refusal(
        service,
        {
            "entries": [
                {
                    "kind": "change_contract",
                    "action": "open",
                    "idempotency_key": "k",
                    "data": {"kind": "huge", "intent": "why", "colour": "red", "id": "Bad Id"},
                }
            ]
        },
    )
    assert isinstance(error, InvalidInput) and error.code == "VALIDATION_ERROR"
    listed = {(found["pointer"], found["problem"]) for found in error.details["problems"]}
    assert listed == {
        ("/entries/0/data/colour", "UNKNOWN_FIELD"),
        ("/entries/0/data/title", "MISSING_FIELD"),
        ("/entries/0/data/kind", "NOT_ALLOWED"),
        ("/entries/0/data/id", "WRONG_FORMAT"),
    }
    assert error.message.startswith("4 problems: ")


def test_a_malformed_batch_changes_nothing(
    service: DeliveryService, make_entry: Any, count_events: Any
) -> None:
    before = count_events("")
    error = refusal(
        service,
        {
            "entries": [
                make_entry("event", "append", {"type": "seen", "payload": {}}),
                make_entry(
                    "task_contract",
                    "define",
                    {"id": "bad id!", "title": "t", "verification": {"argv": ["x"]}},
                ),
            ]
        },
    )
    assert error.details["pointer"] == "/entries/1/data/id"
    assert count_events("") == before


@pytest.mark.parametrize(
    ("entry_fields", "pointer", "problem"),
    [
        ({"kind": "nonsense", "action": "x"}, "/entries/0/kind", "NOT_ALLOWED"),
        ({"kind": "decision", "action": "approve"}, "/entries/0/action", "NOT_ALLOWED"),
        ({"kind": "event", "action": "append", "idempotency_key": "has space"}, None, None),
    ],
)
def test_unknown_kinds_actions_and_malformed_keys_are_refused(
    service: DeliveryService, entry_fields: dict[str, Any], pointer: str | None, problem: str | None
) -> None:
    entry = {"idempotency_key": "k", "data": {}, **entry_fields}
    error = refusal(service, {"entries": [entry]})
    assert error.code == "VALIDATION_ERROR"
    if pointer is None:
        assert error.details == {
            "pointer": "/entries/0/idempotency_key",
            "problem": "WRONG_FORMAT",
        }
    else:
        assert error.details == {"pointer": pointer, "problem": problem}


def test_requests_are_limited_to_50_entries_and_one_mebibyte(
    service: DeliveryService, make_entry: Any
) -> None:
    many = [make_entry("event", "append", {"type": "seen", "payload": {}}) for _ in range(51)]
    error = refusal(service, {"entries": many})
    assert error.details == {"pointer": "/entries", "problem": "TOO_MANY_ITEMS"}
    huge = make_entry("event", "append", {"type": "seen", "payload": {"blob": "x" * 1_100_000}})
    error = refusal(service, {"entries": [huge]})
    assert error.details == {"pointer": "", "problem": "TOO_LARGE"}


def test_every_kind_records_without_any_baseline(
    service: DeliveryService, make_entry: Any, project: Any
) -> None:
    answer = service.record(
        {
            "entries": [
                make_entry(
                    "change_contract",
                    "open",
                    {"id": "add-login", "kind": "quick", "title": "Add login", "intent": "Go."},
                ),
                make_entry("decision", "accept", {**DECISION, "scope": {"change_id": "add-login"}}),
                make_entry(
                    "task_contract",
                    "define",
                    {
                        "id": "T-1",
                        "title": "Form",
                        "change_id": "add-login",
                        "verification": {"argv": ["pytest"]},
                    },
                ),
                make_entry(
                    "artifact",
                    "bind",
                    {
                        "kind": "research",
                        "scope": {"change_id": "add-login"},
                        "path": "research/notes.md",
                        "content": "notes\n",
                    },
                ),
                make_entry("event", "append", {"type": "manual_check", "payload": {"ok": True}}),
            ]
        }
    )
    assert [result["status"] for result in answer["results"]] == ["committed"] * 5
    assert answer["journal_seq"] == max(result["journal_seq"] for result in answer["results"])
    rows = project.store.connection().execute("SELECT count(*) FROM delivery_baselines")
    assert rows.fetchone()[0] == 0


def test_results_and_top_level_diagnostics_have_the_shared_shape(
    service: DeliveryService, make_entry: Any
) -> None:
    answer = service.record(
        {
            "entries": [
                make_entry(
                    "task_contract",
                    "define",
                    {"id": "T-1", "title": "t", "verification": {"argv": ["x"]}},
                )
            ],
            "session": "host-session-1",
        }
    )
    result = answer["results"][0]
    assert set(result) == {
        "index",
        "kind",
        "action",
        "status",
        "result",
        "diagnostics",
        "journal_seq",
    }
    assert answer["diagnostics"] == result["diagnostics"]
    for found in answer["diagnostics"]:
        assert set(found) <= {"code", "severity", "message", "subject"}
        assert found["severity"] in ("info", "warning", "needs_attention", "hard_conflict")


def test_a_batch_failing_at_entry_3_stops_there_and_a_retry_finishes_it(
    service: DeliveryService, make_entry: Any, count_events: Any
) -> None:
    define = [
        make_entry(
            "task_contract",
            "define",
            {"id": f"T-{n}", "title": f"task {n}", "verification": {"argv": ["pytest"]}},
            key=f"batch-{n}",
        )
        for n in range(3)
    ]
    revise_missing = make_entry(
        "task_contract", "revise", {"id": "T-9", "patch": {"title": "x"}}, key="batch-3"
    )
    last = make_entry("event", "append", {"type": "after", "payload": {}}, key="batch-4")
    batch = {"entries": [*define, revise_missing, last]}

    error = refusal(service, batch)
    assert isinstance(error, NotFound)
    assert error.code == "TASK_NOT_FOUND"
    assert error.details["index"] == 3
    assert error.details["committed"] == [0, 1, 2]
    assert count_events("observation.") == 0
    events_after_failure = count_events("")

    service.record(
        {
            "entries": [
                make_entry(
                    "task_contract",
                    "define",
                    {"id": "T-9", "title": "late", "verification": {"argv": ["pytest"]}},
                )
            ]
        }
    )
    retried = service.record(batch)
    assert [result["status"] for result in retried["results"]] == [
        "replayed",
        "replayed",
        "replayed",
        "committed",
        "committed",
    ]
    # Only the define of T-9, the revise and the observation were new.
    assert count_events("") == events_after_failure + 3


def test_handler_pointers_are_placed_under_the_entry(
    service: DeliveryService, make_entry: Any
) -> None:
    error = refusal(
        service,
        {
            "entries": [
                make_entry("event", "append", {"type": "ok", "payload": {}}),
                make_entry(
                    "task_contract",
                    "define",
                    {
                        "id": "T-1",
                        "title": "t",
                        "verification": {"argv": ["x"]},
                        "files_modified": ["src/a.py", "../outside.py"],
                    },
                ),
            ]
        },
    )
    assert error.code == "PATH_UNSAFE"
    assert error.details["pointer"] == "/entries/1/data/files_modified/0"
    assert error.details["committed"] == [0]
