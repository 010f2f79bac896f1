"""``ithaca init`` ships the default worker output schema as a registered, tracked file."""

from __future__ import annotations

import json
from pathlib import Path

from ithaca.app import init_project, open_project
from ithaca.delivery.templates import TASK_OUTPUT_PATH, TASK_OUTPUT_SCHEMA
from ithaca.kernel import doctor


def journal_kinds(root: Path) -> list[str]:
    project = open_project(root)
    try:
        rows = project.store.connection().execute("SELECT kind FROM journal ORDER BY seq")
        return [kind for (kind,) in rows]
    finally:
        project.close()


def test_init_ships_the_output_schema_once(project_dir):
    shipped = project_dir / ".ithaca" / TASK_OUTPUT_PATH
    assert json.loads(shipped.read_text()) == TASK_OUTPUT_SCHEMA
    before = journal_kinds(project_dir)
    assert before.count("delivery.templates_shipped") == 1

    project, made = init_project(project_dir)
    project.close()

    assert made == []
    assert journal_kinds(project_dir) == before


def test_an_edited_template_shows_in_doctor_and_init_puts_it_back(project_dir):
    shipped = project_dir / ".ithaca" / TASK_OUTPUT_PATH
    shipped.write_text("{}\n")
    project = open_project(project_dir)
    try:
        report = doctor.check(project.project, project.store)
    finally:
        project.close()
    assert "FILE_DIGEST_MISMATCH" in {finding["code"] for finding in report["findings"]}

    project, made = init_project(project_dir)
    project.close()

    assert made == [f".ithaca/{TASK_OUTPUT_PATH}"]
    assert json.loads(shipped.read_text()) == TASK_OUTPUT_SCHEMA
