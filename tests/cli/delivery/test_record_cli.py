"""``ithaca record``: the command object run in-process, as the lead registers it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from ithaca.cli.commands.record import command as record

TASK = {"id": "T-1", "title": "Add login form", "verification": {"argv": ["pytest"]}}


def run(folder: Path, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(record, list(args), obj={"project_path": str(folder)}, input=stdin)


def test_one_entry_with_a_generated_key(project_dir: Path) -> None:
    done = run(project_dir, "task_contract", "define", "--data", json.dumps(TASK), "--json")
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    assert answer["results"][0]["status"] == "committed"
    assert "idempotency key for entry 0: cli-" in done.stderr


def test_a_given_key_replays_and_data_can_come_from_a_file(
    project_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "task.json"
    data.write_text(json.dumps(TASK))
    first = run(project_dir, "task_contract", "define", "--data", f"@{data}", "--key", "k-1")
    assert first.exit_code == 0, first.output
    assert "committed: task_contract define T-1 r1 (pending)" in first.stdout
    assert "TASK_FILES_UNDECLARED" in first.stdout
    again = run(project_dir, "task_contract", "define", "--data", f"@{data}", "--key", "k-1")
    assert "replayed: task_contract define T-1" in again.stdout
    assert "idempotency key" not in again.stderr


def test_data_from_standard_input(project_dir: Path) -> None:
    payload = json.dumps({"type": "seen", "payload": {"ok": True}})
    done = run(project_dir, "event", "append", "--data", "@-", "--json", stdin=payload)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["results"][0]["result"]["event"]["kind"] == "observation.seen"


def test_a_batch_that_fails_reports_the_committed_entries(
    project_dir: Path, tmp_path: Path
) -> None:
    batch = tmp_path / "batch.json"
    entries: list[dict[str, Any]] = [
        {"kind": "task_contract", "action": "define", "data": TASK, "idempotency_key": "b-0"},
        {
            "kind": "task_contract",
            "action": "remove",
            "data": {"id": "T-9", "reason": "x"},
            "idempotency_key": "b-1",
        },
    ]
    batch.write_text(json.dumps(entries))
    failed = run(project_dir, "--batch", f"@{batch}")
    assert failed.exit_code == 1
    assert "entries committed before the error: 0" in failed.stderr
    assert "error TASK_NOT_FOUND" in failed.stderr
    as_json = run(project_dir, "--batch", f"@{batch}", "--json")
    error = json.loads(as_json.stderr)["error"]
    assert error["details"]["committed"] == [0]


def test_invalid_json_and_invalid_data_exit_2(project_dir: Path) -> None:
    broken = run(project_dir, "event", "append", "--data", "{nope")
    assert broken.exit_code == 2
    assert "VALIDATION_ERROR" in broken.stderr
    unknown = run(project_dir, "event", "append", "--data", '{"type": "x", "payload": {}, "z": 1}')
    assert unknown.exit_code == 2
    assert "/entries/0/data/z" in unknown.stderr


def test_usage_errors(project_dir: Path) -> None:
    assert run(project_dir).exit_code == 2
    assert run(project_dir, "event").exit_code == 2
    assert run(project_dir, "event", "append", "--batch", "@x.json").exit_code == 2


def test_baseline_initialize_sets_the_project_up_first(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    done = run(root, "baseline", "initialize", "--json")
    assert done.exit_code == 0, done.output
    assert (root / ".ithaca" / ".runtime" / "state.db").exists()
    assert json.loads(done.stdout)["results"][0]["result"]["baseline"]["status"] == "draft"


def test_other_records_need_an_initialised_project(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    done = run(root, "event", "append", "--data", '{"type": "x", "payload": {}}')
    assert done.exit_code == 1
    assert "NOT_INITIALISED" in done.stderr
    assert not (root / ".ithaca").exists()


def test_help_lists_every_kind_action_and_field(project_dir: Path) -> None:
    shown = run(project_dir, "--help").stdout
    for line in (
        "  baseline:",
        "    accept: approved_by*=text approval_note*=text",
        "  task_outcome:",
        "    append: type*=id payload*={...} subject=text",
    ):
        assert line in shown


def test_an_example_is_recorded_as_it_is_printed(project_dir: Path) -> None:
    printed = run(project_dir, "--example", "decision", "defer")
    assert printed.exit_code == 0, printed.output
    done = run(project_dir, "decision", "defer", "--data", printed.stdout)
    assert done.exit_code == 0, done.output
    assert "committed: decision defer" in done.stdout


def test_a_validation_error_lists_every_problem_with_its_pointer(project_dir: Path) -> None:
    done = run(project_dir, "task_contract", "define", "--data", '{"id": "bad id", "colour": 1}')
    assert done.exit_code == 2
    first = done.stderr.splitlines()[-1]
    assert first.startswith("error VALIDATION_ERROR: 4 problems: ")
    for pointer in ("/colour", "/title", "/verification", "/id"):
        assert f"/entries/0/data{pointer}: " in first
