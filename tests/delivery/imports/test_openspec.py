"""An OpenSpec ``openspec/changes/`` folder: proposals, checkbox tasks, design and deltas."""

from __future__ import annotations

from pathlib import Path

from tests.delivery.imports.conftest import SOURCES, Import, change_of, listed, task_ids, task_of

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService

SOURCE = SOURCES["openspec"]
CHANGES = SOURCE / "openspec" / "changes"


def test_each_change_folder_becomes_a_change_and_the_archive_is_left_out(
    run_import: Import, service: DeliveryService
) -> None:
    answer = run_import(SOURCE)
    assert answer["format"] == "openspec"
    assert [change["id"] for change in answer["changes"]] == [
        "add-meal-planner",
        "fix-serving-scaling",
    ]
    assert {"kind": "change", "peer_id": "2025-05-20-add-recipe-search"} in [
        {"kind": item["kind"], "peer_id": item["peer_id"]} for item in answer["skipped"]
    ]
    # A proposal without a heading is named after its folder; "# Change: X" gives X.
    assert change_of(service, "add-meal-planner")["title"] == "Add meal planner"
    assert (
        change_of(service, "fix-serving-scaling")["title"] == "Fix rounding when scaling servings"
    )


def test_the_proposal_is_the_intent(run_import: Import, state_root: Path) -> None:
    run_import(SOURCE)
    intent = (state_root / "changes/active/add-meal-planner/intent.md").read_text()
    assert intent.startswith("## Why\nPeople pick recipes for the week by hand")
    assert "## What Changes" in intent and "## Impact" in intent
    assert "Imported from OpenSpec change `add-meal-planner`" in intent


def test_checkbox_tasks_keep_their_numbers_and_run_in_the_listed_order(
    run_import: Import, service: DeliveryService, project: IthacaProject
) -> None:
    answer = run_import(SOURCE)
    assert {task for task in task_ids(project) if task.startswith("add-meal-planner")} == {
        "add-meal-planner.1.2",
        "add-meal-planner.2.1",
        "add-meal-planner.2.1.1",
        "add-meal-planner.2.1.2",
        "add-meal-planner.2.2",
        "add-meal-planner.3.1",
    }
    deps = {task_id: item["deps"] for task_id, item in listed(answer).items()}
    assert deps["add-meal-planner.1.2"] == []  # after 1.1, which is checked off
    assert deps["add-meal-planner.2.1"] == ["add-meal-planner.1.2"]
    # A subtask follows what came before its parent, then its elder sibling.
    assert deps["add-meal-planner.2.1.1"] == ["add-meal-planner.1.2"]
    assert deps["add-meal-planner.2.1.2"] == ["add-meal-planner.2.1.1"]
    assert deps["add-meal-planner.2.2"] == ["add-meal-planner.2.1.2"]
    assert deps["fix-serving-scaling.1.2"] == ["fix-serving-scaling.1.1"]
    assert task_of(service, "add-meal-planner.2.1.1")["parent_id"] == "add-meal-planner.2.1"
    assert task_of(service, "add-meal-planner.2.1")["status"] == "expanded"


def test_a_verify_clause_becomes_the_acceptance_criterion_and_paths_the_declared_files(
    run_import: Import, service: DeliveryService
) -> None:
    run_import(SOURCE)
    contract = task_of(service, "add-meal-planner.1.2")["contract"]
    assert contract["title"] == "Write the plan repository in src/recipes/plan.py"
    assert contract["acceptance"] == [
        {"id": "verify", "criterion": "unit tests fill and clear a week"}
    ]
    assert contract["files_modified"] == ["src/recipes/plan.py"]
    assert "Group: 1. Storage" in contract["description"]
    scale = task_of(service, "fix-serving-scaling.1.2")["contract"]
    assert scale["files_modified"] == ["tests/test_scale.py"]


def test_design_and_delta_specs_are_copied_into_the_change(
    run_import: Import, state_root: Path
) -> None:
    answer = run_import(SOURCE)
    folder = state_root / "changes/active/add-meal-planner"
    assert (folder / "documentation/design.md").read_text() == (
        CHANGES / "add-meal-planner/design.md"
    ).read_text()
    assert (
        (folder / "delta/specs/meal-plans/spec.md").read_text().startswith("## ADDED Requirements")
    )
    documents = answer["changes"][0]["documents"]
    assert {item["artifact_kind"] for item in documents} == {"documentation", "delta"}


def test_one_change_folder_or_its_proposal_can_be_imported_alone(
    run_import: Import, project: IthacaProject
) -> None:
    answer = run_import(CHANGES / "fix-serving-scaling" / "proposal.md")
    assert [change["id"] for change in answer["changes"]] == ["fix-serving-scaling"]
    assert task_ids(project) == {"fix-serving-scaling.1.1", "fix-serving-scaling.1.2"}
