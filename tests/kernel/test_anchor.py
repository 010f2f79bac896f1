"""The journal's anchor: a tail deleted or a database emptied behind Ithaca's back is
reported by the doctor, never taken for a new project; routine checks verify only what
was appended since the last one."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import init_project
from ithaca.kernel import anchor, doctor, journal, journal_check
from ithaca.kernel.errors import Corrupt
from ithaca.kernel.store import Store


@pytest.fixture
def project(tmp_path: Path):
    opened, _ = init_project(tmp_path)
    with opened.store.write() as conn:
        for n in range(5):
            journal.append(conn, actor="user", kind="test.event", subject=str(n), payload={})
    yield opened
    opened.close()


def codes(report: dict[str, Any]) -> set[str]:
    return {finding["code"] for finding in report["findings"]}


def raw(project) -> sqlite3.Connection:
    return sqlite3.connect(project.project.db_path, isolation_level=None)


def test_every_commit_leaves_the_journal_head_as_the_anchor(project):
    head = journal.head(project.store.connection())
    assert anchor.read(project.project.runtime, anchor.ANCHOR) == head


def test_a_deleted_tail_is_reported_although_the_chain_still_verifies(project):
    raw(project).execute("DELETE FROM journal WHERE seq > (SELECT max(seq) - 2 FROM journal)")
    assert journal_check.verify(project.store.connection()) == []
    report = doctor.check(project.project, project.store)
    assert not report["ok"] and "JOURNAL_TAIL_MISSING" in codes(report)


def test_an_emptied_database_is_tampering_not_a_new_project(project):
    project.store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(project.project.db_path + suffix).unlink(missing_ok=True)
    Path(project.project.db_path).write_bytes(b"")
    store = Store(project.project.db_path, migrate=False)
    report = doctor.check(project.project, store)
    assert "STATE_EMPTIED" in codes(report) and "STATE_NEEDS_MIGRATION" not in codes(report)
    with pytest.raises(Corrupt) as refused:
        store.migrate()
    assert refused.value.code == "STATE_EMPTIED"
    assert store.connection().execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    store.close()


def test_a_routine_check_verifies_what_is_new_and_full_verifies_all(project):
    assert doctor.check(project.project, project.store)["ok"]
    raw(project).execute("UPDATE journal SET kind = 'forged' WHERE seq = 2")
    assert doctor.check(project.project, project.store)["ok"]  # before the verified point
    full = doctor.check(project.project, project.store, full=True)
    assert "JOURNAL_CHAIN_BROKEN" in codes(full)
    with project.store.write() as conn:
        journal.append(conn, actor="user", kind="test.event", subject="new", payload={})
    raw(project).execute(
        "UPDATE journal SET kind = 'forged' WHERE seq = (SELECT max(seq) FROM journal)"
    )
    assert "JOURNAL_CHAIN_BROKEN" in codes(doctor.check(project.project, project.store))


def test_a_reader_racing_the_writer_never_takes_a_half_written_record(tmp_path):
    heads = [(seq, f"{seq:064x}") for seq in range(1, 3001)]
    done = threading.Event()

    def keep_writing() -> None:
        for head in heads:
            anchor.write(str(tmp_path), anchor.ANCHOR, head)
        done.set()

    anchor.write(str(tmp_path), anchor.ANCHOR, heads[0])
    writer = threading.Thread(target=keep_writing)
    writer.start()
    seen = []
    while not done.is_set():
        seen.append(anchor.read(str(tmp_path), anchor.ANCHOR))
    writer.join()
    assert seen and all(head in heads for head in seen)


def test_a_garbled_record_is_no_anchor(tmp_path):
    anchor.write(str(tmp_path), anchor.ANCHOR, (12, "ab" * 32))
    path = tmp_path / anchor.ANCHOR
    path.write_bytes(path.read_bytes().replace(b"ab", b"ba", 1))
    assert anchor.read(str(tmp_path), anchor.ANCHOR) is None
