"""The store: pragmas, write transactions, per-thread connections and migrations."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from ithaca.kernel import journal, journal_check
from ithaca.kernel.connection import LATEST_VERSION, connect
from ithaca.kernel.errors import Refused
from ithaca.kernel.store import Store, split_statements


@pytest.fixture
def store(tmp_path):
    opened = Store(tmp_path / "state.db", backups_dir=tmp_path / "backups")
    yield opened
    opened.close()


def test_new_store_is_migrated_to_the_latest_schema_with_one_journal_event(store):
    assert store.version() == LATEST_VERSION
    events = journal.query(store.connection(), kind="kernel.migrated")
    assert len(events) == 1
    assert events[0]["payload"]["to"] == LATEST_VERSION


def test_connections_use_wal_busy_timeout_and_foreign_keys(store):
    conn = store.connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_each_thread_gets_its_own_connection(store):
    seen = []
    thread = threading.Thread(target=lambda: seen.append(store.connection()))
    thread.start()
    thread.join()
    assert seen[0] is not store.connection()


def test_write_rolls_back_everything_when_the_block_raises(store):
    before = len(journal.query(store.connection()))
    with pytest.raises(RuntimeError), store.write() as conn:
        journal.append(conn, actor="system", kind="kernel.test", subject=None, payload={})
        raise RuntimeError("boom")
    assert len(journal.query(store.connection())) == before


def test_write_takes_the_write_lock_at_begin(store, tmp_path):
    other = connect(tmp_path / "state.db")
    other.execute("PRAGMA busy_timeout = 0")
    with store.write(), pytest.raises(sqlite3.OperationalError):
        other.execute("BEGIN IMMEDIATE")
    other.close()


def test_concurrent_writers_from_threads_all_commit(store):
    def work():
        for _ in range(25):
            with store.write() as conn:
                journal.append(conn, actor="system", kind="kernel.test", subject=None, payload={})

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(journal.query(store.connection(), kind="kernel.test")) == 100
    assert journal_check.verify(store.connection()) == []


def test_migrating_an_existing_database_takes_a_backup_first(tmp_path):
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE journal (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, actor TEXT NOT NULL,"
        " kind TEXT NOT NULL, subject TEXT, payload TEXT NOT NULL, prev_hash TEXT NOT NULL,"
        " hash TEXT NOT NULL);"
        "CREATE TABLE host_sessions (host TEXT, host_session_id TEXT, first_seen_at TEXT,"
        " last_seen_at TEXT, ended_at TEXT, PRIMARY KEY (host, host_session_id));"
        "CREATE TABLE gate_state (part TEXT, scope_key TEXT, state_json TEXT, updated_seq INT,"
        " PRIMARY KEY (part, scope_key));"
        "CREATE TABLE write_allowances (path TEXT, owner TEXT, created_at TEXT,"
        " PRIMARY KEY (path, owner));"
        "PRAGMA user_version = 1;"
    )
    conn.close()
    store = Store(path, backups_dir=tmp_path / "backups")
    assert store.version() == LATEST_VERSION
    backups = list((tmp_path / "backups").glob("state-pre-migration-v1-*.db"))
    assert len(backups) == 1
    copy = sqlite3.connect(backups[0])
    assert copy.execute("PRAGMA user_version").fetchone()[0] == 1
    copy.close()
    store.close()


def test_a_database_from_a_newer_ithaca_is_refused(tmp_path):
    path = tmp_path / "state.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    conn.close()
    with pytest.raises(Refused) as raised:
        Store(path)
    assert raised.value.code == "STATE_TOO_NEW"


def test_split_statements_keeps_trigger_bodies_whole():
    script = (
        "CREATE TABLE t (a);\n"
        "CREATE TRIGGER t_no_delete BEFORE DELETE ON t\n"
        "BEGIN SELECT RAISE(ABORT, 'no'); END;\n"
        "INSERT INTO t VALUES (1);\n"
    )
    statements = split_statements(script)
    assert len(statements) == 3
    assert statements[1].endswith("END;")


def test_a_store_that_writes_keeps_verified_backups_and_never_one_of_a_cut_journal(tmp_path):
    from ithaca.kernel import doctor
    from ithaca.kernel.project import Project

    root = tmp_path / "repo"
    project = Project(str(root), str(root / ".ithaca"), str(root))
    os.makedirs(project.runtime)
    kept = Store(project.db_path, backups_dir=project.backups_dir, auto_backup=True)
    with kept.write() as conn:
        journal.append(conn, actor="user", kind="test.event", subject="1", payload={})
    kept.close()  # a store that wrote backs up on closing: the CLI's one copy per command
    taken = sorted(Path(project.backups_dir).glob("state-*-auto.db"))
    assert len(taken) == 1
    _, manifest = doctor.verified_backup(project, taken[0].name)  # what a restore takes
    copy = sqlite3.connect(taken[0])
    assert (manifest["journal_head_seq"], manifest["journal_head_hash"]) == journal.head(copy)
    copy.close()

    raw = sqlite3.connect(project.db_path, isolation_level=None)
    raw.execute("DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal)")  # a lost tail
    raw.close()
    cut = Store(project.db_path, backups_dir=project.backups_dir, auto_backup=True)
    assert cut.keep_backup() is None  # it would rotate the good copies away
    cut.close()
    assert sorted(Path(project.backups_dir).glob("state-*-auto.db")) == taken


def test_automatic_backups_are_rotated_and_others_kept(tmp_path, monkeypatch):
    from ithaca.kernel import store as store_module

    monkeypatch.setattr(store_module, "AUTO_BACKUPS_KEPT", 2)
    backups = tmp_path / "backups"
    backups.mkdir()
    (backups / "state-20000101T000000000Z.db").write_bytes(b"by hand")
    kept = Store(tmp_path / "state.db", backups_dir=backups, auto_backup=True)
    made = [kept.keep_backup() for _ in range(3)]
    kept.close()
    assert all(made)
    names = sorted(path.name for path in backups.glob("state-*.db"))
    assert names == ["state-20000101T000000000Z.db", *(Path(str(p)).name for p in made[1:])]


def test_a_large_database_is_copied_at_most_once_a_minute(tmp_path, monkeypatch):
    from ithaca.kernel import store as store_module

    monkeypatch.setattr(store_module, "SMALL_DATABASE_BYTES", 0)  # every database is large
    backups = tmp_path / "backups"

    def one_command(subject: str) -> None:  # a CLI command that writes, then exits
        command = Store(tmp_path / "state.db", backups_dir=backups, auto_backup=True)
        with command.write() as conn:
            journal.append(conn, actor="user", kind="test.event", subject=subject, payload={})
        command.close()

    one_command("first")
    one_command("second")  # within the minute: no second copy of a large database
    assert len(list(backups.glob("state-*-auto.db"))) == 1
    old = time.time() - store_module.BACKUP_EVERY_S - 1
    for path in backups.glob("state-*-auto.db"):
        os.utime(path, (old, old))
    one_command("third")
    assert len(list(backups.glob("state-*-auto.db"))) == 2
