"""The index over the lesson files: the ``lessons`` table and its full-text twin.

Lesson files under ``.ithaca/knowledge/`` are the truth: they are tracked and arrive
through Git. The ``lessons`` table only indexes them, so before every search, get or
related lookup it is brought in step with the folder by ``(path, size, mtime_ns)``
(``sync``): a file added by hand (or by ``git pull``) is indexed, a deleted one drops out,
a changed one is read again. Keeping this cache in step journals nothing; the files and
the events that recorded them are the record.

A row recorded before its file is written has no ``size`` (it is *pending*): a sync keeps
it and adopts the file once it holds the record (or holds every occurrence and was edited
since); ``file_state`` says where such a file stands.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.connection import write_transaction
from ithaca.kernel.project import Project
from ithaca.kernel.store import WRITE_PATIENCE_S
from ithaca.ulysses import knowledge_tables as knowledge_schema
from ithaca.ulysses import lessons
from ithaca.ulysses.diagnostics import diagnostic

MAX_FILE_BYTES = 1024 * 1024
# Where a pending row's file stands (``file_state``).
HOLDS, AHEAD, BEHIND = "holds", "ahead", "behind"


class _Plan:
    """What a sync changes: rows dropped, pending rows adopted, files indexed."""

    def __init__(self) -> None:
        self.drops: list[int] = []
        self.adopts: list[tuple[int, int, int]] = []
        self.puts: list[tuple[dict[str, Any], str, str, tuple[int, int]]] = []
        self.diagnostics: list[dict[str, str]] = []

    def changes(self) -> bool:
        return bool(self.drops or self.adopts or self.puts)


def sync(conn: sqlite3.Connection, project: Project) -> list[dict[str, str]]:
    """Bring the index in step with the lesson folder; returns diagnostics (files that
    could not be indexed). Writes only when something changed; inside a caller's
    transaction it works under a savepoint."""
    try:
        plan = _plan(conn, project)
        if plan.changes():
            with writing(conn):
                plan = _plan(conn, project)
                _apply(conn, plan)
    except OSError as exc:
        return [diagnostic("knowledge_folder_unreadable", f"{project.knowledge_dir}: {exc}")]
    return plan.diagnostics


def _plan(conn: sqlite3.Connection, project: Project) -> _Plan:
    folder = lesson_folder(project)
    listing = _listing(project.knowledge_dir)
    plan = _Plan()
    kept_ids: set[str] = set()
    kept_keys: set[str] = set()
    covered: set[str] = set()
    rows = conn.execute(
        "SELECT seq, id, key, path, size, mtime_ns, CASE WHEN size IS NULL THEN record END"
        " FROM lessons"
    )
    for seq, lesson_id, key, path, size, mtime_ns, stored in rows.fetchall():
        name = _name_in(folder, path)
        seen = listing.get(name) if name else None
        if size is None:
            state = file_state(project, path, stored) if seen is not None else BEHIND
            if state == HOLDS and seen is not None:
                plan.adopts.append((seq, *seen))
            elif state == AHEAD:
                plan.drops.append(seq)  # edited since it caught up: read it again below
                continue
        elif seen != (size, mtime_ns):
            plan.drops.append(seq)
            continue
        kept_ids.add(lesson_id)
        kept_keys.add(key)
        if name:
            covered.add(name)
    for name in sorted(set(listing) - covered):
        path = f"{folder}/{name}"
        try:
            record, body = _read_lesson(os.path.join(project.knowledge_dir, name))
        except lessons.LessonFileInvalid as exc:
            plan.diagnostics.append(diagnostic("lesson_file_invalid", f"{path}: {exc}"))
            continue
        except OSError as exc:
            plan.diagnostics.append(diagnostic("lesson_file_unreadable", f"{path}: {exc}"))
            continue
        key = _index_key(record)
        if record["id"] in kept_ids or key in kept_keys:
            plan.diagnostics.append(
                diagnostic(
                    "lesson_file_conflict",
                    f"{path}: another lesson file already holds lesson {record['id']}"
                    " or the same problem, constraints and summary; it is not indexed",
                )
            )
            continue
        kept_ids.add(record["id"])
        kept_keys.add(key)
        plan.puts.append((record, path, body, listing[name]))
    return plan


def _apply(conn: sqlite3.Connection, plan: _Plan) -> None:
    for seq in plan.drops:
        drop(conn, seq)
    for seq, size, mtime_ns in plan.adopts:
        conn.execute(
            "UPDATE lessons SET size = ?, mtime_ns = ? WHERE seq = ? AND size IS NULL",
            (size, mtime_ns, seq),
        )
    for record, path, body, seen in plan.puts:
        put(conn, record, path=path, body=body, seen=seen)


def put(
    conn: sqlite3.Connection,
    record: dict[str, Any],
    *,
    path: str,
    body: str,
    seen: tuple[int, int] | None,
) -> None:
    """Insert one row (pending when ``seen`` is None) and its full-text entry."""
    title = record["title"] or lessons.title_of(record["problem"])
    size, mtime_ns = seen if seen is not None else (None, None)
    cursor = conn.execute(
        "INSERT INTO lessons (id, key, path, size, mtime_ns, record, title, problem, summary,"
        " body, terminal_state, date) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record["id"],
            _index_key(record),
            path,
            size,
            mtime_ns,
            canon.canonical_text(record),
            title,
            record["problem"],
            record["summary"],
            body,
            record["terminalState"],
            lessons.record_date(record),
        ),
    )
    if _fts_maintained(conn):
        conn.execute(
            f"INSERT INTO {knowledge_schema.FTS_TABLE} (rowid, title, problem, summary, body)"
            " VALUES (?, ?, ?, ?, ?)",
            (cursor.lastrowid, title, record["problem"], record["summary"], body),
        )


def drop(conn: sqlite3.Connection, seq: int) -> None:
    """Delete one row and its full-text entry."""
    conn.execute("DELETE FROM lessons WHERE seq = ?", (seq,))
    if _fts_maintained(conn):
        conn.execute(f"DELETE FROM {knowledge_schema.FTS_TABLE} WHERE rowid = ?", (seq,))


def _fts_maintained(conn: sqlite3.Connection) -> bool:
    """Whether this process keeps the full-text table in step as rows change (a process
    without FTS5 leaves it behind; the next search that has FTS5 rebuilds it)."""
    return knowledge_schema.fts5_available() and knowledge_schema.fts_exists(conn)


@contextmanager
def writing(conn: sqlite3.Connection) -> Iterator[None]:
    """A write of its own, or a savepoint inside the caller's transaction (so a failure
    leaves the caller's work untouched)."""
    if not conn.in_transaction:
        with write_transaction(conn, patience_s=WRITE_PATIENCE_S):
            yield
        return
    conn.execute("SAVEPOINT knowledge_index")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO knowledge_index")
        conn.execute("RELEASE knowledge_index")
        raise
    conn.execute("RELEASE knowledge_index")


def _index_key(record: dict[str, Any]) -> str:
    """The key of a record's content (a hand-edited file may carry a stale ``key``)."""
    return lessons.lesson_key(record["problem"], record["constraints"], record["summary"])


def lesson_folder(project: Project) -> str:
    """The lesson folder relative to the project root, with ``/`` separators."""
    return os.path.relpath(project.knowledge_dir, project.root).replace(os.sep, "/")


def _name_in(folder: str, path: str) -> str | None:
    prefix = folder + "/"
    name = path[len(prefix) :] if path.startswith(prefix) else ""
    return name if name and "/" not in name else None


def _listing(folder: str) -> dict[str, tuple[int, int]]:
    """``{name: (size, mtime_ns)}`` of the regular ``.md`` files in the lesson folder."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return {}
    listing = {}
    for entry in entries:
        if entry.name.endswith(".md") and not entry.is_symlink() and entry.is_file():
            info = entry.stat(follow_symlinks=False)
            listing[entry.name] = (info.st_size, info.st_mtime_ns)
    return listing


def _read_lesson(path: str) -> tuple[dict[str, Any], str]:
    """``(record, body)`` of a lesson file; ``LessonFileInvalid`` or ``OSError``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with open(fd, "rb") as stream:
        data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise lessons.LessonFileInvalid(f"larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise lessons.LessonFileInvalid(f"not UTF-8: {exc}") from exc
    return lessons.parse_file(text)


def file_state(project: Project, path: str, stored: str) -> str:
    """Where a pending row's file stands: ``HOLDS`` the stored record, ``AHEAD`` of it (the
    same lesson with every stored occurrence, edited since), or ``BEHIND`` (absent,
    unreadable, another lesson, or missing an occurrence: a write that failed)."""
    try:
        record, _ = _read_lesson(os.path.join(project.root, path))
    except (OSError, lessons.LessonFileInvalid):
        return BEHIND
    if canon.canonical_text(record) == stored:
        return HOLDS
    expected = json.loads(stored)
    if record["id"] == expected["id"] and _sessions(expected) <= _sessions(record):
        return AHEAD
    return BEHIND


def _sessions(record: dict[str, Any]) -> set[Any]:
    return {item.get("session_id") for item in record["occurrences"]}


def pending(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """``(id, path, record)`` of each row whose file has not been seen holding it."""
    return conn.execute(
        "SELECT id, path, record FROM lessons WHERE size IS NULL ORDER BY seq"
    ).fetchall()
