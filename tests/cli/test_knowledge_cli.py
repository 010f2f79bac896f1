"""``ithaca knowledge search|get`` over a recorded lesson, as JSON and for people."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ithaca import open_project
from ithaca.cli.commands.knowledge import group
from ithaca.ulysses import lesson_recording

CLOSED: dict[str, Any] = {
    "session_id": "uly_1",
    "problem": "Flaky login test on CI",
    "constraints": ["no sleeps"],
    "terminalState": "resolved",
    "summary": "The token cache was shared between tests; scoping it per test [fixed] it.",
    "missing": None,
    "completed_at": "2025-03-04T10:00:00.000Z",
    "hypotheses": [],
    "steps": [],
    "forbidden_moves": [],
    "checkpoints": [],
    "evidence": [],
}


@pytest.fixture
def lesson(project_dir: Path) -> dict[str, Any]:
    opened = open_project(project_dir)
    try:
        with opened.store.write() as conn:
            recorded = lesson_recording.record_lesson(conn, opened.project, CLOSED)
        assert lesson_recording.write_lesson_file(opened.project, recorded) == []
    finally:
        opened.close()
    return recorded


def run(project_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(group, list(args), obj={"project_path": str(project_dir)})


def test_search_json_prints_what_the_tool_returns(
    project_dir: Path, lesson: dict[str, Any]
) -> None:
    result = run(project_dir, "search", "token cache", "--limit", "3", "--json")

    assert result.exit_code == 0, result.output
    (hit,) = json.loads(result.stdout)["results"]
    assert hit["id"] == lesson["id"]
    assert hit["path"] == lesson["path"]


def test_search_prints_a_table_for_people(project_dir: Path, lesson: dict[str, Any]) -> None:
    result = run(project_dir, "search", "token")

    assert result.exit_code == 0, result.output
    assert lesson["id"] in result.stdout
    assert "Flaky login test on CI" in result.stdout
    assert "[token]" in result.stdout


def test_search_without_matches_says_so(project_dir: Path) -> None:
    result = run(project_dir, "search", "nothing like it")

    assert result.exit_code == 0
    assert "No lessons match." in result.stdout


def test_search_limit_out_of_range_is_invalid_input(project_dir: Path) -> None:
    result = run(project_dir, "search", "token", "--limit", "0", "--json")

    assert result.exit_code == 2
    assert json.loads(result.stderr)["error"]["details"]["pointer"] == "/limit"


def test_get_prints_the_lesson(project_dir: Path, lesson: dict[str, Any]) -> None:
    as_json = run(project_dir, "get", lesson["id"], "--json")
    as_text = run(project_dir, "get", lesson["id"])

    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["record"] == lesson["record"]
    assert as_text.exit_code == 0
    assert lesson["path"] in as_text.stdout
    assert "Summary" in as_text.stdout


def test_get_unknown_lesson_exits_with_its_code(project_dir: Path) -> None:
    result = run(project_dir, "get", "lsn_missing", "--json")

    assert result.exit_code == 1
    assert json.loads(result.stderr)["error"]["code"] == "LESSON_NOT_FOUND"
