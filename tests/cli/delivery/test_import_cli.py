"""``ithaca import``: the command run in-process, as ``ithaca`` registers it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result
from tests.delivery.imports.conftest import SOURCES, snapshot

from ithaca.app import open_project
from ithaca.cli.entry import cli


def run(folder: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--project", str(folder), "import", *args])


def test_an_import_prints_each_new_id_beside_the_peer_id(project_dir: Path) -> None:
    done = run(project_dir, str(SOURCES["taskmaster"]))
    assert done.exit_code == 0, done.output
    out = done.stdout
    assert out.startswith("Import of Task Master .taskmaster/tasks/tasks.json")
    assert "change tm-master ← tag master: Task Master tag master [created]" in out
    assert (
        "task tm-master.4 ← master/4: Command-line interface after tm-master.2, tm-master.3"
        " [created]" in out
    )
    assert "(subtask of tm-master.2)" in out
    assert "id mapping .ithaca/changes/active/tm-master/delivery/import-map.json [created]" in out
    assert "not imported: task master/1 (done in Task Master)" in out
    assert "created 11, skipped 2" in out
    assert "IMPORT_VERIFICATION_MISSING" in out


def test_a_second_import_says_nothing_is_new(project_dir: Path) -> None:
    run(project_dir, str(SOURCES["openspec"]))
    again = run(project_dir, str(SOURCES["openspec"]))
    assert again.exit_code == 0, again.output
    assert "Nothing new: 15 record(s) came in before" in again.stdout
    assert "[created]" not in again.stdout


def test_json_prints_the_answer(project_dir: Path) -> None:
    done = run(project_dir, str(SOURCES["ultra"]), "--json")
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    assert answer["format"] == "ultra"
    assert answer["changes"][0]["id"] == "change-meal-plan"


def test_dry_run_prints_what_would_be_created_and_writes_nothing(project_dir: Path) -> None:
    opened = open_project(project_dir)
    before = snapshot(opened)
    preview = run(project_dir, str(SOURCES["speckit"]), "--dry-run")
    assert preview.exit_code == 0, preview.output
    assert preview.stdout.startswith(
        "Dry run of the import of spec-kit specs: nothing was written."
    )
    assert "task 001-recipe-sharing.T004 ← 001-recipe-sharing/T004" in preview.stdout
    assert "[would create]" in preview.stdout
    assert snapshot(opened) == before
    opened.close()


def test_from_chooses_the_format(project_dir: Path) -> None:
    done = run(project_dir, str(SOURCES["taskmaster"] / ".taskmaster"), "--from", "taskmaster")
    assert done.exit_code == 0, done.output


def test_bad_input_is_a_coded_error_with_the_next_step_and_no_traceback(
    project_dir: Path, tmp_path: Path
) -> None:
    missing = run(project_dir, str(tmp_path / "nowhere"))
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error IMPORT_SOURCE_MISSING: ")
    (tmp_path / "notes").mkdir()
    unknown = run(project_dir, str(tmp_path / "notes"))
    assert unknown.exit_code == 2
    assert "error IMPORT_FORMAT_UNKNOWN: " in unknown.stderr and "--from" in unknown.stderr
    wrong = run(project_dir, str(SOURCES["ultra"]), "--from", "jira")
    assert wrong.exit_code == 2
    assert wrong.stderr.startswith("error IMPORT_FORMAT_UNKNOWN: --from jira")
    broken = tmp_path / "tasks.json"
    broken.write_text('{"master": {"tasks": [')
    malformed = run(project_dir, str(broken))
    assert malformed.exit_code == 2
    assert "error IMPORT_JSON_INVALID: " in malformed.stderr
    assert "run the import again" in malformed.stderr
    for result in (missing, unknown, wrong, malformed):
        assert "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit)


def test_an_error_prints_json_with_json(project_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "tasks.json").write_text(
        json.dumps({"master": {"tasks": [{"id": 1, "title": "A", "dependencies": [9]}]}})
    )
    failed = run(project_dir, str(tmp_path / "tasks.json"), "--json")
    assert failed.exit_code == 2
    error = json.loads(failed.stderr)["error"]
    assert error["code"] == "IMPORT_DEP_UNKNOWN"
    assert error["details"]["missing"] == [{"task": "master/1", "depends_on": "9"}]
