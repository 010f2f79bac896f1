"""Importing again: the same source creates nothing; a changed one says what differs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.delivery.imports.conftest import (
    SOURCES,
    Import,
    copy_source,
    listed,
    snapshot,
    task_ids,
    task_of,
)

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService
from ithaca.kernel.errors import Conflict


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_importing_the_same_source_twice_creates_nothing_the_second_time(
    name: str, run_import: Import, project: IthacaProject, count_events: Callable[..., int]
) -> None:
    first = run_import(SOURCES[name])
    assert first["counts"]["created"] > 0
    events = count_events()
    before = snapshot(project)
    again = run_import(SOURCES[name])
    assert again["counts"]["created"] == 0
    assert again["counts"]["unchanged"] == first["counts"]["created"]
    assert again["journal_seq"] is None
    assert count_events() == events
    assert snapshot(project) == before


def tm_tasks(source: Path) -> tuple[Path, dict[str, object]]:
    path = source / ".taskmaster" / "tasks" / "tasks.json"
    return path, json.loads(path.read_text())


def test_a_changed_source_reports_what_differs_and_adds_only_what_is_new(
    run_import: Import, service: DeliveryService, project: IthacaProject, tmp_path: Path
) -> None:
    source = copy_source("taskmaster", tmp_path)
    run_import(source)
    path, value = tm_tasks(source)
    master = value["master"]["tasks"]  # type: ignore[index]  # the file's own shape
    master[2]["title"] = "Import recipes from a URL or a file"
    master[2]["priority"] = "high"
    master.append(
        {
            "id": 5,
            "title": "Export a recipe as Markdown",
            "description": "One file per recipe.",
            "status": "pending",
            "dependencies": [3],
            "priority": "low",
            "subtasks": [],
        }
    )
    path.write_text(json.dumps(value, indent=2))
    answer = run_import(source)
    tasks = listed(answer)
    assert tasks["tm-master.3"]["status"] == "differs"
    assert tasks["tm-master.3"]["differs"] == ["priority", "title"]
    assert tasks["tm-master.5"]["status"] == "created"
    assert tasks["tm-master.5"]["deps"] == ["tm-master.3"]
    assert tasks["tm-master.4"]["status"] == "unchanged"
    # Ithaca's contract is not overwritten, and nothing is duplicated.
    assert task_of(service, "tm-master.3")["contract"]["title"] == "Import recipes from a URL"
    assert len([task for task in task_ids(project) if task.startswith("tm-master")]) == 6
    # The mapping now lists the new task: the artifact is bound again.
    assert answer["changes"][0]["map"]["status"] == "updated"
    again = run_import(source)
    assert listed(again)["tm-master.3"]["status"] == "differs"
    assert again["counts"]["created"] == again["counts"]["updated"] == 0


def test_work_the_peer_finished_after_the_import_is_reported_not_completed(
    run_import: Import, service: DeliveryService, tmp_path: Path
) -> None:
    source = copy_source("taskmaster", tmp_path)
    run_import(source)
    path, value = tm_tasks(source)
    value["master"]["tasks"][2]["status"] = "done"  # type: ignore[index]  # the file's shape
    path.write_text(json.dumps(value, indent=2))
    answer = run_import(source)
    notes = [found for found in answer["diagnostics"] if found["code"] == "IMPORT_PEER_DONE"]
    assert [note["subject"] for note in notes] == ["tm-master.3"]
    assert notes[0]["severity"] == "needs_attention"
    assert task_of(service, "tm-master.3")["status"] == "pending"


def test_the_source_is_recognised_wherever_it_lies(
    run_import: Import, project: IthacaProject, tmp_path: Path
) -> None:
    source = copy_source("speckit", tmp_path)
    first = run_import(source)
    moved = tmp_path / "elsewhere"
    shutil.move(source, moved)
    before = snapshot(project)
    answer = run_import(moved)
    assert answer["counts"]["created"] == 0
    # Known by its keys, not its path: each item is the one already there, unchanged.
    assert answer["counts"]["unchanged"] == first["counts"]["created"]
    assert snapshot(project) == before


def test_records_already_brought_by_the_team_ledger_are_left_as_they_are(
    run_import: Import, project: IthacaProject
) -> None:
    """A teammate imported the source; this checkout has the records but not their keys."""
    run_import(SOURCES["ultra"])
    with project.store.write() as conn:
        conn.execute("DELETE FROM delivery_idempotency")
    events = project.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0]
    answer = run_import(SOURCES["ultra"])
    assert answer["counts"]["created"] == 0
    assert {item["status"] for item in listed(answer).values()} == {"present"}
    after = project.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0]
    assert after == events


def test_an_id_held_by_a_record_the_import_did_not_make_is_refused_before_any_write(
    run_import: Import,
    record: Callable[..., dict[str, object]],
    project: IthacaProject,
) -> None:
    record(
        "change_contract",
        "open",
        {"id": "tm-master", "kind": "quick", "title": "Something else", "intent": "# Other\n"},
    )
    before = snapshot(project)
    with pytest.raises(Conflict) as caught:
        run_import(SOURCES["taskmaster"])
    assert caught.value.code == "IMPORT_ID_TAKEN"
    assert caught.value.details["taken"][0]["id"] == "tm-master"
    assert "Nothing was imported" in caught.value.message
    assert snapshot(project) == before
