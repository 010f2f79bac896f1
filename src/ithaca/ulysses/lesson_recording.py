"""Recording a closed session's lesson: its index row, its file, and the repair of a file
that was not written.

Recording follows a fixed order (docs/ulysses.md, "Lessons"). ``record_lesson`` runs inside the
caller's transaction (the session's terminal state commits with the index row and the
``knowledge.*`` event); ``write_lesson_file`` runs after the commit. Until the file holds
the row's record the row is pending (``lesson_index``): ``check`` (the doctor provider)
reports it until then, and ``restore_missing_files`` (the doctor repair) rewrites the file
from the index.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from ithaca.kernel import canon, files, ids, journal
from ithaca.kernel.errors import IthacaError, invalid_field
from ithaca.kernel.project import Project
from ithaca.ulysses import lesson_index, lessons
from ithaca.ulysses.diagnostics import diagnostic


def record_lesson(
    conn: sqlite3.Connection, project: Project, closed: dict[str, Any]
) -> dict[str, Any]:
    """Index the lesson of a closed session inside the caller's write transaction.

    A lesson with the same key gains an occurrence (``knowledge.lesson_merged``, same
    file); otherwise a new one is recorded (``knowledge.lesson_recorded``). Returns
    ``{id, key, path, merged, record}``; the file is written later by
    ``write_lesson_file``.
    """
    _check_closed(closed)
    # A lesson that arrived through Git is merged into, not recorded a second time.
    lesson_index.sync(conn, project)
    key = lessons.lesson_key(closed["problem"], closed["constraints"], closed["summary"])
    existing = conn.execute(
        "SELECT seq, id, path, record FROM lessons WHERE key = ?", (key,)
    ).fetchone()
    if existing is not None:
        seq, lesson_id, path, stored = existing
        record = lessons.merged_record(json.loads(stored), closed)
        lesson_index.drop(conn, seq)
        kind = "knowledge.lesson_merged"
    else:
        lesson_id = ids.new("lsn")
        record = lessons.new_record(lesson_id, key, closed)
        path = _free_path(conn, project, closed)
        kind = "knowledge.lesson_recorded"
    lesson_index.put(conn, record, path=path, body=lessons.render_body(record), seen=None)
    journal.append(
        conn,
        actor="agent",
        kind=kind,
        subject=lesson_id,
        payload={
            "id": lesson_id,
            "key": key,
            "path": path,
            "session_id": closed["session_id"],
            "terminalState": closed["terminalState"],
            "occurrences": len(record["occurrences"]),
            "recordDigest": canon.digest(record),
        },
    )
    return {
        "id": lesson_id,
        "key": key,
        "path": path,
        "merged": existing is not None,
        "record": record,
    }


def write_lesson_file(project: Project, lesson: dict[str, Any]) -> list[dict[str, str]]:
    """Write a recorded lesson's file (after the commit); diagnostics when it failed."""
    try:
        files.write_atomic(project.root, lesson["path"], lessons.render_file(lesson["record"]))
    except (OSError, IthacaError) as exc:
        return [
            diagnostic(
                "lesson_file_not_written",
                f"{lesson['path']} was not written ({exc}); the lesson is indexed, and"
                " `ithaca doctor` reports the file until its repair rewrites it",
            )
        ]
    return []


def restore_missing_files(project: Project, conn: sqlite3.Connection) -> list[str]:
    """Rewrite, from the index, each lesson file that does not hold its recorded lesson;
    returns the paths written (a file that still cannot be written stays reported)."""
    written = []
    for _, path, stored in lesson_index.pending(conn):
        if lesson_index.file_state(project, path, stored) != lesson_index.BEHIND:
            continue
        try:
            files.write_atomic(project.root, path, lessons.render_file(json.loads(stored)))
        except (OSError, IthacaError):
            continue
        written.append(path)
    return written


def check(project: Project, conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """The doctor provider: a warning for each indexed lesson whose file does not hold it."""
    findings = []
    for lesson_id, path, stored in lesson_index.pending(conn):
        if lesson_index.file_state(project, path, stored) == lesson_index.BEHIND:
            findings.append(
                {
                    "code": "LESSON_FILE_MISSING",
                    "severity": "warning",
                    "message": f"lesson {lesson_id}: {path} does not hold the recorded lesson;"
                    " `ithaca doctor --repair` rewrites it from the index",
                    "subject": lesson_id,
                }
            )
    return findings


def _check_closed(closed: dict[str, Any]) -> None:
    """The lesson-worthy shape of a closed session (the service decides when to record)."""
    if closed.get("terminalState") not in lessons.TERMINAL_STATES:
        raise invalid_field("/terminalState", "NOT_ALLOWED", "only a terminal session teaches")
    for name in ("problem", "summary"):
        value = closed.get(name)
        if not isinstance(value, str) or not value.strip():
            raise invalid_field(f"/{name}", "REQUIRED", f"a lesson needs a non-blank {name}")
    try:
        lessons.date_of(closed.get("completed_at") or "")
    except ValueError as exc:
        raise invalid_field("/completed_at", "WRONG_FORMAT", str(exc)) from exc


def _free_path(conn: sqlite3.Connection, project: Project, closed: dict[str, Any]) -> str:
    """The first file name for this lesson that no other lesson (indexed or on disk) has."""
    taken = {path for (path,) in conn.execute("SELECT path FROM lessons")}
    folder = lesson_index.lesson_folder(project)
    date = lessons.date_of(closed["completed_at"])
    candidates = (f"{folder}/{name}" for name in lessons.file_names(date, closed["problem"]))
    return next(
        path
        for path in candidates
        if path not in taken and not os.path.lexists(os.path.join(project.root, path))
    )
