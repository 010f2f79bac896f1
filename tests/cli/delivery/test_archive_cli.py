"""``ithaca archive``: the command object run in-process, as the lead registers it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from ithaca.cli.commands.archive import command as archive
from ithaca.cli.commands.record import command as record


def run(command: Any, folder: Path, *args: str) -> Result:
    return CliRunner().invoke(command, list(args), obj={"project_path": str(folder)})


def open_change(folder: Path) -> None:
    data = {"id": "add-login", "kind": "quick", "title": "Add login", "intent": "Log in."}
    done = run(record, folder, "change_contract", "open", "--data", json.dumps(data))
    assert done.exit_code == 0, done.output
    content = {
        "kind": "research",
        "scope": {"change_id": "add-login"},
        "path": "research/auth.md",
        "content": "cookies\n",
    }
    done = run(record, folder, "artifact", "bind", "--data", json.dumps(content))
    assert done.exit_code == 0, done.output


def test_archive_with_a_baseline_update(project_dir: Path) -> None:
    open_change(project_dir)
    done = run(
        archive,
        project_dir,
        "add-login",
        "--summary",
        "Shipped.",
        "--baseline-update",
        "specs/auth.md=research/auth.md",
        "--key",
        "a-1",
        "--json",
    )
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    assert answer["change"]["status"] == "archived"
    assert answer["reconciliation"]["baseline_revision"] == 1
    assert (project_dir / ".ithaca/specs/auth.md").read_text() == "cookies\n"
    again = run(
        archive,
        project_dir,
        "add-login",
        "--summary",
        "Shipped.",
        "--baseline-update",
        "specs/auth.md=research/auth.md",
        "--key",
        "a-1",
    )
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("replayed: add-login")


def test_archive_without_reconciliation_warns_and_prints_its_key(project_dir: Path) -> None:
    open_change(project_dir)
    done = run(archive, project_dir, "add-login", "--summary", "Shipped.")
    assert done.exit_code == 0, done.output
    assert "idempotency key: cli-" in done.stderr
    assert "needs_attention BASELINE_RECONCILIATION_MISSING" in done.stdout


def test_misuse_and_errors(project_dir: Path) -> None:
    open_change(project_dir)
    both = run(
        archive,
        project_dir,
        "add-login",
        "--summary",
        "x",
        "--baseline-update",
        "specs/a.md=research/auth.md",
        "--no-baseline-change",
        "y",
    )
    assert both.exit_code == 2
    malformed = run(archive, project_dir, "add-login", "--summary", "x", "--baseline-update", "a")
    assert malformed.exit_code == 2
    missing = run(archive, project_dir, "nope", "--summary", "x", "--json")
    assert missing.exit_code == 1
    error = json.loads(missing.stderr.splitlines()[-1])["error"]
    assert error["code"] == "CHANGE_NOT_FOUND"
