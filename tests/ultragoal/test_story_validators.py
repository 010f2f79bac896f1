"""Stories bound to a validator: approvable only after a passing run since the last
change, snapshotted at ingestion, and checked again at completion."""

from __future__ import annotations

from typing import Any

import pytest

from ithaca.kernel.errors import IthacaError
from ithaca.validators.notebooks import NotebookService

JUDGE = (
    "from tb_validate import observed, pass_, fail\n"
    "pass_('ok') if observed().get('ok') else fail('not ok')\n"
)


@pytest.fixture
def cell(ug: Any) -> dict[str, str]:
    service = ug.service
    notebooks = NotebookService(service.project, service.store, service.config)
    notebook = notebooks.create({"title": "checks"})["notebookId"]
    made = notebooks.add_cell({"notebookId": notebook, "source": JUDGE, "filename": "check.py"})
    return {"notebookId": notebook, "cellId": made["cellId"]}


def approve(ug: Any) -> dict[str, Any]:
    return dict(
        ug.call(
            "record_story_verdict",
            id="A",
            verdict="APPROVE",
            evidence_refs=[ug.write("evidence/A.txt")],
            verifier="self-check",
        )
    )


def test_a_bound_story_is_approvable_only_after_a_passing_run_since_its_change(
    ug: Any, cell: dict[str, str]
) -> None:
    ug.pursue({**ug.STORY_A, "validator": cell})
    shown = ug.call("get")["state"]["stories"][0]["validator"]
    assert set(shown) == {"notebookId", "cellId", "snapshot_sha256", "language"}
    with pytest.raises(IthacaError) as refused:
        approve(ug)
    assert refused.value.code == "STORY_VALIDATOR_NOT_PASSED"

    failing = ug.call("run_story_validator", id="A", observed={"ok": False})
    assert (failing["pass"], failing["reason"]) == (False, "not ok")
    with pytest.raises(IthacaError) as still:
        approve(ug)
    assert still.value.code == "STORY_VALIDATOR_NOT_PASSED"

    passing = ug.call("run_story_validator", id="A", observed={"ok": True})
    assert passing["pass"] is True
    assert passing["snapshot_sha256"] == shown["snapshot_sha256"]
    assert approve(ug)["validator_run_id"] == passing["run_id"]

    ug.submit(ug.artifact())
    ug.call("set_verdict", verdict="APPROVE")
    assert ug.call("request_complete")["phase"] == "complete"


def test_a_revision_voids_earlier_passes(ug: Any, cell: dict[str, str]) -> None:
    ug.call("set", phase="planning", outcome=ug.OUTCOME, verification_surface=ug.SURFACE)
    ug.call("set_stories", stories=[{**ug.STORY_A, "validator": cell}])
    assert ug.call("run_story_validator", id="A", observed={"ok": True})["pass"] is True
    ug.call("revise_story", id="A", patch={"story": "reworded"}, evidence="e", rationale="r")
    ug.as_user("confirm_all_stories")
    ug.call("set", phase="pursuing", completion_evidence=[ug.write("evidence/final.txt")])
    with pytest.raises(IthacaError) as refused:
        approve(ug)
    assert refused.value.code == "STORY_VALIDATOR_NOT_PASSED"


def test_completion_rechecks_the_validator_gate(ug: Any, cell: dict[str, str]) -> None:
    ug.pursue({**ug.STORY_A, "validator": cell})
    ug.call("run_story_validator", id="A", observed={"ok": True})
    approve(ug)
    ug.submit(ug.artifact())
    ug.call("set_verdict", verdict="APPROVE")
    with ug.service.store.write() as tx:  # behind Ithaca's back: the pass disappears
        tx.execute("UPDATE ultragoal_validator_run SET pass = 0")
    with pytest.raises(IthacaError) as refused:
        ug.call("request_complete")
    assert [(f["gate"], f["code"]) for f in refused.value.details["failed"]] == [
        (6, "STORY_VALIDATOR_NOT_PASSED")
    ]


def test_later_notebook_edits_do_not_change_the_bound_snapshot(
    ug: Any, cell: dict[str, str]
) -> None:
    ug.pursue({**ug.STORY_A, "validator": cell})
    notebooks = NotebookService(ug.service.project, ug.service.store, ug.service.config)
    notebooks.update_cell({**cell, "source": "from tb_validate import fail\nfail('edited')\n"})
    assert ug.call("run_story_validator", id="A", observed={"ok": True})["pass"] is True
