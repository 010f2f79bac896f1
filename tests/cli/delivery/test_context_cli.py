"""``ithaca context``: the command object run in-process, as the lead registers it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from ithaca.cli.commands.context import command as context
from ithaca.cli.commands.record import command as record


def run(command, folder: Path, *args: str) -> Result:
    return CliRunner().invoke(command, list(args), obj={"project_path": str(folder)})


def test_json_is_the_envelope_and_text_reads_it(project_dir: Path) -> None:
    opened = {"id": "add-login", "kind": "quick", "title": "Add login", "intent": "# x\n"}
    assert (
        run(record, project_dir, "change_contract", "open", "--data", json.dumps(opened)).exit_code
        == 0
    )
    as_json = run(context, project_dir, "--json", "--stage", "dev")
    assert as_json.exit_code == 0, as_json.output
    envelope = json.loads(as_json.stdout)
    assert envelope["scope"]["change_id"] == "add-login" and envelope["stage"] == "dev"
    text = run(context, project_dir, "--change", "add-login", "--full")
    assert text.exit_code == 0, text.output
    assert "change: add-login [quick, active] Add login" in text.stdout
    assert "CHANGE_CONTRACT_GAP:contract.outcome" in text.stdout


def test_errors_keep_their_codes(project_dir: Path) -> None:
    missing = run(context, project_dir, "--task", "T-9", "--json")
    assert missing.exit_code == 1
    assert json.loads(missing.stderr)["error"]["code"] == "TASK_NOT_FOUND"
    bad = run(context, project_dir, "--cursor", "not-a-cursor")
    assert bad.exit_code == 2 and "VALIDATION_ERROR" in bad.stderr
