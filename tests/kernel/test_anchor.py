"""The journal's anchor: a tail deleted or a database emptied behind Ithaca's back is
reported by the doctor, never taken for a new project; a routine check reads every row."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import init_project
from ithaca.kernel import anchor, doctor, journal, journal_check
from ithaca.kernel.errors import Corrupt
from ithaca.kernel.store import Store

KEY = bytes(range(32))


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


def test_a_routine_check_reads_the_rows_it_verified_before(project):
    assert doctor.check(project.project, project.store)["ok"]
    raw(project).execute("UPDATE journal SET kind = 'forged' WHERE seq = 2")
    for full in (False, False, True):
        assert "JOURNAL_CHAIN_BROKEN" in codes(
            doctor.check(project.project, project.store, full=full)
        )


def test_a_reader_racing_the_writer_never_takes_a_half_written_record(tmp_path):
    heads = [(seq, f"{seq:064x}") for seq in range(1, 3001)]
    done = threading.Event()

    def keep_writing() -> None:
        for head in heads:
            anchor.write(str(tmp_path), anchor.ANCHOR, head, KEY)
        done.set()

    anchor.write(str(tmp_path), anchor.ANCHOR, heads[0], KEY)
    writer = threading.Thread(target=keep_writing)
    writer.start()
    seen = []
    while not done.is_set():
        seen.append(anchor.read(str(tmp_path), anchor.ANCHOR))
    writer.join()
    assert seen and all(head in heads for head in seen)


def test_a_garbled_record_is_no_anchor(tmp_path):
    anchor.write(str(tmp_path), anchor.ANCHOR, (12, "ab" * 32), KEY)
    path = tmp_path / anchor.ANCHOR
    path.write_bytes(path.read_bytes().replace(b"ab", b"ba", 1))
    assert anchor.read(str(tmp_path), anchor.ANCHOR) is None


def test_the_seal_is_hmac_sha256():
    import hashlib
    import hmac

    message = b"journal anchor\n12 " + b"ab" * 32
    assert anchor.mac(KEY, message) == hmac.new(KEY, message, hashlib.sha256).hexdigest()


def test_an_older_releases_anchor_is_an_upgrade_not_a_forgery(project, tmp_path):
    runtime = project.project.runtime
    head = journal.head(project.store.connection())
    assert head is not None
    Path(anchor.head_path(runtime)).unlink()  # as before this release: no head record
    body = f"{head[0]:>20} {head[1]}"
    Path(runtime, anchor.ANCHOR).write_bytes(f"{body} {anchor._check(body)}\n".encode())
    assert anchor.problems(runtime, project.store.connection()) == []
    with project.store.write() as conn:  # the next commit seals both records
        journal.append(conn, actor="user", kind="test.event", subject="after", payload={})
    sealed = anchor.read_record(str(Path(runtime, anchor.ANCHOR)))
    assert sealed is not None and sealed[2] and anchor.read_record(anchor.head_path(runtime))
    assert doctor.check(project.project, project.store)["ok"]


def test_an_anchor_another_home_sealed_is_checked_unsealed(project, tmp_path, monkeypatch):
    runtime = project.project.runtime
    own_home = os.environ["ITHACA_HOME"]
    monkeypatch.setenv("ITHACA_HOME", str(tmp_path / "another-home"))
    with project.store.write() as conn:  # a commit from a process with another home
        journal.append(conn, actor="user", kind="test.event", subject="other", payload={})
    assert anchor.problems(runtime, project.store.connection()) == []
    monkeypatch.setenv("ITHACA_HOME", own_home)
    assert anchor.problems(runtime, project.store.connection()) == []
    assert doctor.check(project.project, project.store)["ok"]
