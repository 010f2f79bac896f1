"""spec-kit's ``specs/<feature>/tasks.md``: phases, [P] markers, stories, explicit deps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.delivery.imports.conftest import SOURCES, Import, change_of, listed, task_ids, task_of

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService

SOURCE = SOURCES["speckit"]
FEATURE = SOURCE / "specs" / "001-recipe-sharing"


def deps_of(answer: dict[str, Any], task: str) -> set[str]:
    item = listed(answer)[f"001-recipe-sharing.{task}"]
    return {dep.split(".")[-1] for dep in item["deps"]}


def test_a_feature_becomes_a_change_whose_intent_is_its_spec(
    run_import: Import, service: DeliveryService, state_root: Path
) -> None:
    answer = run_import(SOURCE)
    assert answer["format"] == "speckit"
    change = change_of(service, "001-recipe-sharing")
    assert change["title"] == "Recipe sharing"
    intent = (state_root / "changes/active/001-recipe-sharing/intent.md").read_text()
    assert intent.startswith("# Feature Specification: Recipe sharing")


def test_every_open_task_is_imported_and_checked_ones_are_left_out(
    run_import: Import, project: IthacaProject
) -> None:
    answer = run_import(SOURCE)
    assert task_ids(project) == {f"001-recipe-sharing.T{n:03d}" for n in range(2, 15)}
    assert [item["peer_id"] for item in answer["skipped"]] == ["001-recipe-sharing/T001"]


def test_phases_run_in_spec_kits_order_and_user_stories_side_by_side(
    run_import: Import,
) -> None:
    answer = run_import(SOURCE)
    # Foundational after Setup (T001 is done, so it is met and left out).
    assert deps_of(answer, "T004") == {"T002", "T003"}
    # Each story after Foundational only: story 2 does not wait for story 1.
    assert deps_of(answer, "T006") == {"T004", "T005"}
    assert deps_of(answer, "T011") == {"T004", "T005"}
    # Polish after every story.
    assert deps_of(answer, "T013") == {f"T{n:03d}" for n in range(6, 13)}


def test_parallel_tasks_wait_for_no_sibling_and_the_others_follow_the_list(
    run_import: Import,
) -> None:
    answer = run_import(SOURCE)
    assert deps_of(answer, "T003") == set()  # [P]: beside T002
    assert deps_of(answer, "T005") == {"T002", "T003"}  # [P]: the phase before only
    assert deps_of(answer, "T010") == {"T004", "T005", "T009"}
    assert deps_of(answer, "T014") == {f"T{n:03d}" for n in range(6, 14)}


def test_an_explicit_depends_on_is_kept(run_import: Import, service: DeliveryService) -> None:
    answer = run_import(SOURCE)
    assert {"T005", "T008"} <= deps_of(answer, "T009")
    contract = task_of(service, "001-recipe-sharing.T009")["contract"]
    assert contract["title"] == "Implement the share service in src/recipes/sharing/service.py"


def test_file_paths_story_and_parallel_marks_reach_the_contract(
    run_import: Import, service: DeliveryService
) -> None:
    run_import(SOURCE)
    contract = task_of(service, "001-recipe-sharing.T008")["contract"]
    assert contract["files_modified"] == ["src/recipes/sharing/tokens.py"]
    assert "User story: US1" in contract["description"]
    assert "Parallel: marked [P]" in contract["description"]
    assert "Phase: Phase 3: User Story 1 - Share a recipe by link" in contract["description"]


def test_each_story_gives_the_change_an_acceptance_criterion(
    run_import: Import, service: DeliveryService
) -> None:
    run_import(SOURCE)
    acceptance = change_of(service, "001-recipe-sharing")["contract"]["acceptance"]
    assert acceptance[0]["criterion"] == (
        "An owner gets a link that opens a read-only copy of the recipe"
    )
    assert acceptance[0]["verification"] == (
        "Create a share link for a recipe and open it signed out"
    )
    assert len(acceptance) == 2


def test_design_documents_are_copied_into_the_change(run_import: Import, state_root: Path) -> None:
    run_import(SOURCE)
    folder = state_root / "changes/active/001-recipe-sharing"
    assert (folder / "documentation/plan.md").read_text() == (FEATURE / "plan.md").read_text()
    assert (folder / "research/research.md").exists()
    assert (folder / "documentation/contracts/share-api.md").exists()


def test_the_tasks_file_alone_is_recognised(run_import: Import) -> None:
    answer = run_import(FEATURE / "tasks.md", dry_run=True)
    assert answer["format"] == "speckit"
    assert [change["id"] for change in answer["changes"]] == ["001-recipe-sharing"]
