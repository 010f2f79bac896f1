"""A sync pauses the garbage collector for its bulk work and always gives it back."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.ledger import bulk as ledger_bulk
from ithaca.delivery.ledger.format import LEDGER_PATH
from ithaca.delivery.sync import tool as sync
from ithaca.kernel.errors import Corrupt


def test_the_collector_runs_again_after_a_sync_that_failed(project: IthacaProject):
    ledger = Path(project.project.state_root) / LEDGER_PATH
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text("<<<<<<< ours\n", encoding="utf-8")
    request = {"action": "import", "idempotency_key": "bulk-1"}
    with pytest.raises(Corrupt):
        sync.sync(project.project, project.store, project.config, request)
    assert gc.isenabled()


def test_a_collector_the_caller_switched_off_stays_off():
    gc.disable()
    try:
        with ledger_bulk.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nested_pauses_resume_once_at_the_outermost():
    with ledger_bulk.paused():
        with ledger_bulk.paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
