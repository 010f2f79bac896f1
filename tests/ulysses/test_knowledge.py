"""Knowledge capture over a real store: recording, the index that follows the lesson
folder, search and its FTS5-less fallback, file-write failure and the doctor's repair."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject, init_project
from ithaca.kernel import doctor, files, journal
from ithaca.kernel.errors import InvalidInput, NotFound
from ithaca.ulysses import knowledge_tables as knowledge_schema
from ithaca.ulysses import lesson_recording, lesson_search, lessons
from ithaca.ulysses.knowledge import KnowledgeService


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[IthacaProject]:
    project, _ = init_project(tmp_path)
    yield project
    project.close()


@pytest.fixture
def service(opened: IthacaProject) -> KnowledgeService:
    return KnowledgeService(opened.project, opened.store, opened.config)


@pytest.fixture
def no_fts5(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(knowledge_schema, "fts5_available", lambda: False)


def closed_session(**changes: Any) -> dict[str, Any]:
    session: dict[str, Any] = {
        "session_id": "uly_1",
        "problem": "Flaky login test on CI",
        "constraints": ["no sleeps"],
        "terminalState": "resolved",
        "summary": "The token cache was shared between tests; scoping it per test fixed it.",
        "missing": None,
        "completed_at": "2025-03-04T23:59:58.123Z",
        "hypotheses": [
            {"seq": 1, "hypothesis": "shared cache", "falsification": "scope it", "at": "t"}
        ],
        "steps": [
            {
                "step_id": "stp_a",
                "primary": "scope the cache",
                "recovery": "unscope it",
                "irreversible": False,
                "result": "passed_primary",
                "hypothesis_seq": 1,
            }
        ],
        "forbidden_moves": [],
        "checkpoints": [],
        "evidence": [],
    }
    session.update(changes)
    return session


def record(
    opened: IthacaProject, closed: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Record then write, as the Ulysses service does around its commit."""
    with opened.store.write() as conn:
        lesson = lesson_recording.record_lesson(conn, opened.project, closed)
    return lesson, lesson_recording.write_lesson_file(opened.project, lesson)


def hand_add(opened: IthacaProject, name: str, closed: dict[str, Any], lesson_id: str) -> Path:
    """A lesson file that arrives without Ithaca, as after `git pull`."""
    closed_key = lessons.lesson_key(closed["problem"], closed["constraints"], closed["summary"])
    text = lessons.render_file(lessons.new_record(lesson_id, closed_key, closed))
    path = Path(opened.project.knowledge_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def ids_found(service: KnowledgeService, query: str) -> list[str]:
    return [hit["id"] for hit in service.search({"query": query})["results"]]


def lesson_rows(opened: IthacaProject) -> list[tuple[Any, ...]]:
    return opened.store.connection().execute("SELECT id, path, size FROM lessons").fetchall()


# --- recording ----------------------------------------------------------------------------


def test_recording_indexes_journals_and_writes_the_file(opened: IthacaProject) -> None:
    lesson, diagnostics = record(opened, closed_session())

    assert diagnostics == []
    assert lesson["merged"] is False
    assert lesson["path"] == ".ithaca/knowledge/2025-03-04-flaky-login-test-on-ci.md"
    text = (Path(opened.project.root) / lesson["path"]).read_text(encoding="utf-8")
    parsed, body = lessons.parse_file(text)
    assert parsed == lesson["record"]
    assert parsed["id"] == lesson["id"]
    assert "## Summary" in body
    (event,) = journal.query(opened.store.connection(), kind="knowledge.")
    assert event["kind"] == "knowledge.lesson_recorded"
    assert event["actor"] == "agent"
    assert event["subject"] == lesson["id"]
    assert event["payload"]["key"] == lesson["key"]


def test_a_rolled_back_completion_leaves_no_lesson(opened: IthacaProject) -> None:
    with pytest.raises(RuntimeError), opened.store.write() as conn:
        lesson_recording.record_lesson(conn, opened.project, closed_session())
        raise RuntimeError("the session's own write failed")

    assert lesson_rows(opened) == []
    assert journal.query(opened.store.connection(), kind="knowledge.") == []


def test_same_name_for_another_lesson_gets_a_numbered_suffix(opened: IthacaProject) -> None:
    paths = [
        record(opened, closed_session(session_id=f"uly_{n}", summary=f"Fix number {n} worked."))[0][
            "path"
        ]
        for n in range(3)
    ]

    assert [os.path.basename(path) for path in paths] == [
        "2025-03-04-flaky-login-test-on-ci.md",
        "2025-03-04-flaky-login-test-on-ci-2.md",
        "2025-03-04-flaky-login-test-on-ci-3.md",
    ]


def test_same_problem_constraints_and_summary_merge_into_one_lesson(
    opened: IthacaProject,
) -> None:
    first, _ = record(opened, closed_session())
    variant = closed_session(
        session_id="uly_2",
        problem="  FLAKY login test on   CI",
        constraints=["No sleeps"],
        completed_at="2025-04-01T08:00:00.000Z",
    )
    second, diagnostics = record(opened, variant)

    assert diagnostics == []
    assert second["merged"] is True
    assert (second["id"], second["path"], second["key"]) == (
        first["id"],
        first["path"],
        first["key"],
    )
    assert len(lesson_rows(opened)) == 1
    text = (Path(opened.project.root) / first["path"]).read_text(encoding="utf-8")
    parsed, _ = lessons.parse_file(text)
    assert [o["session_id"] for o in parsed["occurrences"]] == ["uly_1", "uly_2"]
    assert parsed["problem"] == "Flaky login test on CI"
    kinds = [e["kind"] for e in journal.query(opened.store.connection(), kind="knowledge.")]
    assert kinds == ["knowledge.lesson_recorded", "knowledge.lesson_merged"]


def test_a_lesson_that_arrived_through_git_is_merged_into(opened: IthacaProject) -> None:
    hand_add(opened, "2024-12-01-from-a-colleague.md", closed_session(), "lsn_colleague")

    lesson, _ = record(opened, closed_session(session_id="uly_2"))

    assert lesson["merged"] is True
    assert lesson["id"] == "lsn_colleague"
    assert lesson["path"] == ".ithaca/knowledge/2024-12-01-from-a-colleague.md"


def test_recording_refuses_a_session_without_summary(opened: IthacaProject) -> None:
    with pytest.raises(InvalidInput) as raised, opened.store.write() as conn:
        lesson_recording.record_lesson(conn, opened.project, closed_session(summary="  "))
    assert raised.value.details["pointer"] == "/summary"
    with pytest.raises(InvalidInput), opened.store.write() as conn:
        lesson_recording.record_lesson(
            conn, opened.project, closed_session(terminalState="superseded")
        )
    assert lesson_rows(opened) == []


# --- files are the truth ------------------------------------------------------------------


def test_a_hand_added_file_is_found_and_a_deleted_one_drops_out(
    opened: IthacaProject, service: KnowledgeService
) -> None:
    path = hand_add(
        opened,
        "2025-01-02-pulled.md",
        closed_session(problem="Database migration deadlock", summary="Take the lock first."),
        "lsn_pulled",
    )

    assert ids_found(service, "deadlock") == ["lsn_pulled"]
    got = service.get({"id": "lsn_pulled"})
    assert got["path"] == ".ithaca/knowledge/2025-01-02-pulled.md"
    assert got["record"]["summary"] == "Take the lock first."
    assert "Take the lock first." in got["markdown"]

    path.unlink()
    assert ids_found(service, "deadlock") == []
    with pytest.raises(NotFound) as raised:
        service.get({"id": "lsn_pulled"})
    assert raised.value.code == "LESSON_NOT_FOUND"


def test_an_edited_file_is_read_again(opened: IthacaProject, service: KnowledgeService) -> None:
    lesson, _ = record(opened, closed_session())
    path = Path(opened.project.root) / lesson["path"]
    edited = dict(lesson["record"], summary="Rewritten by hand: quarantine the flaky fixture.")
    path.write_text(lessons.render_file(edited), encoding="utf-8")

    assert ids_found(service, "quarantine") == [lesson["id"]]
    assert service.get({"id": lesson["id"]})["record"]["summary"].startswith("Rewritten")


def test_invalid_or_conflicting_files_are_reported_not_indexed(
    opened: IthacaProject, service: KnowledgeService
) -> None:
    record(opened, closed_session())
    folder = Path(opened.project.knowledge_dir)
    (folder / "notes.md").write_text("# scribbles about the flaky login\n", encoding="utf-8")
    hand_add(opened, "2025-05-05-copy.md", closed_session(), "lsn_copy")

    found = service.search({"query": "flaky login"})

    assert len(found["results"]) == 1
    codes = sorted(d["code"] for d in found["diagnostics"])
    assert codes == ["lesson_file_conflict", "lesson_file_invalid"]


# --- queries ------------------------------------------------------------------------------


def test_query_terms_keep_long_words_lowercased_without_stop_words() -> None:
    assert lesson_search.query_terms("Why is THE login flaky, and the LOGIN so slow? a b") == [
        "login",
        "flaky",
        "slow",
    ]
    assert len(lesson_search.query_terms(" ".join(f"word{n}" for n in range(40)))) == 16


@pytest.mark.parametrize(
    ("query", "finds"),
    [
        ('title:x OR "', True),
        ("NEAR(", False),
        ("*", False),
        ('"unterminated', False),
        ("parsing AND NOT accents", True),
        ("col:* ^a -b {x} (y", False),
    ],
)
def test_fts_syntax_in_a_query_is_inert(
    opened: IthacaProject, service: KnowledgeService, query: str, finds: bool
) -> None:
    lesson, _ = record(opened, closed_session(problem="Title parsing drops accents"))

    found = service.search({"query": query})

    assert [hit["id"] for hit in found["results"]] == ([lesson["id"]] if finds else [])
    assert "diagnostics" not in found


def test_every_query_term_is_a_quoted_fts_string() -> None:
    assert lesson_search.fts_query(lesson_search.query_terms('title:x OR " NEAR(a b) z*')) == (
        '"title" OR "near"'
    )


def record_login_lessons(opened: IthacaProject) -> tuple[dict[str, Any], dict[str, Any]]:
    """A lesson that mentions login in passing, then one about login."""
    weak, _ = record(
        opened, closed_session(problem="Slow build", summary="Cache pip; the login step is fine.")
    )
    strong, _ = record(
        opened,
        closed_session(session_id="uly_2", problem="Login redirect loop", summary="Fix login."),
    )
    return weak, strong


def test_search_ranks_by_relevance_and_returns_the_tool_shape(
    opened: IthacaProject, service: KnowledgeService
) -> None:
    weak, strong = record_login_lessons(opened)

    found = service.search({"query": "login", "limit": 5, "session": "host-session-1"})

    assert [hit["id"] for hit in found["results"]] == [strong["id"], weak["id"]]
    hit = found["results"][0]
    assert set(hit) == {"id", "title", "date", "terminalState", "snippet", "path"}
    assert hit["date"] == "2025-03-04"
    assert "[Login]" in hit["snippet"] or "[login]" in hit["snippet"]
    assert len(service.search({"query": "login", "limit": 1})["results"]) == 1


@pytest.mark.parametrize(
    ("arguments", "pointer"),
    [
        ({"query": "x", "extra": 1}, "/extra"),
        ({"query": "   "}, "/query"),
        ({"query": 3}, "/query"),
        ({}, "/query"),
        ({"query": "login", "limit": 0}, "/limit"),
        ({"query": "login", "limit": 21}, "/limit"),
        ({"query": "login", "limit": True}, "/limit"),
        ({"operation": "get", "query": "login"}, "/operation"),
    ],
)
def test_search_refuses_malformed_input(
    service: KnowledgeService, arguments: dict[str, Any], pointer: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        service.search(arguments)
    assert raised.value.code == "INVALID_INPUT"
    assert raised.value.details["pointer"] == pointer


def test_dispatch_routes_operations_and_refuses_others(
    opened: IthacaProject, service: KnowledgeService
) -> None:
    lesson, _ = record(opened, closed_session())

    found = service.dispatch({"operation": "search", "query": "token cache"})
    got = service.dispatch({"operation": "get", "id": lesson["id"], "session": "s-1"})

    assert [hit["id"] for hit in found["results"]] == [lesson["id"]]
    assert set(got) == {"id", "path", "record", "markdown"}
    assert got["record"] == lesson["record"]
    for arguments in ({"operation": "delete", "id": "x"}, {"id": "x"}, {"operation": "get"}):
        with pytest.raises(InvalidInput):
            service.dispatch(arguments)
    with pytest.raises(InvalidInput):
        service.dispatch({"operation": "get", "id": "x", "query": "y"})


# --- file-write failure and repair ----------------------------------------------------------


def fail_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "write_atomic", refuse)


def test_a_failed_file_write_is_reported_found_and_restored(
    opened: IthacaProject, service: KnowledgeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        fail_writes(patch)
        lesson, diagnostics = record(opened, closed_session())

    assert [d["code"] for d in diagnostics] == ["lesson_file_not_written"]
    target = Path(opened.project.root) / lesson["path"]
    assert not target.exists()
    assert ids_found(service, "token cache") == [lesson["id"]]
    report = doctor.check(opened.project, opened.store)
    missing = [f for f in report["findings"] if f["code"] == "LESSON_FILE_MISSING"]
    assert [f["subject"] for f in missing] == [lesson["id"]]

    conn = opened.store.connection()
    assert lesson_recording.restore_missing_files(opened.project, conn) == [lesson["path"]]

    assert lessons.parse_file(target.read_text(encoding="utf-8"))[0] == lesson["record"]
    report = doctor.check(opened.project, opened.store)
    assert not [f for f in report["findings"] if f["code"] == "LESSON_FILE_MISSING"]
    assert lesson_recording.restore_missing_files(opened.project, conn) == []
    assert ids_found(service, "token cache") == [lesson["id"]]
    assert lesson_rows(opened)[0][2] == target.stat().st_size


def test_a_failed_merge_write_keeps_the_merged_lesson_until_restored(
    opened: IthacaProject, service: KnowledgeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = record(opened, closed_session())
    with monkeypatch.context() as patch:
        fail_writes(patch)
        merged, diagnostics = record(opened, closed_session(session_id="uly_2"))
    assert diagnostics[0]["code"] == "lesson_file_not_written"

    got = service.get({"id": first["id"]})
    assert len(got["record"]["occurrences"]) == 2
    assert (
        lesson_recording.check(opened.project, opened.store.connection())[0]["subject"]
        == first["id"]
    )

    lesson_recording.restore_missing_files(opened.project, opened.store.connection())

    text = (Path(opened.project.root) / first["path"]).read_text(encoding="utf-8")
    assert len(lessons.parse_file(text)[0]["occurrences"]) == 2
    assert lesson_recording.check(opened.project, opened.store.connection()) == []


# --- without FTS5 ---------------------------------------------------------------------------


@pytest.mark.usefixtures("no_fts5")
def test_without_fts5_a_term_scan_finds_lessons(
    opened: IthacaProject, service: KnowledgeService
) -> None:
    other, lesson = record_login_lessons(opened)

    found = service.search({"query": "login redirect"})

    assert [hit["id"] for hit in found["results"]] == [lesson["id"], other["id"]]
    assert [d["code"] for d in found["diagnostics"]] == ["fts5_unavailable"]
    assert "[redirect]" in found["results"][0]["snippet"]
    assert (
        lesson_search.related(opened.store.connection(), opened.project, "login redirect", [])[0][
            "id"
        ]
        == lesson["id"]
    )


def test_lessons_indexed_without_fts5_are_searchable_once_it_is_back(
    opened: IthacaProject, service: KnowledgeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, _ = record(opened, closed_session(problem="Alpha crash", summary="Pin alpha."))
    assert ids_found(service, "alpha") == [before["id"]]  # the full-text table now exists
    with monkeypatch.context() as patch:
        patch.setattr(knowledge_schema, "fts5_available", lambda: False)
        during, _ = record(
            opened, closed_session(session_id="uly_2", problem="Beta crash", summary="Pin beta.")
        )

    assert ids_found(service, "beta") == [during["id"]]
    assert sorted(ids_found(service, "crash")) == sorted([before["id"], during["id"]])


# --- related ------------------------------------------------------------------------------


def test_related_returns_at_most_three_lessons_in_the_init_shape(opened: IthacaProject) -> None:
    for n in range(5):
        record(
            opened,
            closed_session(session_id=f"uly_{n}", summary=f"Login fix number {n} held up."),
        )

    found = lesson_search.related(
        opened.store.connection(), opened.project, "Login flaky again", ["no sleeps"], limit=10
    )

    assert len(found) == 3
    assert set(found[0]) == {"id", "title", "summary", "terminalState", "date", "path"}


def test_related_inside_a_write_transaction_indexes_pulled_files(
    opened: IthacaProject,
) -> None:
    hand_add(opened, "2025-01-02-pulled.md", closed_session(), "lsn_pulled")

    with opened.store.write() as conn:
        found = lesson_search.related(conn, opened.project, "flaky login", [])

    assert [hit["id"] for hit in found] == ["lsn_pulled"]
    assert [row[0] for row in lesson_rows(opened)] == ["lsn_pulled"]


@pytest.mark.parametrize(
    ("breakage", "recovers"),
    [
        (["DROP TABLE lessons_fts"], True),
        (["DELETE FROM lessons_fts"], True),
        (["DROP TABLE lessons_fts", "CREATE TABLE lessons_fts (junk)"], False),
        (["DROP TABLE lessons"], False),
    ],
)
def test_related_never_raises_even_with_a_broken_index(
    opened: IthacaProject, service: KnowledgeService, breakage: list[str], recovers: bool
) -> None:
    lesson, _ = record(opened, closed_session())
    assert ids_found(service, "flaky") == [lesson["id"]]
    conn = opened.store.connection()
    for statement in breakage:
        conn.execute(statement)

    found = lesson_search.related(conn, opened.project, "flaky login", ["no sleeps"])

    assert [hit["id"] for hit in found] == ([lesson["id"]] if recovers else [])


def test_related_never_raises_when_the_folder_is_unreadable(opened: IthacaProject) -> None:
    folder = Path(opened.project.knowledge_dir)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("not a folder", encoding="utf-8")

    assert lesson_search.related(opened.store.connection(), opened.project, "flaky", []) == []


def test_doctor_reports_nothing_for_lessons_in_step(opened: IthacaProject) -> None:
    record(opened, closed_session())
    report = doctor.check(opened.project, opened.store)
    assert report["ok"] is True
    assert report["findings"] == []
