"""Every damage the doctor reports names the command that recovers from it: the newest
backup that still verifies, by its path, else a rebuild from the tracked files; a backup
that no longer verifies is never the one named, and a copy of a damaged database never
becomes a backup (docs/delivery.md, ``doctor``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import init_project
from ithaca.kernel import doctor, journal
from ithaca.kernel.errors import Corrupt

REBUILD = "ithaca doctor --rebuild"


@pytest.fixture
def project(tmp_path: Path):
    opened, _ = init_project(tmp_path)
    with opened.store.write() as conn:
        for n in range(5):
            journal.append(conn, actor="user", kind="test.event", subject=str(n), payload={})
    yield opened
    opened.close()


def broken_row(project: Any) -> None:
    """An old journal row edited behind Ithaca's back, as ``sqlite3 state.db`` would."""
    conn = sqlite3.connect(project.project.db_path, isolation_level=None)
    conn.execute("UPDATE journal SET payload = '{\"forged\":1}' WHERE seq = 3")
    conn.close()


def recovery_of(report: dict[str, Any], code: str) -> dict[str, Any]:
    found = [finding for finding in report["findings"] if finding["code"] == code]
    assert found, report["findings"]
    return dict(found[0]["recovery"])


def test_a_broken_chain_names_the_newest_backup_that_verifies(project) -> None:
    good = doctor.backup(project.project, project.store)["path"]
    newer = doctor.backup(project.project, project.store)["path"]
    with open(newer, "r+b") as stream:  # the newer backup no longer matches its manifest
        stream.seek(300)
        stream.write(b"\x07")
    broken_row(project)

    report = doctor.check(project.project, project.store)

    recovery = recovery_of(report, "JOURNAL_CHAIN_BROKEN")
    assert recovery == {"backup": good, "commands": [f"ithaca doctor restore {good}", REBUILD]}
    assert report["recovery"] == recovery
    message = next(f["message"] for f in report["findings"] if f["code"] == "JOURNAL_CHAIN_BROKEN")
    assert f"`ithaca doctor restore {good}`" in message and f"`{REBUILD}`" in message


def test_without_a_backup_the_rebuild_is_named(project) -> None:
    broken_row(project)

    report = doctor.check(project.project, project.store)

    assert recovery_of(report, "JOURNAL_CHAIN_BROKEN") == {"backup": None, "commands": [REBUILD]}


def test_a_cut_journal_names_the_restore_or_accepting_it(project) -> None:
    good = doctor.backup(project.project, project.store)["path"]
    conn = sqlite3.connect(project.project.db_path, isolation_level=None)
    conn.execute("DELETE FROM journal WHERE seq > (SELECT max(seq) - 2 FROM journal)")
    conn.close()

    report = doctor.check(project.project, project.store)

    commands = recovery_of(report, "JOURNAL_TAIL_MISSING")["commands"]
    assert commands == [f"ithaca doctor restore {good}", "ithaca doctor lift-lockdown"]


def test_a_database_whose_copy_fails_its_checks_leaves_no_backup(project) -> None:
    good = doctor.backup(project.project, project.store)["path"]
    broken_row(project)  # the copy would carry the broken chain
    before = sorted(os.listdir(project.project.backups_dir))

    with pytest.raises(Corrupt) as refused:
        doctor.repair(project.project, project.store)

    assert refused.value.code == "BACKUP_FAILED"
    assert f"`ithaca doctor restore {good}`" in refused.value.message
    assert sorted(os.listdir(project.project.backups_dir)) == before
    assert doctor.newest_verified_backup(project.project) == good


def test_a_temp_file_a_killed_output_write_left_is_reported_and_repaired(project) -> None:
    outputs = Path(project.project.work_dir) / "outputs" / "ses_killed"
    outputs.mkdir(parents=True)
    left = outputs / ".ithaca-0123456789abcdef.tmp"
    left.write_text('{"task_id": "T-1", "sta')  # a worker output cut by the kill

    report = doctor.check(project.project, project.store)

    found = [f for f in report["findings"] if f["code"] == "TEMP_FILE_LEFT"]
    assert [f["subject"] for f in found] == [".ithaca-work/outputs/ses_killed/" + left.name]
    assert found[0]["path"] == str(left)
    repaired = doctor.repair(project.project, project.store)
    assert not left.exists()
    assert any(left.name in line for line in repaired["repaired"])
    assert not [
        f
        for f in doctor.check(project.project, project.store)["findings"]
        if f["code"] == "TEMP_FILE_LEFT"
    ]
