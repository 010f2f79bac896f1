"""``record event append``: observations go to the journal, and only there."""

from __future__ import annotations

from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.kernel import journal
from ithaca.kernel.errors import InvalidInput


def test_an_observation_is_one_journal_event(record: Any, project: IthacaProject) -> None:
    result = record(
        "event", "append", {"type": "flaky_test", "payload": {"test": "t1"}, "subject": "T-1"}
    )
    event = journal.query(project.store.connection(), kind="observation.flaky_test")[-1]
    assert result["result"]["event"] == {"seq": event["seq"], "kind": "observation.flaky_test"}
    assert (event["actor"], event["subject"], event["payload"]) == ("agent", "T-1", {"test": "t1"})


@pytest.mark.parametrize("event_type", ["task_completed", "checkpoint_accepted", "delivery_x"])
def test_types_that_mimic_state_changes_are_reserved(record: Any, event_type: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        record("event", "append", {"type": event_type, "payload": {}})
    assert caught.value.code == "EVENT_TYPE_RESERVED"


def test_payloads_are_capped_at_8_kib(record: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        record("event", "append", {"type": "big", "payload": {"x": "y" * 9000}})
    assert caught.value.details["problem"] == "TOO_LARGE"
