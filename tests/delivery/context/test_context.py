"""``context``: scope order, sections, refs, digests that hold across processes, and a
read that writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.context import tool as context_module
from ithaca.delivery.context.tool import context, envelope, snapshot_bytes, store_snapshot
from ithaca.kernel import canon
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import InvalidInput, NotFound

Record = Callable[..., dict[str, Any]]


def read(project: IthacaProject, **arguments: Any) -> dict[str, Any]:
    return context(project.project, project.store, project.config, arguments)


def open_change(record: Record, change_id: str, kind: str = "standard") -> dict[str, Any]:
    data = {"id": change_id, "kind": kind, "title": change_id, "intent": f"# {change_id}\n"}
    return record("change_contract", "open", data)


def task(record: Record, task_id: str, change_id: str | None = "add-login", **extra: Any):
    data = {"id": task_id, "title": f"Task {task_id}", "verification": {"argv": ["pytest"]}}
    if change_id is not None:
        data["change_id"] = change_id
    return record("task_contract", "define", {**data, **extra})


def decide(record: Record, scope: dict[str, Any], question: str, defer: bool = False):
    data: dict[str, Any] = {
        "scope": scope,
        "question": question,
        "recommendation": "SQLite",
        "owner": "maria",
    }
    if defer:
        return record("decision", "defer", {**data, "consequence": "blocks the schema"})
    data["selection"] = {"choice": "SQLite", "rationale": "one file"}
    return record("decision", "accept", data)


def test_an_empty_project_is_its_own_scope(project: IthacaProject) -> None:
    found = read(project)
    assert found["scope"] == {
        "type": "project",
        "change_id": None,
        "task_id": None,
        "resolved_by": "project",
    }
    assert found["change"] is None and found["task"] is None and found["baseline"] is None
    assert found["git"] == {"head": None, "branch": found["git"]["branch"]}
    assert found["id"] == f"ctx-{found['digest'][:24]}"
    assert found["snapshot"] == {"stored": False}


def test_scope_order_latest_change_then_its_task_by_status(
    project: IthacaProject, record: Record
) -> None:
    record("baseline", "initialize", {})
    assert read(project)["scope"]["type"] == "baseline"
    open_change(record, "add-login")
    open_change(record, "fix-logout")
    record("change_contract", "revise", {"id": "fix-logout", "patch": {}, "status": "blocked"})
    chosen = read(project)["scope"]
    assert (chosen["type"], chosen["change_id"], chosen["resolved_by"]) == (
        "change",
        "add-login",
        "latest",
    )
    task(record, "T-1")
    task(record, "T-2")
    record("task_contract", "remove", {"id": "T-2", "reason": "not needed"})
    chosen = read(project)["scope"]
    assert (chosen["type"], chosen["task_id"]) == ("task", "T-1")
    named = read(project, scope={"change_id": "fix-logout"})["scope"]
    assert (named["type"], named["change_id"], named["resolved_by"]) == (
        "change",
        "fix-logout",
        "change_id",
    )


def test_a_task_contradicting_its_change_is_a_scope_mismatch(
    project: IthacaProject, record: Record
) -> None:
    open_change(record, "add-login")
    open_change(record, "fix-logout")
    task(record, "T-1")
    with pytest.raises(InvalidInput) as caught:
        read(project, scope={"task_id": "T-1", "change_id": "fix-logout"})
    assert caught.value.code == "SCOPE_MISMATCH"
    with pytest.raises(NotFound) as missing:
        read(project, scope={"task_id": "T-9"})
    assert missing.value.code == "TASK_NOT_FOUND"
    with pytest.raises(NotFound) as no_change:
        read(project, scope={"change_id": "nope-nope"})
    assert no_change.value.code == "CHANGE_NOT_FOUND"


def test_unknown_fields_and_bad_values_are_refused(project: IthacaProject) -> None:
    for bad, pointer in (
        ({"detail": "all"}, "/detail"),
        ({"scope": {"baseline": True}}, "/scope/baseline"),
        ({"stage": "ship"}, "/stage"),
        ({"extra": 1}, "/extra"),
        ({"cursor": "%%%"}, "/cursor"),
    ):
        with pytest.raises(InvalidInput) as caught:
            read(project, **bad)
        assert caught.value.code == "VALIDATION_ERROR"
        assert caught.value.details["pointer"] == pointer


def test_sections_carry_refs_never_bodies(
    project: IthacaProject, record: Record, state_root: Path
) -> None:
    open_change(record, "add-login", kind="incident")
    decide(record, {"baseline": True}, "Which database?")
    decide(record, {"change_id": "add-login"}, "Which session store?", defer=True)
    task(record, "T-0")
    task(record, "T-1", deps=["T-0", "T-404"], files_modified=["src/a.py"])
    body = "the research notes, which must not be inlined"
    record(
        "artifact",
        "bind",
        {
            "kind": "research",
            "scope": {"change_id": "add-login"},
            "path": "research/notes.md",
            "content": body,
        },
    )
    found = read(project, scope={"task_id": "T-1"})
    assert body not in json.dumps(found)
    intent = found["change"]["intent"]
    assert set(intent) == {"path", "digest", "bytes"}
    assert intent["digest"] == canon.digest_bytes((state_root / intent["path"]).read_bytes())
    assert found["change"]["diagnosis"]["path"].endswith("diagnosis.md")
    assert found["task"]["deps"] == [
        {"id": "T-0", "status": "pending"},
        {"id": "T-404", "status": None},
    ]
    assert [(d["status"], d["scope"]) for d in found["decisions"]] == [
        ("accepted", "baseline"),
        ("deferred", "add-login"),
    ]
    assert found["decisions"][0]["selection"] == {"choice": "SQLite", "rationale": "one file"}
    [evidence] = found["evidence"]
    assert evidence["fresh"] is True and evidence["bytes"] == len(body)
    codes = {d["code"] for d in found["diagnostics"]["needs_attention"]}
    assert "DECISION_DEFERRED" in codes
    warned = {d["code"] for d in found["diagnostics"]["warnings"]}
    assert "TASK_DEP_UNKNOWN" in warned
    assert any(code.startswith("CHANGE_CONTRACT_GAP:") for code in warned)


def test_edited_files_surface_as_diagnostics(
    project: IthacaProject, record: Record, state_root: Path
) -> None:
    open_change(record, "add-login")
    decided = decide(record, {"change_id": "add-login"}, "Which cache?")
    bound = record(
        "artifact",
        "bind",
        {
            "kind": "research",
            "scope": {"change_id": "add-login"},
            "path": "research/notes.md",
            "content": "v1",
        },
    )
    (state_root / decided["result"]["decision"]["path"]).write_text("{}")
    (state_root / bound["result"]["artifact"]["path"]).write_text("v2, edited by hand")
    found = read(project)
    assert [d["code"] for d in found["diagnostics"]["hard_conflicts"]] == ["DECISION_FILE_DRIFT"]
    assert found["decisions"][0]["selection"] is None
    assert found["evidence"][0]["fresh"] is False
    assert "EVIDENCE_STALE" in {d["code"] for d in found["diagnostics"]["warnings"]}


def test_reading_writes_nothing(project: IthacaProject, record: Record) -> None:
    open_change(record, "add-login")
    task(record, "T-1")
    conn = project.store.connection()
    before = conn.execute("SELECT count(*), max(seq) FROM journal").fetchone()
    changes_before = conn.total_changes
    blobs = sorted(Path(project.project.blobs_dir).rglob("*"))
    read(project)
    read(project, detail="full")
    assert conn.execute("SELECT count(*), max(seq) FROM journal").fetchone() == before
    assert conn.total_changes == changes_before
    assert sorted(Path(project.project.blobs_dir).rglob("*")) == blobs


def test_full_adds_scope_digest_and_drift(project: IthacaProject, project_dir: Path) -> None:
    git = ["git", "-C", str(project_dir), "-c", "user.name=t", "-c", "user.email=t@t"]
    (project_dir / "app.py").write_text("print(1)\n")
    # ``ithaca init`` wrote .gitattributes (the ledger's merge driver): commit it too.
    subprocess.run([*git, "add", "app.py", ".gitattributes"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    clean = read(project, detail="full")["git"]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert clean["head"] == head.strip()
    assert clean["drift"] == "clean"
    summary = read(project)["git"]
    assert set(summary) == {"head", "branch"}
    (project_dir / "app.py").write_text("print(2)\n")
    dirty = read(project, detail="full")["git"]
    assert dirty["drift"] == "dirty"
    assert dirty["scope_digest"] != clean["scope_digest"]
    (project_dir / "app.py").write_text("print(1)\n")
    assert read(project, detail="full")["git"]["scope_digest"] == clean["scope_digest"]


def test_a_project_outside_git_reports_no_git(tmp_path: Path) -> None:
    from ithaca.app import init_project

    opened, _ = init_project(tmp_path / "plain")
    try:
        assert read(opened, detail="full")["git"] == {
            "head": None,
            "branch": None,
            "scope_digest": None,
            "drift": "no_git",
        }
    finally:
        opened.close()


_SUBPROCESS = """
import json, sys
from ithaca.app import open_project
from ithaca.delivery.context.tool import context
project = open_project(sys.argv[1], reconcile=False)
answer = context(project.project, project.store, project.config, json.loads(sys.argv[2]))
print(json.dumps([answer["digest"], answer["id"]]))
"""


def test_same_authority_same_digest_across_processes(
    project: IthacaProject, record: Record, project_dir: Path
) -> None:
    open_change(record, "add-login")
    decide(record, {"change_id": "add-login"}, "Which database?")
    task(record, "T-1")
    for arguments in ({}, {"detail": "full", "stage": "dev"}):
        here = read(project, **arguments)
        done = subprocess.run(
            [sys.executable, "-c", _SUBPROCESS, str(project_dir), json.dumps(arguments)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(done.stdout) == [here["digest"], here["id"]]
    first = read(project)["digest"]
    task(record, "T-2")
    assert read(project)["digest"] != first


def test_the_snapshot_is_a_blob_named_by_the_digest(project: IthacaProject, record: Record) -> None:
    open_change(record, "add-login")
    with project.store.read() as conn:
        whole = envelope(project.project, conn, stage="plan", scope={"change_id": "add-login"})
    assert whole["detail"] == "full" and whole["stage"] == "plan"
    stored = store_snapshot(project.project, whole)
    assert stored == whole["digest"] == canon.digest_bytes(snapshot_bytes(whole))
    again = BlobStore(project.project.blobs_dir).get(stored)
    assert json.loads(again)["scope"]["change_id"] == "add-login"
    assert store_snapshot(project.project, whole) == stored
    answer = read(project, detail="full", stage="plan", scope={"change_id": "add-login"})
    assert answer["digest"] == stored and answer["snapshot"] == {"stored": True}


def test_the_published_schema_is_compact_and_strict() -> None:
    schema = context_module.CONTEXT_SCHEMA
    assert schema["additionalProperties"] is False
    assert schema["properties"]["scope"]["additionalProperties"] is False
    size = len(
        canon.canonical({"schema": schema, "description": context_module.CONTEXT_DESCRIPTION})
    )
    assert size < 1200
