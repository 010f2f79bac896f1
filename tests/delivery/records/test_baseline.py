"""``record baseline …``: classification, the draft → adopting → accepted lifecycle,
revisions, and re-adoption from an accepted baseline."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.kernel.errors import Conflict, InvalidInput, NotFound

APPROVAL = {"approved_by": "maria", "approval_note": "matches the running system"}


def codes(result: dict[str, Any]) -> list[str]:
    return [found["code"] for found in result["diagnostics"]]


def test_an_empty_repository_is_greenfield(record: Any) -> None:
    result = record("baseline", "initialize")
    baseline = result["result"]["baseline"]
    assert (baseline["status"], baseline["revision"], baseline["mode"]) == (
        "draft",
        1,
        "greenfield",
    )
    assert baseline["classification"]["markers"] == []
    assert "BASELINE_GAP_SUGGESTED" in codes(result)
    suggested = {gap["id"] for gap in baseline["classification"]["suggested_gaps"]}
    assert "product-outcome" in suggested


def test_a_repository_with_a_manifest_is_brownfield(project_dir: Path, record: Any) -> None:
    (project_dir / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (project_dir / "src").mkdir()
    (project_dir / "src" / "app.py").write_text("print('hi')\n")
    subprocess.run(["git", "add", "-A"], cwd=project_dir, check=True)
    baseline = record("baseline", "initialize")["result"]["baseline"]
    assert baseline["mode"] == "brownfield"
    assert baseline["classification"]["markers"] == ["manifest:pyproject.toml", "source:src/"]
    assert "test-baseline" in {gap["id"] for gap in baseline["classification"]["suggested_gaps"]}


def test_more_than_five_plain_files_are_brownfield(project_dir: Path, record: Any) -> None:
    for number in range(6):
        (project_dir / f"notes-{number}.txt").write_text("x\n")
    baseline = record("baseline", "initialize")["result"]["baseline"]
    assert baseline["classification"]["detected"] == "brownfield"
    assert baseline["classification"]["markers"] == []


def test_the_callers_mode_overrides_the_classification(record: Any) -> None:
    baseline = record("baseline", "initialize", {"mode": "brownfield"})["result"]["baseline"]
    assert baseline["mode"] == "brownfield"
    assert baseline["classification"]["detected"] == "greenfield"


def test_initialize_twice_changes_nothing(record: Any, count_events: Any) -> None:
    record("baseline", "initialize")
    events = count_events("")
    again = record("baseline", "initialize")
    assert again["result"]["unchanged"] is True
    assert codes(again) == ["BASELINE_EXISTS"]
    assert again["journal_seq"] is None
    assert count_events("") == events


def test_lifecycle_from_draft_to_accepted(record: Any, count_events: Any) -> None:
    record("baseline", "initialize", {"project_name": "shop"})
    started = record("baseline", "start")["result"]["baseline"]
    assert started["status"] == "adopting"
    observed = record(
        "baseline",
        "observe",
        {
            "specs": [{"path": "specs/api.md"}],
            "gaps": [{"id": "perf", "category": "quality", "blocking": True}],
            "unknowns": ["peak load"],
        },
    )["result"]["baseline"]
    assert observed["revision"] == 2
    assert observed["gaps"] == [{"id": "perf", "category": "quality", "blocking": True, "note": ""}]
    observed = record(
        "baseline",
        "observe",
        {"gaps": [{"id": "perf", "category": "quality", "blocking": False, "note": "fine"}]},
    )["result"]["baseline"]
    assert [gap["blocking"] for gap in observed["gaps"]] == [False]
    accepted = record("baseline", "accept", APPROVAL)
    baseline = accepted["result"]["baseline"]
    assert (baseline["status"], baseline["revision"]) == ("accepted", 3)
    assert baseline["approval"]["approved_by"] == "maria"
    assert baseline["specs"] == [{"path": "specs/api.md"}]
    assert count_events("delivery.baseline_accepted") == 1


def test_accepting_warns_about_blocking_gaps(record: Any) -> None:
    record(
        "baseline", "observe", {"gaps": [{"id": "auth", "category": "security", "blocking": True}]}
    )
    result = record("baseline", "accept", APPROVAL)
    assert "BASELINE_BLOCKING_GAP" in codes(result)
    assert "BASELINE_ADOPTION_SKIPPED" in codes(result)


def test_revising_an_accepted_baseline_opens_the_next_revision(
    record: Any, project: IthacaProject
) -> None:
    record("baseline", "initialize")
    first = record("baseline", "accept", APPROVAL)["result"]["baseline"]
    revised = record(
        "baseline", "revise", {"patch": {"unknowns": ["scale"]}, "expected_revision": 1}
    )
    baseline = revised["result"]["baseline"]
    assert (baseline["status"], baseline["revision"]) == ("adopting", 2)
    assert "BASELINE_REOPENED" in codes(revised)
    second = record("baseline", "accept", APPROVAL)["result"]["baseline"]
    assert second["revision"] == 2
    statuses = dict(
        project.store.connection().execute("SELECT id, status FROM delivery_baselines").fetchall()
    )
    assert statuses == {first["id"]: "superseded", second["id"]: "accepted"}


def test_revise_applies_a_merge_patch_and_checks_the_result(record: Any) -> None:
    record("baseline", "observe", {"specs": [{"path": "specs/a.md"}], "unknowns": ["x"]})
    revised = record(
        "baseline", "revise", {"patch": {"unknowns": None, "scope": {"paths": ["src/"]}}}
    )["result"]["baseline"]
    assert revised["unknowns"] == []
    assert revised["scope"] == {"paths": ["src/"]}
    assert revised["specs"] == [{"path": "specs/a.md"}]


def test_a_patch_that_removes_a_required_field_is_refused(record: Any) -> None:
    record("baseline", "initialize")
    with pytest.raises(InvalidInput) as caught:
        record("baseline", "revise", {"patch": {"project_name": None}})
    assert caught.value.details["pointer"] == "/entries/0/data/patch/project_name"


def test_a_stale_expected_revision_is_a_conflict(record: Any) -> None:
    record("baseline", "initialize")
    record("baseline", "observe", {"unknowns": ["x"]})
    with pytest.raises(Conflict) as caught:
        record("baseline", "revise", {"patch": {}, "expected_revision": 1})
    assert caught.value.code == "REVISION_CONFLICT"
    assert caught.value.details["actual"] == 2


def test_revise_reconciles_named_changes(
    record: Any, project: IthacaProject, new_change: Any
) -> None:
    new_change("add-login")
    record("baseline", "revise", {"patch": {}, "reconciles": ["add-login"]})
    row = project.store.connection().execute(
        "SELECT status, baseline_revision FROM delivery_reconciliations WHERE change_id = ?",
        ("add-login",),
    )
    assert row.fetchone() == ("reconciled", 1)
    with pytest.raises(NotFound):
        record("baseline", "revise", {"patch": {}, "reconciles": ["no-such-change"]})


def test_refs_must_be_safe_relative_paths(record: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        record("baseline", "observe", {"evidence": [{"path": "../secrets.txt"}]})
    assert caught.value.code == "PATH_UNSAFE"
    assert caught.value.details["pointer"] == "/entries/0/data/evidence/0/path"


def test_the_schema_allows_one_accepted_and_one_open_baseline(project: IthacaProject) -> None:
    import sqlite3

    insert = (
        "INSERT INTO delivery_baselines (id, revision, mode, status, project_name, scope,"
        " classification, specs, evidence, gaps, unknowns, created_at, updated_at)"
        " VALUES (?, 1, 'greenfield', ?, 'p', '{}', '{}', '[]', '[]', '[]', '[]', 't', 't')"
    )
    with project.store.write() as conn:
        conn.execute(insert, ("a", "accepted"))
        conn.execute(insert, ("b", "draft"))
    for status in ("accepted", "adopting"):
        with pytest.raises(sqlite3.IntegrityError), project.store.write() as conn:
            conn.execute(insert, (f"c-{status}", status))
