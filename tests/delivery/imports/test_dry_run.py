"""``dry_run``: the import's answer, and nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.delivery.imports.conftest import SOURCES, Import, copy_source, listed, snapshot

from ithaca.app import IthacaProject
from ithaca.kernel.errors import InvalidInput


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_dry_run_shows_what_it_would_create_and_changes_nothing(
    name: str, run_import: Import, project: IthacaProject, count_events: Callable[..., int]
) -> None:
    before = snapshot(project)
    events = count_events()
    preview = run_import(SOURCES[name], dry_run=True)
    assert snapshot(project) == before
    assert count_events() == events
    assert preview["dry_run"] is True and preview["journal_seq"] is None
    assert preview["counts"]["would_create"] > 0
    assert {item["status"] for item in listed(preview).values()} == {"would_create"}
    # The real import creates exactly what the dry run showed, with the same ids and deps.
    done = run_import(SOURCES[name])
    shown = {task_id: item["deps"] for task_id, item in listed(preview).items()}
    assert {task_id: item["deps"] for task_id, item in listed(done).items()} == shown
    assert done["counts"]["created"] == preview["counts"]["would_create"]


def test_a_dry_run_shows_the_dependencies_under_their_new_ids(run_import: Import) -> None:
    preview = run_import(SOURCES["taskmaster"], dry_run=True)
    tasks = listed(preview)
    assert tasks["tm-master.4"]["deps"] == ["tm-master.2", "tm-master.3"]
    assert tasks["tm-master.4"]["peer_id"] == "master/4"
    assert tasks["tm-master.2.2"]["parent_id"] == "tm-master.2"
    assert preview["changes"][0]["map"]["status"] == "would_create"


def test_a_dry_run_after_a_change_to_the_source_shows_what_is_new_and_what_differs(
    run_import: Import, project: IthacaProject, tmp_path: Path
) -> None:
    source = copy_source("openspec", tmp_path)
    run_import(source)
    tasks_md = source / "openspec/changes/fix-serving-scaling/tasks.md"
    tasks_md.write_text(
        tasks_md.read_text().replace("tests/test_scale.py", "tests/test_scaling.py")
        + "- [ ] 1.3 Note the fix in CHANGELOG.md\n"
    )
    before = snapshot(project)
    preview = run_import(source, dry_run=True)
    assert snapshot(project) == before
    tasks = listed(preview)
    assert tasks["fix-serving-scaling.1.2"]["status"] == "differs"
    assert tasks["fix-serving-scaling.1.2"]["differs"] == ["files_modified", "title"]
    assert tasks["fix-serving-scaling.1.3"]["status"] == "would_create"


def test_a_dry_run_refuses_bad_input_like_the_import(run_import: Import, tmp_path: Path) -> None:
    (tmp_path / "tasks.json").write_text('{"master": {"tasks": [{"id": 1}]}}')
    with pytest.raises(InvalidInput) as caught:
        run_import(tmp_path / "tasks.json", dry_run=True)
    assert caught.value.code == "IMPORT_SOURCE_INVALID"
    assert "title" in caught.value.message
