"""The hash-chained journal: appends, queries and tamper detection."""

from __future__ import annotations

import pytest

from ithaca.kernel import journal, journal_check
from ithaca.kernel.errors import InvalidInput
from ithaca.kernel.store import Store


@pytest.fixture
def conn(tmp_path):
    store = Store(tmp_path / "state.db")
    yield store.connection()
    store.close()


def _append(conn, kind="demo.thing", subject="s1", payload=None):
    conn.execute("BEGIN IMMEDIATE")
    seq = journal.append(conn, actor="system", kind=kind, subject=subject, payload=payload or {})
    conn.execute("COMMIT")
    return seq


def test_events_chain_from_the_previous_hash(conn):
    first = _append(conn)
    second = _append(conn)
    rows = conn.execute(
        "SELECT seq, prev_hash, hash FROM journal WHERE seq IN (?, ?) ORDER BY seq",
        (first, second),
    ).fetchall()
    assert rows[1][1] == rows[0][2]
    assert journal_check.verify(conn) == []


def test_first_event_starts_from_the_genesis_hash(tmp_path):
    store = Store(tmp_path / "state.db")
    first = store.connection().execute("SELECT prev_hash FROM journal WHERE seq = 1").fetchone()
    assert first[0] == "0" * 64
    store.close()


def test_an_edited_payload_is_reported_by_its_seq(conn):
    _append(conn)
    target = _append(conn, payload={"value": 1})
    _append(conn)
    conn.execute("UPDATE journal SET payload = ? WHERE seq = ?", ('{"value":2}', target))
    problems = journal_check.verify(conn)
    assert [(p.seq, p.problem) for p in problems] == [(target, "HASH_MISMATCH")]


def test_a_deleted_row_is_reported_as_a_gap(conn):
    _append(conn)
    target = _append(conn)
    last = _append(conn)
    conn.execute("DELETE FROM journal WHERE seq = ?", (target,))
    problems = {(p.seq, p.problem) for p in journal_check.verify(conn)}
    assert (last, "SEQ_GAP") in problems
    assert (last, "PREV_HASH_MISMATCH") in problems


def test_query_filters_by_exact_kind_prefix_and_subject(conn):
    _append(conn, kind="demo.one", subject="a")
    _append(conn, kind="demo.two", subject="b")
    _append(conn, kind="other.one", subject="a")
    assert [e["kind"] for e in journal.query(conn, kind="demo.one")] == ["demo.one"]
    assert [e["kind"] for e in journal.query(conn, kind="demo.")] == ["demo.one", "demo.two"]
    assert [e["kind"] for e in journal.query(conn, kind="demo*")] == ["demo.one", "demo.two"]
    assert [e["kind"] for e in journal.query(conn, subject="a")] == ["demo.one", "other.one"]


def test_unknown_actor_is_refused(conn):
    conn.execute("BEGIN IMMEDIATE")
    with pytest.raises(InvalidInput):
        journal.append(conn, actor="robot", kind="demo.x", subject=None, payload={})
    conn.execute("ROLLBACK")
