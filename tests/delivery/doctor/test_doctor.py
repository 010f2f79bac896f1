"""``ithaca doctor`` with delivery's provider: inspect reads only and finds edited files,
dead writers' intents and orphaned tasks; repair backs up first or does nothing; restore
rolls back a replacement that fails; rebuild loads the database from tracked files."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from click.testing import CliRunner

from ithaca.app import IthacaProject, open_project
from ithaca.cli.entry import cli
from ithaca.kernel import canon, doctor, journal, journal_check
from ithaca.kernel.errors import Corrupt, InvalidInput, NotFound

DECISION = {
    "id": "dec-database",
    "scope": {"baseline": True},
    "question": "Which database?",
    "recommendation": "SQLite",
    "owner": "maria",
    "selection": {"choice": "SQLite", "rationale": "one file"},
}


def run(project_dir: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--project", str(project_dir), *args])


def inspect(project_dir: Path) -> dict[str, Any]:
    result = run(project_dir, "doctor", "--json")
    return dict(json.loads(result.output))


def codes(report: dict[str, Any]) -> set[tuple[str, str | None]]:
    return {(f["code"], f.get("subject")) for f in report["findings"]}


def dump(project: IthacaProject) -> list[str]:
    """Every row, but the seals the doctor keeps over the journal's pages (its own
    bookkeeping, written when a check found the journal whole)."""
    return [
        line
        for line in project.store.connection().iterdump()
        if not line.startswith('INSERT INTO "journal_seals"')
    ]


def tree(state_root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(state_root)): path.read_bytes()
        for path in sorted(state_root.rglob("*"))
        if path.is_file() and ".runtime" not in path.parts
    }


def dead_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def leave_dead_intent(project: IthacaProject, state_root: Path) -> Path:
    """What a writer killed between writing a new file and committing leaves behind."""
    orphan = state_root / "decisions/baseline/dec-orphan.json"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b'{"id": "dec-orphan"}\n')
    steps = {
        "targets": [
            {
                "path": "decisions/baseline/dec-orphan.json",
                "expected": canon.digest_bytes(orphan.read_bytes()),
                "previous": None,
                "copy": None,
            }
        ]
    }
    with project.store.write() as conn:
        conn.execute(
            "INSERT INTO delivery_fs_intents (id, op, status, owner_pid, owner_start, steps,"
            " created_at, updated_at) VALUES ('int_dead', 'decision.accept', 'pending', ?,"
            " NULL, ?, 'x', 'x')",
            (dead_pid(), canon.canonical_text(steps)),
        )
    return orphan


@pytest.fixture
def recorded(record: Any, new_change: Any) -> None:
    new_change()
    record("decision", "accept", DECISION)
    record("decision", "accept", {**DECISION, "id": "dec-cache", "question": "Which cache?"})
    record(
        "decision", "accept", {**DECISION, "id": "dec-login", "scope": {"change_id": "add-login"}}
    )
    record(
        "artifact",
        "bind",
        {
            "kind": "research",
            "scope": {"change_id": "add-login"},
            "path": "research/notes.md",
            "content": "notes\n",
        },
    )


# --- inspect --------------------------------------------------------------------------------


def test_a_healthy_project_inspects_clean_and_inspecting_writes_nothing(
    recorded: None, project: IthacaProject, project_dir: Path, state_root: Path
) -> None:
    rows, files = dump(project), tree(state_root)

    report = inspect(project_dir)

    assert report["ok"] is True and report["status"] == "healthy"
    assert report["findings"] == []
    assert {"integrity", "schema", "journal", "delivery"} <= {c["id"] for c in report["checks"]}
    assert {c["status"] for c in report["checks"]} == {"ok"}
    assert dump(project) == rows
    assert tree(state_root) == files


def test_a_changed_a_missing_and_an_unregistered_file_are_reported(
    recorded: None, project_dir: Path, state_root: Path
) -> None:
    decision = state_root / "decisions/baseline/dec-database.json"
    decision.write_text(decision.read_text().replace("SQLite", "Postgres"))
    (state_root / "changes/active/add-login/research/notes.md").unlink()
    (state_root / "specs").mkdir()
    (state_root / "specs/hand-written.md").write_text("by hand\n")

    report = inspect(project_dir)

    assert codes(report) == {
        ("FILE_DIGEST_MISMATCH", "decisions/baseline/dec-database.json"),
        ("FILE_MISSING", "changes/active/add-login/research/notes.md"),
        ("FILE_UNREGISTERED", "specs/hand-written.md"),
    }
    assert report["status"] == "corrupt"
    assert run(project_dir, "doctor").exit_code == 1
    failed = [c for c in report["checks"] if c["id"] == "delivery"]
    assert {c["status"] for c in failed} == {"error", "warning"}


def test_an_edited_journal_row_is_reported_by_its_seq(
    recorded: None, project: IthacaProject, project_dir: Path
) -> None:
    seq = journal.query(project.store.connection(), kind="delivery.decision_accepted")[0]["seq"]
    with project.store.write() as conn:
        conn.execute("UPDATE journal SET subject = 'dec-forged' WHERE seq = ?", (seq,))

    report = inspect(project_dir)

    assert codes(report) == {("JOURNAL_CHAIN_BROKEN", str(seq))}
    assert report["status"] == "corrupt"


def test_an_edited_checkpoint_row_fails_its_digest(
    project: IthacaProject, project_dir: Path
) -> None:
    body: dict[str, Any] = {
        "stage": "research",
        "scope_type": "project",
        "scope_id": None,
        "revision": 1,
        "payload": {"summary": "read the code"},
        "evidence": [],
        "diagnostics": [],
        "envelope_digest": None,
        "supersedes_id": None,
    }
    with project.store.write() as conn:
        conn.execute(
            "INSERT INTO delivery_checkpoints (id, stage, scope_type, revision, status, payload,"
            " evidence, diagnostics, digest, created_at, updated_at) VALUES ('cp-1', 'research',"
            " 'project', 1, 'accepted', ?, '[]', '[]', ?, 'x', 'x')",
            (canon.canonical_text(body["payload"]), canon.digest(body)),
        )
    assert inspect(project_dir)["findings"] == []

    with project.store.write() as conn:
        conn.execute('UPDATE delivery_checkpoints SET payload = \'{"summary": "skipped"}\'')

    assert codes(inspect(project_dir)) == {("CHECKPOINT_DIGEST_MISMATCH", "cp-1")}


# --- repair ---------------------------------------------------------------------------------


def test_repair_backs_up_first_then_rolls_back_a_dead_writers_intent(
    project: IthacaProject, project_dir: Path, state_root: Path
) -> None:
    orphan = leave_dead_intent(project, state_root)
    inspected = inspect(project_dir)
    assert codes(inspected) == {("RECOVERY_PENDING", "int_dead")}  # the file is the unit's
    (unit,) = inspected["findings"]
    assert unit["files"] == [{"path": "decisions/baseline/dec-orphan.json", "state": "written"}]
    assert unit["fix"] == "ithaca doctor --repair"
    assert orphan.exists()  # inspecting recovered nothing

    result = run(project_dir, "doctor", "--repair", "--json")

    report = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert report["repaired"] == ["delivery: intent int_dead rolled_back"]
    assert report["status"] == "healthy"
    assert not orphan.exists()
    kinds = [e["kind"] for e in journal.query(project.store.connection(), kind="delivery.")]
    assert kinds[-2:] == ["delivery.intent_rolled_back", "delivery.doctor_repaired"]
    backup = Path(report["backup"]["path"])
    manifest = json.loads(backup.with_suffix(".json").read_text())
    assert manifest["sha256"] == canon.digest_bytes(backup.read_bytes())
    with sqlite3.connect(backup) as copy:  # taken before the repair: the intent is pending
        pending = copy.execute("SELECT status FROM delivery_fs_intents WHERE id = 'int_dead'")
        assert pending.fetchone() == ("pending",)


def test_repair_returns_an_orphaned_in_progress_task_to_pending(
    record: Any, project: IthacaProject, project_dir: Path
) -> None:
    record("task_contract", "define", {"id": "T-1", "title": "t", "verification": {"argv": ["x"]}})
    with project.store.write() as conn:
        conn.execute("UPDATE delivery_tasks SET status = 'in_progress'")
    assert codes(inspect(project_dir)) == {("TASK_SESSION_MISSING", "T-1")}

    report = json.loads(run(project_dir, "doctor", "--repair", "--json").output)

    assert report["repaired"] == ["delivery: task T-1 returned to pending"]
    status = project.store.connection().execute("SELECT status FROM delivery_tasks").fetchone()
    assert status == ("pending",)
    repaired = journal.query(project.store.connection(), kind="delivery.doctor_repaired")
    assert repaired[-1]["payload"] == {"step": "orphaned_tasks", "tasks": ["T-1"], "to": "pending"}


def test_a_failing_backup_stops_the_repair_before_anything_changes(
    project: IthacaProject, project_dir: Path, state_root: Path
) -> None:
    orphan = leave_dead_intent(project, state_root)
    backups = Path(project.project.backups_dir)
    shutil.rmtree(backups)
    backups.write_text("a file where the backups folder should be")
    rows = dump(project)

    result = run(project_dir, "doctor", "--repair", "--json")

    assert result.exit_code == 1
    assert json.loads(result.stderr)["error"]["code"] == "BACKUP_FAILED"
    assert orphan.exists()
    assert dump(project) == rows


# --- backups and restore --------------------------------------------------------------------


def test_restore_puts_back_the_backed_up_state_and_quarantines_the_current_one(
    recorded: None, project: IthacaProject, record: Any
) -> None:
    taken = doctor.backup(project.project, project.store)
    record("decision", "accept", {**DECISION, "id": "dec-later", "question": "Later?"})

    restored = doctor.restore(project.project, project.store, taken["path"])

    reopened = open_project(project.project.root)
    try:
        conn = reopened.store.connection()
        ids = {row[0] for row in conn.execute("SELECT id FROM delivery_decisions")}
        assert "dec-later" not in ids and "dec-database" in ids
        assert journal_check.verify(conn) == []
        last = journal.query(conn, kind="kernel.doctor_restored")
        assert [e["actor"] for e in last] == ["user"]
    finally:
        reopened.close()
    assert (Path(restored["quarantine"]) / "state.db").is_file()


def test_a_backup_that_differs_from_its_manifest_or_lies_elsewhere_is_refused(
    project: IthacaProject, tmp_path: Path
) -> None:
    taken = doctor.backup(project.project, project.store)
    with sqlite3.connect(taken["path"]) as conn:
        conn.execute("UPDATE journal SET actor = 'user' WHERE seq = 1")
    before = dump(project)

    with pytest.raises(Corrupt) as refused:
        doctor.restore(project.project, project.store, taken["path"])
    assert refused.value.code == "BACKUP_INVALID"
    elsewhere = tmp_path / "state.db"
    shutil.copyfile(taken["path"], elsewhere)
    with pytest.raises(NotFound) as missing:
        doctor.restore(project.project, project.store, str(elsewhere))
    assert missing.value.code == "BACKUP_NOT_FOUND"
    assert dump(project) == before


def test_a_restore_that_fails_once_in_place_moves_the_quarantined_files_back(
    recorded: None, project: IthacaProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = doctor.backup(project.project, project.store)
    before = dump(project)
    project.store.close()

    def truncated_copy(source: BinaryIO, target: BinaryIO) -> None:
        target.write(source.read(4096))

    monkeypatch.setattr(doctor.shutil, "copyfileobj", truncated_copy)
    with pytest.raises(Corrupt):
        doctor.restore(project.project, project.store, taken["path"])

    assert dump(project) == before
    assert not list(Path(project.project.runtime, "recovery").glob("quarantine-*"))


# --- rebuild --------------------------------------------------------------------------------


def test_rebuild_loads_decisions_changes_and_files_and_reports_the_losses(
    recorded: None, project: IthacaProject, state_root: Path, project_dir: Path
) -> None:
    forged = state_root / "decisions/baseline/dec-cache.json"
    forged.write_text(forged.read_text().replace("Which cache?", "Which queue?"))
    project.store.close()
    Path(project.project.db_path).write_bytes(b"not a database at all")

    report = doctor.rebuild(project.project, project.store)

    delivery = report["parts"][0]
    assert delivery["loaded"] == {
        "changes": 1,
        "decisions": 2,
        "files": 6,
    }  # with the shipped template and the team ledger
    assert delivery["warnings"] == [
        "decisions/baseline/dec-cache.json not loaded: fails its own digest"
    ]
    assert report["quarantined_db_sha256"] == canon.digest_bytes(b"not a database at all")
    reopened = open_project(project_dir)
    try:
        conn = reopened.store.connection()
        assert conn.execute("SELECT id, status FROM delivery_changes").fetchall() == [
            ("add-login", "active")
        ]
        rebuilt = journal.query(conn, kind="delivery.doctor_rebuilt")
        assert rebuilt[0]["payload"]["quarantined_db_sha256"] == report["quarantined_db_sha256"]
        assert doctor.losses(report["quarantine"], conn) == {"unreadable": "file is not a database"}
    finally:
        reopened.close()
    after = inspect(project_dir)
    assert codes(after) == {("FILE_UNREGISTERED", "decisions/baseline/dec-cache.json")}


def test_rebuild_counts_the_rows_it_could_not_recover(
    recorded: None, project: IthacaProject, project_dir: Path
) -> None:
    project.store.close()

    report = doctor.rebuild(project.project, project.store)

    reopened = open_project(project_dir)
    try:
        lost = doctor.losses(report["quarantine"], reopened.store.connection())
    finally:
        reopened.close()
    assert lost["delivery_idempotency"] == 5  # one key per recorded entry
    assert lost["delivery_artifacts"] == 1
    assert "delivery_decisions" not in lost and "delivery_files" not in lost
    assert lost["journal"] > 0


def test_rebuild_and_restore_are_refused_without_a_terminal(
    project: IthacaProject, project_dir: Path
) -> None:
    taken = doctor.backup(project.project, project.store)
    before = dump(project)

    for args in (("doctor", "--rebuild"), ("doctor", "restore", Path(taken["path"]).name)):
        result = run(project_dir, *args)
        assert result.exit_code == 1
        assert "USER_ONLY" in result.output

    assert dump(project) == before


def test_the_tool_entry_inspects_by_default_and_repairs_on_request(
    project: IthacaProject,
) -> None:
    from ithaca.delivery.doctor.tool import doctor as tool

    inspected = tool(project.project, project.store, project.config, {})
    repaired = tool(project.project, project.store, project.config, {"operation": "repair"})

    assert inspected["status"] == "healthy" and inspected["backup"] is None
    assert Path(repaired["backup"]["path"]).is_file()
    with pytest.raises(InvalidInput):
        tool(project.project, project.store, project.config, {"operation": "rebuild"})
