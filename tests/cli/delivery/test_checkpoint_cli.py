"""``ithaca checkpoint``: the command object run in-process, as the lead registers it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from ithaca.cli.commands.checkpoint import command as checkpoint
from ithaca.cli.commands.record import command as record

CHANGE = {"id": "add-login", "kind": "standard", "title": "Add login", "intent": "# Login\n"}


def run(folder: Path, *args: str) -> Result:
    return CliRunner().invoke(checkpoint, list(args), obj={"project_path": str(folder)})


def open_change(folder: Path) -> None:
    done = CliRunner().invoke(
        record,
        ["change_contract", "open", "--data", json.dumps(CHANGE)],
        obj={"project_path": str(folder)},
    )
    assert done.exit_code == 0, done.output


def test_accept_with_a_payload_file_and_a_generated_key(project_dir: Path, tmp_path: Path) -> None:
    open_change(project_dir)
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps({"summary": "tests pass", "data": {"result": "pass"}}))
    done = run(project_dir, "test", "--change", "add-login", "--payload", f"@{payload}")
    assert done.exit_code == 0, done.output
    assert "accepted: test change add-login r1" in done.stdout
    assert "idempotency key: cli-" in done.stderr
    again = run(project_dir, "test", "--change", "add-login", "--payload", f"@{payload}", "--json")
    answer = json.loads(again.stdout)
    assert answer["unchanged"] is True
    assert "CHECKPOINT_UNCHANGED" in [found["code"] for found in answer["diagnostics"]]


def test_draft_then_accept_then_errors_exit_with_codes(project_dir: Path) -> None:
    open_change(project_dir)
    drafted = run(
        project_dir, "plan", "--change", "add-login", "--draft", "--payload", '{"summary": "p"}'
    )
    assert drafted.exit_code == 0, drafted.output
    assert "draft: plan change add-login" in drafted.stdout
    accepted = run(project_dir, "plan", "--change", "add-login", "--key", "k-1")
    assert "accepted: plan change add-login r1" in accepted.stdout
    assert "PLAN_NO_TASKS" in accepted.stdout
    replayed = run(project_dir, "plan", "--change", "add-login", "--key", "k-1")
    assert "replayed: plan change add-login r1" in replayed.stdout
    missing = run(project_dir, "plan", "--change", "add-login", "--abandon")
    assert missing.exit_code == 1
    assert "error CHECKPOINT_DRAFT_NOT_FOUND" in missing.stderr
    invalid = run(project_dir, "plan", "--payload", '{"summary": "p"}')
    assert invalid.exit_code == 2
    assert "PLAN_SCOPE_INVALID" in invalid.stderr
    broken = run(project_dir, "dev", "--payload", "{nope")
    assert broken.exit_code == 2 and "VALIDATION_ERROR" in broken.stderr
