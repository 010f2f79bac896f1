"""``ithaca notebook``: each operation from a terminal, with JSON and coded errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ithaca.cli.commands.notebook import group

PASSING = "from tb_validate import observed, pass_, fail\n" + (
    "pass_('ok') if observed() == 1 else fail('not one')\n"
)


def run(project_dir: Path, *args: str, **kwargs: Any) -> Result:
    return CliRunner().invoke(group, list(args), obj={"project_path": str(project_dir)}, **kwargs)


def ok_json(project_dir: Path, *args: str, **kwargs: Any) -> Any:
    result = run(project_dir, *args, "--json", **kwargs)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def error_of(result: Result) -> dict[str, Any]:
    return dict(json.loads(result.stderr)["error"])


@pytest.fixture
def nb(project_dir: Path) -> str:
    return str(ok_json(project_dir, "create", "Checks")["notebookId"])


def test_create_add_update_and_get_round_trip(project_dir: Path, nb: str) -> None:
    added = ok_json(project_dir, "add-cell", nb, "--source", "print(1)\n", "--timeout-s", "5")
    updated = ok_json(project_dir, "update-cell", nb, added["cellId"], "--source", "print(2)\n")
    got = ok_json(project_dir, "get", nb, "--cell", added["cellId"], "--version", "1")

    assert (added["version"], added["filename"], added["role"]) == (1, "validate.py", "validator")
    assert updated == {"cellId": added["cellId"], "version": 2}
    assert (got["cell"]["source"], got["cell"]["timeout_s"]) == ("print(1)\n", 5)
    assert [v["version"] for v in got["versions"]] == [1, 2]


def test_sources_come_from_a_file_or_standard_input(
    project_dir: Path, nb: str, tmp_path: Path
) -> None:
    source = tmp_path / "check.sh"
    source.write_text("tb_pass fine\n", encoding="utf-8")

    from_file = ok_json(project_dir, "add-cell", nb, "--file", str(source), "--language", "shell")
    from_stdin = ok_json(
        project_dir, "add-cell", nb, "--file", "-", "--kind", "markdown", input="# Notes\n"
    )

    cells = ok_json(project_dir, "get", nb)["cells"]
    assert from_file["filename"] == "validate.sh"
    assert from_stdin["role"] == "markdown"
    assert [c["source"] for c in cells] == ["tb_pass fine\n", "# Notes\n"]


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    [
        (["add-cell", "<nb>"], "INVALID_INPUT", 2),
        (["add-cell", "<nb>", "--source", "x", "--file", "-"], "INVALID_INPUT", 2),
        (
            ["add-cell", "<nb>", "--source", "x", "--filename", "verdict.json"],
            "INVALID_FILENAME",
            2,
        ),
        (["add-cell", "<nb>", "--source", "x", "--language", "ruby"], "LANGUAGE_UNSUPPORTED", 2),
        (["add-cell", "nb_missing", "--source", "x"], "NOTEBOOK_NOT_FOUND", 1),
        (["update-cell", "<nb>", "cell_missing", "--source", "x"], "CELL_NOT_FOUND", 1),
        (["create", ""], "INVALID_INPUT", 2),
        (["run-cell", "<nb>", "cell_x", "--observed", "{nope"], "INVALID_INPUT", 2),
    ],
)
def test_refusals_print_their_code_and_exit_with_its_class(
    project_dir: Path, nb: str, args: list[str], code: str, exit_code: int
) -> None:
    result = run(project_dir, *[nb if arg == "<nb>" else arg for arg in args], "--json")

    assert result.exit_code == exit_code
    assert error_of(result)["code"] == code


def test_human_refusal_names_the_code(project_dir: Path) -> None:
    result = run(project_dir, "get", "nb_missing")

    assert result.exit_code == 1
    assert "NOTEBOOK_NOT_FOUND" in result.stderr


def test_list_and_export(project_dir: Path, nb: str) -> None:
    ok_json(project_dir, "add-cell", nb, "--source", "x = '```'\n")

    listed = ok_json(project_dir, "list")
    exported = run(project_dir, "export", nb)

    assert [(n["notebookId"], n["cellCount"]) for n in listed] == [(nb, 1)]
    assert exported.exit_code == 0
    assert exported.stdout.startswith("<!-- ithaca:notebook ")
    assert "\n````python\nx = '```'\n````\n" in exported.stdout
    assert ok_json(project_dir, "export", nb) == {"markdown": exported.stdout}
    assert "Checks" in run(project_dir, "list").stdout


def test_run_cell_exits_0_on_pass_and_1_on_fail(project_dir: Path, nb: str) -> None:
    cell = ok_json(project_dir, "add-cell", nb, "--source", PASSING)["cellId"]

    passed = run(project_dir, "run-cell", nb, cell, "--observed", "1")
    failed = run(project_dir, "run-cell", nb, cell, "--observed", "-", "--json", input="2")
    absent = run(project_dir, "run-cell", nb, cell)

    assert (passed.exit_code, passed.stdout.splitlines()[0]) == (0, "PASS: ok")
    assert failed.exit_code == 1
    assert json.loads(failed.stdout)["reason"] == "not one"
    assert (absent.exit_code, absent.stdout.splitlines()[0]) == (1, "FAIL: not one")


def test_human_output_of_the_writes(project_dir: Path) -> None:
    created = run(project_dir, "create", "Mine", "--language", "javascript")
    nb = created.stdout.split()[2]
    added = run(project_dir, "add-cell", nb, "--source", "{}", "--filename", "package.json")
    cell = added.stdout.split()[2]
    unchanged = run(project_dir, "update-cell", nb, cell, "--source", "{}")
    shown = run(project_dir, "get", nb)

    assert created.stdout.startswith(f"Created notebook {nb} (javascript): Mine")
    assert added.stdout == f"Added cell {cell} v1: manifest package.json (javascript)\n"
    assert unchanged.stdout == f"Cell {cell} is at version 1.\n"
    assert shown.stdout.splitlines()[0] == f"Mine  ({nb}, javascript)"
