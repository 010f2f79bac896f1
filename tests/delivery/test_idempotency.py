"""Idempotency keys: a retried ``record`` replays, a reused key with other data is refused,
and keys survive a restart."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ithaca.app import IthacaProject, open_project
from ithaca.delivery.service import DeliveryService
from ithaca.kernel.errors import Conflict

OPEN = {"id": "fix-crash", "kind": "quick", "title": "Fix crash", "intent": "Stop the crash."}


def test_the_same_request_replays_without_a_journal_event(
    record: Any, count_events: Any, state_root: Any
) -> None:
    first = record("change_contract", "open", OPEN, key="open-1")
    events = count_events("")
    again = record("change_contract", "open", OPEN, key="open-1")
    assert first["status"] == "committed"
    assert again["status"] == "replayed"
    assert again["replayed"] is True
    assert again["result"] == first["result"]
    assert again["diagnostics"] == first["diagnostics"]
    assert again["journal_seq"] == first["journal_seq"]
    assert count_events("") == events
    assert (state_root / "changes/active/fix-crash/intent.md").read_text() == "Stop the crash.\n"


def test_a_key_reused_for_other_data_is_a_conflict(record: Any, count_events: Any) -> None:
    record("change_contract", "open", OPEN, key="open-1")
    events = count_events("")
    with pytest.raises(Conflict) as caught:
        record("change_contract", "open", {**OPEN, "title": "Something else"}, key="open-1")
    assert caught.value.code == "IDEMPOTENCY_KEY_REUSED"
    assert count_events("") == events


def test_a_key_reused_for_another_kind_is_a_conflict(record: Any) -> None:
    record("event", "append", {"type": "seen", "payload": {}}, key="shared")
    with pytest.raises(Conflict) as caught:
        record("task_contract", "remove", {"id": "T-1", "reason": "x"}, key="shared")
    assert caught.value.code == "IDEMPOTENCY_KEY_REUSED"


def test_defaults_are_filled_before_digesting(record: Any) -> None:
    define = {"id": "T-1", "title": "t", "verification": {"argv": ["pytest"]}}
    record("task_contract", "define", define, key="define-1")
    explicit = {**define, "deps": [], "files_modified": [], "acceptance": []}
    assert record("task_contract", "define", explicit, key="define-1")["status"] == "replayed"


def test_reordered_set_members_replay(record: Any) -> None:
    define = {
        "id": "T-1",
        "title": "t",
        "verification": {"argv": ["pytest"]},
        "files_modified": ["b.py", "a.py", "a.py"],
    }
    record("task_contract", "define", define, key="define-1")
    reordered = {**define, "files_modified": ["a.py", "b.py"]}
    assert record("task_contract", "define", reordered, key="define-1")["status"] == "replayed"


def test_an_error_stores_no_key(record: Any) -> None:
    with pytest.raises(Exception) as caught:
        record("task_contract", "revise", {"id": "T-1", "patch": {"title": "x"}}, key="k-1")
    assert getattr(caught.value, "code", None) == "TASK_NOT_FOUND"
    record("task_contract", "define", {"id": "T-1", "title": "t", "verification": {"argv": ["x"]}})
    answer = record("task_contract", "revise", {"id": "T-1", "patch": {"title": "x"}}, key="k-1")
    assert answer["status"] == "committed"


def test_replay_after_restart(project_dir: Any, make_entry: Any) -> None:
    request = {"entries": [make_entry("change_contract", "open", OPEN, key="open-r")]}
    first_project = open_project(project_dir)
    first = DeliveryService(first_project.project, first_project.store, first_project.config)
    committed = first.record(request)
    first_project.close()

    second_project: IthacaProject = open_project(project_dir)
    try:
        second = DeliveryService(
            second_project.project, second_project.store, second_project.config
        )
        replayed = second.record(request)
    finally:
        second_project.close()
    assert replayed["results"][0]["status"] == "replayed"
    assert replayed["results"][0]["result"] == committed["results"][0]["result"]


def test_keys_never_expire(record: Any, project: IthacaProject) -> None:
    first = record("event", "append", {"type": "seen", "payload": {"n": 0}}, key="oldest")
    with project.store.write() as conn:
        conn.executemany(
            "INSERT INTO delivery_idempotency (key, tool, request_digest, result, journal_seq,"
            " created_at) VALUES (?, 'record', ?, '{}', NULL, '2020-01-01T00:00:00.000Z')",
            [(f"filler-{n}", f"{n:064x}") for n in range(10_000)],
        )
    again = record("event", "append", {"type": "seen", "payload": {"n": 0}}, key="oldest")
    assert again["status"] == "replayed"
    assert again["result"] == first["result"]


def test_racing_requests_with_one_key_commit_once(
    service: DeliveryService, count_events: Any, make_entry: Any
) -> None:
    request = {"entries": [make_entry("change_contract", "open", OPEN, key="race")]}
    statuses: list[str] = []

    def send() -> None:
        statuses.append(service.record(request)["results"][0]["status"])

    threads = [threading.Thread(target=send) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(statuses) == ["committed", "replayed", "replayed"]
    assert count_events("delivery.change_opened") == 1
