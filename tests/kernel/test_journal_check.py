"""A routine check reads every journal row, every time: the rows whose pages the doctor
sealed by those pages, the rest by re-deriving their hashes. An edit, a deletion or a
reordering of any row, however old, is reported, and reported again by the next check;
pages that only moved are sealed again without a word."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import init_project
from ithaca.kernel import journal, journal_check

EVENTS = 400  # about 30 full leaf pages of these events: a few hundred sealed rows


@pytest.fixture
def project(tmp_path: Path):
    opened, _ = init_project(tmp_path)
    append(opened, EVENTS)
    yield opened
    opened.close()


def append(project: Any, count: int, payload: dict[str, Any] | None = None) -> None:
    with project.store.write() as conn:
        for n in range(count):
            journal.append(
                conn,
                actor="hook",
                kind="protocols.decision",
                subject=f"evt_{n:026d}",
                payload=payload or {"n": n, "effect": "allow", "tool": "Bash"},
            )


def checked(project: Any, *, full: bool = False, seal: bool = True) -> journal_check.Checked:
    """One check as the doctor runs it, sealing what it found whole."""
    conn = project.store.connection()
    found = journal_check.check(conn, project.project.db_path, full=full)
    try:
        if seal:
            journal_check.seal(conn, found)
    finally:
        found.close()
    return found


def raw(project: Any) -> sqlite3.Connection:
    return sqlite3.connect(project.project.db_path, isolation_level=None)


def problems(found: journal_check.Checked) -> set[tuple[int, str]]:
    return {(problem.seq, problem.problem) for problem in found.problems}


def test_after_one_check_most_rows_are_read_by_their_sealed_pages(project):
    first = checked(project)
    assert first.ok and first.rows_derived >= EVENTS and first.rows_by_pages == 0
    again = checked(project)
    assert again.ok and again.rows_by_pages > EVENTS // 2
    assert again.rows_by_pages + again.rows_derived == journal.count(project.store.connection())


@pytest.mark.parametrize(
    "edit",
    [
        'UPDATE journal SET payload = \'{"effect":"deny"}\' WHERE seq = 7',
        "UPDATE journal SET kind = 'forged' WHERE seq = 7",
        "UPDATE journal SET at = '2020-01-01T00:00:00.000Z' WHERE seq = 7",
        "UPDATE journal SET subject = NULL WHERE seq = 7",
    ],
)
def test_an_edited_old_row_is_reported_by_every_later_routine_check(project, edit):
    assert checked(project).ok
    assert checked(project).rows_by_pages > 7  # row 7 is read by its sealed page
    raw(project).execute(edit)
    for _ in range(3):
        assert (7, "HASH_MISMATCH") in problems(checked(project))
    assert (7, "HASH_MISMATCH") in problems(checked(project, full=True))


def test_a_row_rehashed_to_fit_still_breaks_the_next_link(project):
    checked(project)
    checked(project)
    conn = raw(project)
    at, actor, kind, subject, payload, prev = conn.execute(
        "SELECT at, actor, kind, subject, payload, prev_hash FROM journal WHERE seq = 7"
    ).fetchone()
    forged = {**json.loads(payload), "effect": "deny"}
    event = journal.stored_event(7, at, actor, kind, subject, forged)
    conn.execute(
        "UPDATE journal SET payload = ?, hash = ? WHERE seq = 7",
        (json.dumps(forged), journal.chain_hash(prev, event)),
    )
    assert (8, "PREV_HASH_MISMATCH") in problems(checked(project))


def test_a_deleted_old_row_is_reported(project):
    checked(project)
    raw(project).execute("DELETE FROM journal WHERE seq = 12")
    for _ in range(2):
        assert (13, "SEQ_GAP") in problems(checked(project))


def test_two_old_rows_swapped_are_reported(project):
    checked(project)
    conn = raw(project)
    conn.execute("UPDATE journal SET seq = -1 WHERE seq = 20")
    conn.execute("UPDATE journal SET seq = 20 WHERE seq = 21")
    conn.execute("UPDATE journal SET seq = 21 WHERE seq = -1")
    for _ in range(2):
        found = problems(checked(project))
        assert {seq for seq, _ in found} >= {20, 21}


def test_a_long_row_edited_where_it_spills_onto_another_page_is_reported(project):
    append(project, 1, {"text": "x" * 20_000})
    long_seq = journal.latest_seq(project.store.connection())
    append(project, 40)
    checked(project)
    assert checked(project).rows_by_pages > long_seq  # the long row is sealed
    raw(project).execute(
        "UPDATE journal SET payload = replace(payload, 'xxxxx\"', 'xxxxy\"') WHERE seq = ?",
        (long_seq,),
    )
    assert (long_seq, "HASH_MISMATCH") in problems(checked(project))


def test_an_edit_still_in_the_write_ahead_log_is_read_there(project):
    checked(project)
    conn = raw(project)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every sealed page in the file
    conn.execute("UPDATE journal SET actor = 'user' WHERE seq = 3")  # only in the WAL
    assert Path(project.project.db_path + "-wal").stat().st_size > 0
    assert (3, "HASH_MISMATCH") in problems(checked(project))


def test_pages_that_only_moved_are_sealed_again_without_a_report(project):
    checked(project)
    raw(project).execute("VACUUM")
    moved = checked(project)
    assert moved.ok and moved.rows_derived >= EVENTS // 2
    assert checked(project).rows_by_pages > EVENTS // 2


def test_a_broken_chunk_is_never_sealed_again(project):
    checked(project)
    raw(project).execute("UPDATE journal SET kind = 'forged' WHERE seq = 7")
    before = raw(project).execute("SELECT digest FROM journal_seals").fetchall()
    found = checked(project)
    assert not found.ok and journal_check.seal(project.store.connection(), found) == 0
    assert raw(project).execute("SELECT digest FROM journal_seals").fetchall() == before


def test_without_seals_every_row_is_re_derived(project):
    checked(project)
    raw(project).execute("DELETE FROM journal_seals")
    found = checked(project, seal=False)
    assert found.ok and found.rows_by_pages == 0 and found.rows_derived >= EVENTS


def test_rows_appended_while_checking_are_never_taken_for_tampering(project):
    checked(project)
    stop = threading.Event()

    def keep_appending() -> None:
        while not stop.is_set():
            append(project, 25)

    writer = threading.Thread(target=keep_appending)
    writer.start()
    try:
        rounds = [checked(project) for _ in range(8)]
    finally:
        stop.set()
        writer.join()
    assert all(found.ok for found in rounds), [found.problems for found in rounds]
    assert checked(project).ok


def test_a_seal_with_another_digest_has_its_rows_re_derived(project):
    checked(project)
    raw(project).execute("UPDATE journal_seals SET digest = 'x'")
    found = checked(project)
    assert found.ok and found.rows_by_pages == 0
    assert checked(project).rows_by_pages > 0
