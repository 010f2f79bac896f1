"""The ``record`` tool's description names every kind with every action it takes, so an
agent reading ``tools/list`` can find ``task_outcome`` without guessing."""

from __future__ import annotations

from ithaca.delivery.records.tool import RECORD_DESCRIPTION
from ithaca.delivery.schemas.record import KINDS, actions_of


def test_the_description_lists_every_kind_and_its_actions() -> None:
    text = " ".join(RECORD_DESCRIPTION.split())
    for kind in KINDS:
        assert f"{kind} {'|'.join(actions_of(kind))}" in text, kind
