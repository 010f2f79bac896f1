"""An Ultra Builder Pro ``.ultra/`` project: changes, tasks, decisions and checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.delivery.imports.conftest import (
    SOURCES,
    Import,
    change_of,
    copy_source,
    listed,
    snapshot,
    task_ids,
    task_of,
)

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService
from ithaca.kernel.errors import InvalidInput

SOURCE = SOURCES["ultra"]


def test_active_changes_and_their_open_tasks_come_in_with_their_ids(
    run_import: Import, service: DeliveryService, project: IthacaProject
) -> None:
    answer = run_import(SOURCE)
    assert answer["format"] == "ultra"
    assert [change["id"] for change in answer["changes"]] == ["change-meal-plan"]
    assert task_ids(project) == {
        "task-plan-repo",
        "task-plan-cli",
        "task-plan-cli-errors",
        "task-docs-refresh",
    }
    skipped = {(item["kind"], item["peer_id"]) for item in answer["skipped"]}
    assert ("change", "change-recipe-tags") in skipped  # archived
    assert ("task", "task-plan-schema") in skipped  # completed


def test_the_change_contract_carries_over(run_import: Import, service: DeliveryService) -> None:
    run_import(SOURCE)
    change = change_of(service, "change-meal-plan")
    assert change["kind"] == "standard"
    assert change["contract"]["outcome"] == (
        "A household plans a week of meals from the command line."
    )
    assert change["contract"]["recovery"] == {
        "strategy": "Drop the plan_slots table.",
        "verification": "pytest -q",
    }
    assert change["classification"]["risk_flags"] == ["schema_change"]
    assert change["research_disposition"] == "bounded"
    assert change["profile_gaps"] == []


def test_unresolved_decisions_stay_in_sight_in_the_intent(
    run_import: Import, state_root: Path
) -> None:
    run_import(SOURCE)
    intent = (state_root / "changes/active/change-meal-plan/intent.md").read_text()
    assert intent.startswith("# Weekly meal plan")
    assert "ud-week-start: Does a week start on Monday or Sunday?" in intent


def test_a_task_keeps_its_contract_its_command_and_its_dependencies(
    run_import: Import, service: DeliveryService
) -> None:
    run_import(SOURCE)
    repo = task_of(service, "task-plan-repo")["contract"]
    assert repo["verification"]["argv"] == ["sh", "-c", "pytest -q tests/test_plan.py"]
    assert repo["files_modified"] == ["src/recipes/plan.py", "tests/test_plan.py"]
    assert repo["acceptance"] == [
        {
            "id": "repo-fill",
            "criterion": "Filling a slot twice keeps the last recipe — verify: pytest -q"
            " tests/test_plan.py -k fill",
        }
    ]
    assert repo["deps"] == []  # task-plan-schema is completed in Ultra Builder Pro
    assert "Public seam: recipes.plan.PlanRepository" in repo["description"]
    assert repo["priority"] == "P1"
    assert task_of(service, "task-plan-cli")["contract"]["deps"] == ["task-plan-repo"]
    errors = task_of(service, "task-plan-cli-errors")
    assert errors["parent_id"] == "task-plan-cli"
    # A task of no change stays of no change, and keeps its dependency across.
    loose = task_of(service, "task-docs-refresh")
    assert loose["change_id"] is None
    assert loose["contract"]["deps"] == ["task-plan-cli"]


def test_decisions_become_decision_records_in_their_scope_with_the_supersession(
    run_import: Import, state_root: Path
) -> None:
    answer = run_import(SOURCE)
    decisions = listed(answer, "decisions")
    assert set(decisions) == {
        "dec-storage-sqlite",
        "dec-plan-granularity",
        "dec-plan-granularity-meals",
    }
    later = json.loads(
        (
            state_root / "changes/active/change-meal-plan/decisions/dec-plan-granularity-meals.json"
        ).read_text()
    )
    assert later["supersedes"] == "dec-plan-granularity"
    assert later["selection"]["choice"] == "One recipe per day and meal."
    assert later["effects"] == ["model: day_and_meal"]
    assert later["provenance"] == {
        "source": "owner",
        "evidence_refs": [
            ".ultra/changes/active/change-meal-plan/decisions/dec-plan-granularity-meals.json"
        ],
    }
    baseline = json.loads((state_root / "decisions/baseline/dec-storage-sqlite.json").read_text())
    assert baseline["scope"] == {"type": "baseline", "id": None}


def test_accepted_checkpoints_become_accepted_checkpoints_of_the_same_scope(
    run_import: Import, service: DeliveryService, state_root: Path
) -> None:
    answer = run_import(SOURCE)
    assert set(listed(answer, "checkpoints")) == {
        "plan:change:change-meal-plan",
        "test:task:task-plan-repo",
    }
    seen = service.context({"scope": {"task_id": "task-plan-repo"}, "detail": "full"})
    stages = {item["stage"]: item["status"] for item in seen["checkpoints"]}
    assert stages == {"plan": "accepted", "test": "accepted"}
    plan = json.loads((state_root / "changes/active/change-meal-plan/plan.json").read_text())
    # The expanded parent runs through its subtask, as Ithaca plans it.
    assert {task["id"] for task in plan["tasks"]} == {"task-plan-repo", "task-plan-cli-errors"}
    skipped = {item["peer_id"]: item["reason"] for item in answer["skipped"]}
    assert "no 'init' stage" in skipped["init:project:recipe-box"]
    assert skipped["review:task:task-tags-1"] == "its task is finished work"


def test_the_test_checkpoint_keeps_its_result(run_import: Import, project: IthacaProject) -> None:
    run_import(SOURCE)
    row = (
        project.store.connection()
        .execute(
            "SELECT payload FROM delivery_checkpoints WHERE stage = 'test' AND status = 'accepted'"
        )
        .fetchone()
    )
    payload = json.loads(row[0])
    assert payload["data"] == {
        "result": "pass",
        "command": "pytest -q tests/test_plan.py",
        "counts": {"passed": 6, "failed": 0},
    }
    assert payload["summary"].startswith("Repository tests pass.")


def test_a_ledger_of_another_schema_version_is_refused(
    run_import: Import, project: IthacaProject, tmp_path: Path
) -> None:
    source = copy_source("ultra", tmp_path)
    ledger = source / ".ultra" / "tasks" / "tasks.json"
    value = json.loads(ledger.read_text())
    value["schema_version"] = "3.0"
    ledger.write_text(json.dumps(value))
    before = snapshot(project)
    with pytest.raises(InvalidInput) as caught:
        run_import(source)
    assert caught.value.code == "IMPORT_FORMAT_UNSUPPORTED"
    assert snapshot(project) == before


def test_a_task_of_a_change_the_ledger_lacks_is_refused(run_import: Import, tmp_path: Path) -> None:
    source = copy_source("ultra", tmp_path)
    ledger = source / ".ultra" / "tasks" / "tasks.json"
    value = json.loads(ledger.read_text())
    value["tasks"][1]["change_id"] = "change-nowhere"
    ledger.write_text(json.dumps(value))
    with pytest.raises(InvalidInput) as caught:
        run_import(source)
    assert caught.value.code == "IMPORT_SOURCE_INVALID"
    assert "change-nowhere" in caught.value.message


def test_a_dependency_on_a_task_the_ledger_lacks_is_refused(
    run_import: Import, project: IthacaProject, tmp_path: Path
) -> None:
    source = copy_source("ultra", tmp_path)
    ledger = source / ".ultra" / "tasks" / "tasks.json"
    value = json.loads(ledger.read_text())
    value["tasks"][2]["deps"] = ["task-plan-repo", "task-ghost"]
    ledger.write_text(json.dumps(value))
    before = snapshot(project)
    with pytest.raises(InvalidInput) as caught:
        run_import(source)
    assert caught.value.code == "IMPORT_DEP_UNKNOWN"
    assert caught.value.details["missing"] == [
        {"task": "task-plan-cli", "depends_on": "task-ghost"}
    ]
    assert snapshot(project) == before
