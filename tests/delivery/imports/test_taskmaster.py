"""Task Master's ``.taskmaster/tasks/tasks.json`` (tagged and legacy) as changes and tasks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.delivery.imports.conftest import (
    SOURCES,
    Import,
    change_of,
    listed,
    snapshot,
    task_ids,
    task_of,
)

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService
from ithaca.kernel.errors import InvalidInput

SOURCE = SOURCES["taskmaster"]


def test_each_tag_becomes_a_change_and_each_open_task_a_task_contract(
    run_import: Import, service: DeliveryService, project: IthacaProject
) -> None:
    answer = run_import(SOURCE)
    assert answer["format"] == "taskmaster"
    assert [change["id"] for change in answer["changes"]] == ["tm-master", "tm-shopping-list"]
    assert change_of(service, "tm-master")["title"] == "Task Master tag master"
    assert task_ids(project) == {
        "tm-master.2",
        "tm-master.2.2",
        "tm-master.2.3",
        "tm-master.3",
        "tm-master.4",
        "tm-shopping-list.1",
        "tm-shopping-list.2",
    }
    tasks = listed(answer)
    assert tasks["tm-master.2.3"]["peer_id"] == "master/2.3"
    assert {task["status"] for task in tasks.values()} == {"created"}


def test_dependencies_keep_task_masters_meaning_under_the_new_ids(
    run_import: Import, service: DeliveryService
) -> None:
    run_import(SOURCE)
    # Top-level numbers name tasks, "2.2" a subtask, a subtask's bare number a sibling.
    assert task_of(service, "tm-master.4")["contract"]["deps"] == ["tm-master.2", "tm-master.3"]
    assert task_of(service, "tm-master.3")["contract"]["deps"] == ["tm-master.2.2"]
    assert task_of(service, "tm-master.2.3")["contract"]["deps"] == ["tm-master.2.2"]
    assert task_of(service, "tm-shopping-list.2")["contract"]["deps"] == ["tm-shopping-list.1"]


def test_subtasks_are_defined_under_their_parent(
    run_import: Import, service: DeliveryService
) -> None:
    run_import(SOURCE)
    child = task_of(service, "tm-master.2.2")
    assert child["parent_id"] == "tm-master.2"
    assert task_of(service, "tm-master.2")["status"] == "expanded"


def test_done_tasks_are_left_out_and_dependencies_on_them_are_met(
    run_import: Import, service: DeliveryService, state_root: Path
) -> None:
    answer = run_import(SOURCE)
    skipped = {(item["kind"], item["peer_id"]) for item in answer["skipped"]}
    assert skipped == {("task", "master/1"), ("task", "master/2.1")}
    # 2.2 depended on the done 2.1; 2 on the done 1.
    assert task_of(service, "tm-master.2.2")["contract"]["deps"] == []
    assert task_of(service, "tm-master.2")["contract"]["deps"] == []
    codes = {found["code"] for found in answer["diagnostics"]}
    assert "IMPORT_DEPS_MET" in codes
    mapping = json.loads(
        (state_root / "changes/active/tm-master/delivery/import-map.json").read_text()
    )
    assert {"kind": "task", "peer_id": "1", "reason": "done in Task Master"} in mapping[
        "not_imported"
    ]


def test_the_peer_fields_land_in_the_task_contract(
    run_import: Import, service: DeliveryService
) -> None:
    run_import(SOURCE)
    contract = task_of(service, "tm-master.2")["contract"]
    assert contract["title"] == "Store recipes in SQLite"
    assert contract["priority"] == "high"
    assert contract["description"].startswith("Persist recipes with their ingredients and steps.")
    assert "src/recipes/db.py" in contract["description"]
    assert contract["description"].endswith("Imported from Task Master task 2 (tag master).")
    assert contract["files_modified"] == ["src/recipes/db.py"]
    assert contract["acceptance"] == [
        {"id": "test-strategy", "criterion": "Unit tests insert, read back and delete a recipe."}
    ]
    criteria = task_of(service, "tm-master.2.3")["contract"]["acceptance"]
    assert [item["criterion"] for item in criteria] == [
        "Searching 'soup' finds 'Tomato soup'",
        "Deleting a recipe removes it from the index",
    ]


def test_a_task_without_a_verification_command_gets_one_that_fails_and_says_why(
    run_import: Import, service: DeliveryService
) -> None:
    answer = run_import(SOURCE)
    argv = task_of(service, "tm-master.3")["contract"]["verification"]["argv"]
    ran = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert ran.returncode == 1
    assert "tm-master.3" in ran.stderr and "task_contract revise" in ran.stderr
    assert "IMPORT_VERIFICATION_MISSING" in {found["code"] for found in answer["diagnostics"]}


def test_the_id_mapping_is_kept_in_the_change_folder(run_import: Import, state_root: Path) -> None:
    answer = run_import(SOURCE)
    change = answer["changes"][0]
    assert change["map"]["path"] == ".ithaca/changes/active/tm-master/delivery/import-map.json"
    mapping = json.loads(
        (state_root / "changes/active/tm-master/delivery/import-map.json").read_text()
    )
    assert mapping["format"] == "taskmaster"
    assert mapping["source"] == ".taskmaster/tasks/tasks.json"
    assert mapping["unit"] == "master"
    assert {"kind": "task", "peer_id": "2.3", "id": "tm-master.2.3"} in mapping["records"]
    assert {"kind": "change", "peer_id": "master", "id": "tm-master"} in mapping["records"]


def test_the_file_itself_and_the_legacy_format_are_read(
    run_import: Import, service: DeliveryService, tmp_path: Path
) -> None:
    legacy = tmp_path / "old" / "tasks" / "tasks.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_text(
        json.dumps(
            {
                "tasks": [
                    {"id": 1, "title": "Write the parser", "status": "pending", "dependencies": []},
                    {"id": 2, "title": "Wire the CLI", "status": "pending", "dependencies": [1]},
                ]
            },
            indent=2,
        )
    )
    answer = run_import(legacy)
    assert answer["format"] == "taskmaster"
    assert task_of(service, "tm-master.2")["contract"]["deps"] == ["tm-master.1"]
    direct = run_import(SOURCE / ".taskmaster" / "tasks" / "tasks.json", dry_run=True)
    assert direct["format"] == "taskmaster"


def test_malformed_json_is_refused_with_its_line_and_changes_nothing(
    run_import: Import, project: IthacaProject, tmp_path: Path
) -> None:
    broken = tmp_path / ".taskmaster" / "tasks" / "tasks.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{\n  "master": {\n    "tasks": [\n      {"id": 1,,}\n')
    before = snapshot(project)
    with pytest.raises(InvalidInput) as caught:
        run_import(tmp_path)
    assert caught.value.code == "IMPORT_JSON_INVALID"
    assert "line 4" in caught.value.message
    assert snapshot(project) == before


def test_a_dependency_on_a_task_that_does_not_exist_is_refused(
    run_import: Import, project: IthacaProject, tmp_path: Path
) -> None:
    source = tmp_path / "tasks.json"
    source.write_text(
        json.dumps(
            {
                "master": {
                    "tasks": [
                        {"id": 1, "title": "Ship it", "status": "pending", "dependencies": [7]},
                    ],
                    "metadata": {"description": "Tasks for master context"},
                }
            }
        )
    )
    before = snapshot(project)
    with pytest.raises(InvalidInput) as caught:
        run_import(source)
    assert caught.value.code == "IMPORT_DEP_UNKNOWN"
    assert caught.value.details["missing"] == [{"task": "master/1", "depends_on": "7"}]
    assert "fix the dependency" in caught.value.message
    assert snapshot(project) == before


def test_a_dependency_cycle_is_refused(run_import: Import, tmp_path: Path) -> None:
    source = tmp_path / "tasks.json"
    tasks = [
        {"id": 1, "title": "First", "status": "pending", "dependencies": [3]},
        {"id": 2, "title": "Second", "status": "pending", "dependencies": [1]},
        {"id": 3, "title": "Third", "status": "pending", "dependencies": [2]},
    ]
    source.write_text(json.dumps({"master": {"tasks": tasks}}))
    with pytest.raises(InvalidInput) as caught:
        run_import(source)
    assert caught.value.code == "IMPORT_DEP_CYCLE"
    assert len(caught.value.details["cycle"]) == 4


def test_a_tag_without_a_task_list_is_not_task_masters_format(
    run_import: Import, tmp_path: Path
) -> None:
    source = tmp_path / ".taskmaster" / "tasks" / "tasks.json"
    source.parent.mkdir(parents=True)
    source.write_text(json.dumps({"master": {"tasks": "none"}}))
    with pytest.raises(InvalidInput) as caught:
        run_import(tmp_path)
    assert caught.value.code == "IMPORT_SOURCE_INVALID"
