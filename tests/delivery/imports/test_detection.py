"""Telling the formats apart, and the errors when a path cannot be imported."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.delivery.imports.conftest import SOURCES, Import, snapshot

from ithaca.app import IthacaProject
from ithaca.kernel.errors import InvalidInput, IthacaError, NotFound


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_format_is_told_from_the_project_folder(name: str, run_import: Import) -> None:
    assert run_import(SOURCES[name], dry_run=True)["format"] == name


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("ultra/.ultra", "ultra"),
        ("ultra/.ultra/tasks/tasks.json", "ultra"),
        ("taskmaster/.taskmaster", "taskmaster"),
        ("openspec/openspec", "openspec"),
        ("openspec/openspec/changes/add-meal-planner", "openspec"),
        ("speckit/specs", "speckit"),
        ("speckit/specs/001-recipe-sharing", "speckit"),
    ],
)
def test_the_format_is_told_from_the_peers_own_folders_and_files(
    path: str, name: str, run_import: Import
) -> None:
    fixtures = SOURCES[name].parent
    assert run_import(fixtures / path, dry_run=True)["format"] == name


def test_a_missing_path_is_refused(run_import: Import, tmp_path: Path) -> None:
    with pytest.raises(NotFound) as caught:
        run_import(tmp_path / "nowhere")
    assert caught.value.code == "IMPORT_SOURCE_MISSING"


def test_a_folder_no_peer_wrote_asks_for_the_format(
    run_import: Import, project: IthacaProject, tmp_path: Path
) -> None:
    (tmp_path / "notes.md").write_text("# Notes\n")
    before = snapshot(project)
    with pytest.raises(InvalidInput) as caught:
        run_import(tmp_path)
    assert caught.value.code == "IMPORT_FORMAT_UNKNOWN"
    assert "--from ultra|taskmaster|openspec|speckit" in caught.value.message
    assert snapshot(project) == before


def test_a_folder_holding_two_peers_asks_which_and_from_chooses(
    run_import: Import, tmp_path: Path
) -> None:
    both = tmp_path / "both"
    shutil.copytree(SOURCES["taskmaster"], both)
    shutil.copytree(SOURCES["openspec"] / "openspec", both / "openspec")
    with pytest.raises(InvalidInput) as caught:
        run_import(both)
    assert caught.value.code == "IMPORT_FORMAT_AMBIGUOUS"
    assert caught.value.details["formats"] == ["taskmaster", "openspec"]
    assert run_import(both, **{"from": "openspec", "dry_run": True})["format"] == "openspec"


def test_from_naming_a_format_the_path_does_not_hold_is_refused(run_import: Import) -> None:
    with pytest.raises(NotFound) as caught:
        run_import(SOURCES["speckit"], **{"from": "ultra"})
    assert caught.value.code == "IMPORT_SOURCE_EMPTY"
    assert "Ultra Builder Pro" in caught.value.message


def test_unknown_arguments_and_formats_are_invalid_input(run_import: Import) -> None:
    with pytest.raises(IthacaError) as caught:
        run_import(SOURCES["ultra"], **{"from": "jira"})
    assert caught.value.code == "VALIDATION_ERROR"
    with pytest.raises(IthacaError) as caught:
        run_import(SOURCES["ultra"], recursive=True)
    assert caught.value.code == "VALIDATION_ERROR"
