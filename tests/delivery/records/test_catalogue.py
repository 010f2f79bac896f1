"""The record catalogue: every example is an entry a real project takes, and the field
list covers every kind and action ``record`` knows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ithaca.delivery.records import catalogue
from ithaca.delivery.schemas.dialect import check
from ithaca.delivery.schemas.record import KINDS, actions_of
from ithaca.kernel.errors import InvalidInput

# The examples in an order a project can take them all, one after the other.
IN_ORDER = [
    ("baseline", "initialize"),
    ("baseline", "start"),
    ("baseline", "observe"),
    ("baseline", "revise"),
    ("change_contract", "open"),
    ("change_contract", "revise"),
    ("decision", "accept"),
    ("decision", "defer"),
    ("task_contract", "define"),
    ("task_contract", "revise"),
    ("artifact", "bind"),
    ("event", "append"),
    ("baseline", "accept"),
    ("task_contract", "remove"),
    ("change_contract", "cancel"),
]
# A task outcome needs an execution session (and, to complete, its Worker Packet).
NEEDS_A_SESSION = {("task_outcome", action) for action in actions_of("task_outcome")}


def test_every_entry_has_an_example() -> None:
    known = {(kind, action) for kind in KINDS for action in actions_of(kind)}
    assert set(catalogue.EXAMPLES) == known == set(IN_ORDER) | NEEDS_A_SESSION


def test_every_example_is_taken_by_a_real_project(record: Callable[..., Any]) -> None:
    for kind, action in IN_ORDER:
        answer = record(kind, action, catalogue.example(kind, action))
        assert answer["status"] == "committed", (kind, action, answer)


@pytest.mark.parametrize("entry", sorted(NEEDS_A_SESSION))
def test_the_session_examples_pass_their_schema(entry: tuple[str, str]) -> None:
    assert check(catalogue.SCHEMAS[entry], catalogue.example(*entry))


def test_the_field_list_names_every_action_and_marks_required_fields() -> None:
    text = catalogue.fields_text()
    for kind in KINDS:
        assert f"{kind}:" in text
        for action in actions_of(kind):
            assert f"  {action}: " in text
    assert "  define: id*=id title*=text verification*={argv*,cwd,timeout_s}" in text


def test_an_unknown_entry_names_the_ones_that_exist() -> None:
    with pytest.raises(InvalidInput) as caught:
        catalogue.example("task_contract", "finish")
    assert caught.value.code == "RECORD_UNKNOWN"
    assert "task_contract define" in caught.value.message
