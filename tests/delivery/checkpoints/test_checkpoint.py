"""``checkpoint``: drafts, acceptance and supersession, evidence pinned by digest, stage
warnings, plans with waves, and rows verified against their digest."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.checkpoints import rows as checkpoint_rows
from ithaca.delivery.checkpoints import tool as checkpoints
from ithaca.delivery.service import DeliveryService
from ithaca.kernel import canon, journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Conflict, Corrupt, InvalidInput, NotFound, Refused

Checkpoint = Callable[..., dict[str, Any]]
CHANGE = {"change_id": "add-login"}


@pytest.fixture
def checkpoint(service: DeliveryService) -> Checkpoint:
    """``checkpoint(stage, payload=None, scope=CHANGE, operation=None, key=None)``."""
    keys = iter(range(1, 10_000))

    def call(
        stage: str,
        payload: dict[str, Any] | None = None,
        scope: dict[str, Any] | None = None,
        operation: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "stage": stage,
            "scope": CHANGE if scope is None else scope,
            "idempotency_key": key or f"cp-key-{next(keys)}",
        }
        if payload is not None:
            request["payload"] = payload
        if operation is not None:
            request["operation"] = operation
        return checkpoints.checkpoint(
            service.project, service.store, service.config, request, units=service.units
        )

    return call


def codes(answer: dict[str, Any]) -> list[str]:
    return [found["code"] for found in answer["diagnostics"]]


def rows(project: IthacaProject) -> list[tuple[Any, ...]]:
    return (
        project.store.connection()
        .execute(
            "SELECT stage, revision, status, supersedes_id FROM delivery_checkpoints"
            " ORDER BY created_at, rowid"
        )
        .fetchall()
    )


def define(record: Any, task_id: str, deps: list[str] | None = None, files: Any = None) -> None:
    record(
        "task_contract",
        "define",
        {
            "id": task_id,
            "change_id": "add-login",
            "title": f"Task {task_id}",
            "verification": {"argv": ["pytest"]},
            "deps": deps or [],
            "files_modified": ["src/" + task_id.lower() + ".py"] if files is None else files,
        },
    )


# --- accept, draft, abandon -------------------------------------------------------------------


def test_accepting_twice_supersedes_in_a_chain(
    opened_change: Any, checkpoint: Checkpoint, project: IthacaProject, count_events: Any
) -> None:
    first = checkpoint("research", {"summary": "first look"})
    second = checkpoint("research", {"summary": "second look"})
    assert first["accepted"] and second["accepted"]
    assert second["checkpoint"]["revision"] == 2
    assert second["checkpoint"]["supersedes_id"] == first["checkpoint"]["id"]
    assert rows(project) == [
        ("research", 1, "superseded", None),
        ("research", 2, "accepted", first["checkpoint"]["id"]),
    ]
    assert second["checkpoint"]["id"] == "cp-" + second["checkpoint"]["digest"][:16]
    assert count_events("delivery.checkpoint_accepted") == 2


def test_supersession_is_one_transaction(
    opened_change: Any,
    checkpoint: Checkpoint,
    project: IthacaProject,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checkpoint("research", {"summary": "first look"})

    def broken(*args: Any, **kwargs: Any) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(journal, "append", broken)
    with pytest.raises(OSError):
        checkpoint("research", {"summary": "second look"})
    assert rows(project) == [("research", 1, "accepted", None)]


def test_an_unchanged_accept_changes_nothing(
    opened_change: Any, checkpoint: Checkpoint, project: IthacaProject, count_events: Any
) -> None:
    first = checkpoint("research", {"summary": "look"})
    before = count_events()
    again = checkpoint("research", {"summary": "look"})
    assert again["unchanged"] and again["accepted"]
    assert "CHECKPOINT_UNCHANGED" in codes(again)
    assert again["checkpoint"] == first["checkpoint"]
    assert count_events() == before
    checkpoint("research", {"summary": "look"}, operation="draft")
    kept = checkpoint("research")
    assert kept["unchanged"]
    assert [row[2] for row in rows(project)] == ["accepted", "abandoned"]


def test_a_draft_is_replaced_then_accepted_or_abandoned(
    opened_change: Any, checkpoint: Checkpoint, project: IthacaProject
) -> None:
    checkpoint("review", {"summary": "half way"}, operation="draft")
    replaced = checkpoint("review", {"summary": "nearly"}, operation="draft")
    assert replaced["checkpoint"]["status"] == "draft"
    assert replaced["accepted"] is False
    accepted = checkpoint("review")
    assert accepted["checkpoint"]["payload"]["summary"] == "nearly"
    assert accepted["checkpoint"]["revision"] == 1
    assert [row[2] for row in rows(project)] == ["accepted"]
    checkpoint("review", {"summary": "again"}, operation="draft")
    dropped = checkpoint("review", operation="abandon")
    assert dropped["checkpoint"]["status"] == "abandoned"
    with pytest.raises(NotFound) as caught:
        checkpoint("review", operation="abandon")
    assert caught.value.code == "CHECKPOINT_DRAFT_NOT_FOUND"
    with pytest.raises(NotFound):
        checkpoint("review")


def test_concurrent_accepts_in_two_processes_chain_cleanly(
    opened_change: Any, project: IthacaProject, project_dir: Path
) -> None:
    script = textwrap.dedent(
        """
        import sys
        from ithaca.app import open_project
        from ithaca.delivery.checkpoints import tool as checkpoints
        project = open_project(sys.argv[1])
        service = project.delivery
        for n in range(3):
            checkpoints.checkpoint(service.project, service.store, service.config, {
                "stage": "dev", "scope": {"change_id": "add-login"},
                "payload": {"summary": f"{sys.argv[2]} {n}"},
                "idempotency_key": f"{sys.argv[2]}-{n}"}, units=service.units)
        project.close()
        """
    )
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(project_dir), name], stderr=subprocess.PIPE
        )
        for name in ("left", "right")
    ]
    for racer in racers:
        _, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err.decode()
    found = rows(project)
    assert sorted(row[1] for row in found) == [1, 2, 3, 4, 5, 6]
    assert [row[2] for row in found].count("accepted") == 1
    ids = project.store.connection().execute(
        "SELECT id, supersedes_id, revision FROM delivery_checkpoints ORDER BY revision"
    )
    chain = ids.fetchall()
    for (previous_id, _, _), (_, supersedes, _) in zip(chain, chain[1:], strict=False):
        assert supersedes == previous_id
    assert (
        checkpoint_rows.read(project.store.connection(), "dev", "change", "add-login") is not None
    )


def test_a_replayed_key_returns_the_first_answer_and_a_reused_key_conflicts(
    opened_change: Any, checkpoint: Checkpoint, count_events: Any
) -> None:
    first = checkpoint("research", {"summary": "look"}, key="k-1")
    before = count_events()
    replay = checkpoint("research", {"summary": "look"}, key="k-1")
    assert replay["replayed"] is True
    assert replay["checkpoint"] == first["checkpoint"]
    assert count_events() == before
    with pytest.raises(Conflict) as caught:
        checkpoint("research", {"summary": "other"}, key="k-1")
    assert caught.value.code == "IDEMPOTENCY_KEY_REUSED"


def test_an_edited_row_is_detected(
    opened_change: Any, checkpoint: Checkpoint, project: IthacaProject
) -> None:
    checkpoint("research", {"summary": "look"})
    with project.store.write() as conn:
        conn.execute('UPDATE delivery_checkpoints SET payload = \'{"summary": "forged"}\'')
    with pytest.raises(Corrupt) as caught:
        checkpoint("research", {"summary": "next"})
    assert caught.value.code == "CHECKPOINT_DIGEST_MISMATCH"
    with pytest.raises(Corrupt):
        checkpoint_rows.read(project.store.connection(), "research", "change", "add-login")


def test_the_envelope_snapshot_is_stored_as_a_blob(
    opened_change: Any, checkpoint: Checkpoint, project: IthacaProject
) -> None:
    accepted = checkpoint("research", {"summary": "look"})["checkpoint"]
    blobs = BlobStore(project.project.blobs_dir)
    envelope = json.loads(blobs.get(accepted["envelope_digest"]))
    assert envelope["scope"]


# --- scope --------------------------------------------------------------------------------


def test_scope_errors(
    opened_change: Any, checkpoint: Checkpoint, new_change: Any, record: Any
) -> None:
    summary = {"summary": "s"}
    with pytest.raises(NotFound) as unknown:
        checkpoint("research", summary, scope={"change_id": "nope"})
    assert unknown.value.code == "CHECKPOINT_SCOPE_NOT_FOUND"
    with pytest.raises(NotFound) as no_task:
        checkpoint("dev", summary, scope={"task_id": "T-404"})
    assert no_task.value.code == "CHECKPOINT_SCOPE_NOT_FOUND"
    new_change("other-change")
    define(record, "T-1")
    with pytest.raises(InvalidInput) as mismatch:
        checkpoint("dev", summary, scope={"change_id": "other-change", "task_id": "T-1"})
    assert mismatch.value.code == "CHECKPOINT_SCOPE_MISMATCH"
    with pytest.raises(InvalidInput) as plan_scope:
        checkpoint("plan", summary, scope={"task_id": "T-1"})
    assert plan_scope.value.code == "PLAN_SCOPE_INVALID"
    with pytest.raises(NotFound) as no_baseline:
        checkpoint("research", summary, scope={"baseline": True})
    assert no_baseline.value.code == "CHECKPOINT_SCOPE_NOT_FOUND"
    project_wide = checkpoint("research", summary, scope={})
    assert project_wide["checkpoint"]["scope"] == {"type": "project", "id": None}


def test_an_archived_change_takes_no_checkpoint(
    opened_change: Any, checkpoint: Checkpoint, project: IthacaProject
) -> None:
    with project.store.write() as conn:
        conn.execute("UPDATE delivery_changes SET status = 'archived'")
    with pytest.raises(Refused) as caught:
        checkpoint("research", {"summary": "s"})
    assert caught.value.code == "CHANGE_ARCHIVED"


def test_malformed_payloads_are_refused_with_a_pointer(
    opened_change: Any, checkpoint: Checkpoint
) -> None:
    with pytest.raises(InvalidInput) as unknown:
        checkpoint("test", {"summary": "s", "data": {"result": "pass", "colour": "red"}})
    assert unknown.value.details["pointer"] == "/payload/data/colour"
    with pytest.raises(InvalidInput) as large:
        checkpoint("research", {"summary": "é" * 2049})
    assert large.value.details["pointer"] == "/payload/summary"
    with pytest.raises(InvalidInput) as no_payload:
        checkpoint("research", operation="draft")
    assert no_payload.value.details["pointer"] == "/payload"


# --- evidence -------------------------------------------------------------------------------


def test_a_bare_path_is_pinned_with_a_warning(
    opened_change: Any, checkpoint: Checkpoint, project_dir: Path
) -> None:
    (project_dir / "report.txt").write_text("all green\n")
    answer = checkpoint("test", {"summary": "ran", "evidence": [{"path": "./report.txt"}]})
    assert "EVIDENCE_UNBOUND" in codes(answer)
    pinned = answer["checkpoint"]["evidence"][0]
    assert pinned["path"] == "report.txt"
    assert pinned["digest"] == canon.digest_bytes(b"all green\n")


def test_evidence_bytes_are_re_read_and_must_match(
    opened_change: Any,
    checkpoint: Checkpoint,
    record: Any,
    project_dir: Path,
    project: IthacaProject,
    count_events: Any,
) -> None:
    (project_dir / "report.txt").write_text("all green\n")
    bound = record(
        "artifact",
        "bind",
        {"kind": "test_report", "scope": CHANGE, "path": "report.txt"},
    )["result"]["artifact"]
    answer = checkpoint("test", {"summary": "ran", "evidence": [{"artifact_id": bound["id"]}]})
    assert answer["checkpoint"]["evidence"][0]["role"] == "test_report"
    assert "EVIDENCE_UNBOUND" not in codes(answer)
    before = count_events()
    (project_dir / "report.txt").write_text("one failure\n")
    with pytest.raises(Corrupt) as edited:
        checkpoint("test", {"summary": "again", "evidence": [{"artifact_id": bound["id"]}]})
    assert edited.value.code == "EVIDENCE_DIGEST_MISMATCH"
    assert edited.value.details["pointer"] == "/payload/evidence/0"
    with pytest.raises(Corrupt) as stated:
        checkpoint(
            "test", {"summary": "s", "evidence": [{"path": "report.txt", "digest": "0" * 64}]}
        )
    assert stated.value.code == "EVIDENCE_DIGEST_MISMATCH"
    (project_dir / "report.txt").unlink()
    with pytest.raises(NotFound) as missing:
        checkpoint("test", {"summary": "s", "evidence": [{"artifact_id": bound["id"]}]})
    assert missing.value.code == "EVIDENCE_FILE_MISSING"
    with pytest.raises(NotFound) as gone:
        checkpoint("test", {"summary": "s", "evidence": [{"path": "report.txt"}]})
    assert gone.value.code == "EVIDENCE_FILE_MISSING"
    with pytest.raises(NotFound) as unknown:
        checkpoint("test", {"summary": "s", "evidence": [{"artifact_id": "art_nope"}]})
    assert unknown.value.code == "EVIDENCE_NOT_FOUND"
    assert count_events() == before
    assert [row[1] for row in rows(project)] == [1]


# --- stage warnings -----------------------------------------------------------------------------


def test_stage_warnings_never_block(
    opened_change: Any, checkpoint: Checkpoint, record: Any
) -> None:
    assert "RESEARCH_EVIDENCE_EMPTY" in codes(checkpoint("research", {"summary": "s"}))
    assert "WORKER_OUTCOME_MISSING" in codes(checkpoint("dev", {"summary": "s"}))
    assert "TEST_RESULT_MISSING" in codes(checkpoint("test", {"summary": "s"}))
    failed = checkpoint("test", {"summary": "s", "data": {"result": "fail"}})
    assert "TEST_FAILED" in codes(failed) and failed["accepted"]
    assert "REVIEW_VERDICT_MISSING" in codes(checkpoint("review", {"summary": "s"}))
    define(record, "T-1")
    deliver = checkpoint("deliver", {"summary": "s"}, scope=CHANGE)
    assert {"TASKS_OPEN"} <= set(codes(deliver))
    assert "TEST_CHECKPOINT_MISSING" not in codes(deliver)
    task_deliver = checkpoint("deliver", {"summary": "s"}, scope={"task_id": "T-1"})
    assert {"TEST_CHECKPOINT_MISSING", "REVIEW_CHECKPOINT_MISSING", "TASKS_OPEN"} <= set(
        codes(task_deliver)
    )


def test_an_incident_checkpoint_reports_diagnosis_gaps_and_refreshes_the_file(
    new_change: Any, checkpoint: Checkpoint, state_root: Path
) -> None:
    new_change("login-500", "incident", diagnosis={"reproduction": "POST /login"})
    path = state_root / "changes/active/login-500/diagnosis.md"
    path.unlink()
    answer = checkpoint("research", {"summary": "s"}, scope={"change_id": "login-500"})
    assert "DIAGNOSIS_SECTION_MISSING:root_cause" in codes(answer)
    assert "DIAGNOSIS_SECTION_MISSING:reproduction" not in codes(answer)
    assert "POST /login" in path.read_text()


# --- plans ------------------------------------------------------------------------------------


def test_a_plan_writes_waves_to_plan_json_and_plan_md(
    opened_change: Any, checkpoint: Checkpoint, record: Any, state_root: Path, project: Any
) -> None:
    define(record, "T-1", files=["src/app/"])
    define(record, "T-2", files=["src/app/login.py"])
    define(record, "T-3", deps=["T-1"], files=["docs/"])
    answer = checkpoint("plan", {"summary": "three tasks"})
    assert answer["plan"]["waves"] == [
        {"index": 1, "parallel": False, "tasks": ["T-1"]},
        {"index": 2, "parallel": False, "tasks": ["T-2"]},
        {"index": 3, "parallel": False, "tasks": ["T-3"]},
    ]
    folder = state_root / "changes/active/add-login"
    document = json.loads((folder / "plan.json").read_text())
    assert document["schema"] == "ithaca.plan/1"
    assert document["checkpoint_revision"] == 1
    assert document["digest"] == canon.digest_excluding(document, "digest")
    assert [task["id"] for task in document["tasks"]] == ["T-1", "T-2", "T-3"]
    assert "## Wave 3 (alone)" in (folder / "plan.md").read_text()
    registered = project.store.connection().execute(
        "SELECT path FROM delivery_files WHERE kind = 'plan' ORDER BY path"
    )
    assert [row[0] for row in registered] == [
        "changes/active/add-login/plan.json",
        "changes/active/add-login/plan.md",
    ]
    define(record, "T-4", files=["lib/"])
    replanned = checkpoint("plan", {"summary": "three tasks"})
    assert replanned["checkpoint"]["revision"] == 2
    assert json.loads((folder / "plan.json").read_text())["checkpoint_revision"] == 2


def test_a_dependency_cycle_keeps_the_draft(
    opened_change: Any, checkpoint: Checkpoint, record: Any, state_root: Path
) -> None:
    define(record, "T-1", deps=["T-2"])
    define(record, "T-2", deps=["T-1"])
    answer = checkpoint("plan", {"summary": "circular"})
    assert answer["accepted"] is False
    assert answer["checkpoint"]["status"] == "draft"
    cycle = [found for found in answer["diagnostics"] if found["code"] == "PLAN_DEP_CYCLE"]
    assert cycle and cycle[0]["severity"] == "hard_conflict"
    assert not (state_root / "changes/active/add-login/plan.json").exists()
    record("task_contract", "revise", {"id": "T-2", "patch": {"deps": []}})
    fixed = checkpoint("plan")
    assert fixed["accepted"] and fixed["checkpoint"]["payload"]["summary"] == "circular"


def test_an_unknown_dependency_is_a_hard_conflict_and_no_tasks_a_warning(
    opened_change: Any, checkpoint: Checkpoint, record: Any
) -> None:
    assert "PLAN_NO_TASKS" in codes(checkpoint("plan", {"summary": "empty"}))
    define(record, "T-1", deps=["T-9"])
    answer = checkpoint("plan", {"summary": "dangling"})
    assert answer["accepted"] is False
    assert "PLAN_DEP_UNKNOWN" in codes(answer)
