"""Knowledge capture: recording lessons, the index over their files, and the ``knowledge``
tool (reference §4).

Lesson files under ``.ithaca/knowledge/`` are the truth: they are tracked and arrive
through Git. The ``lessons`` table only indexes them, so before every search, get or
related lookup it is brought in step with the folder by ``(path, size, mtime_ns)``: a
file added by hand (or by ``git pull``) is indexed, a deleted one drops out, a changed
one is read again. Keeping this cache in step journals nothing; the files and the
events that recorded them are the record.

Recording follows the order the reference fixes. ``record_lesson`` runs inside the
caller's transaction (the session's terminal state commits with the index row and the
``knowledge.*`` event); ``write_lesson_file`` runs after the commit. Until the file holds
the row's record the row has no ``size`` (it is *pending*): a sync keeps it and adopts
the file once it holds the record (or holds every occurrence and was edited since),
``check`` (the doctor provider) reports it until then, and ``restore_missing_files``
rewrites the file from the index.

Queries never reach FTS5 syntax: each word of three or more characters (lowercased,
stop words dropped, at most 16) becomes a quoted FTS5 string, OR-joined, ranked by
``bm25``. Without FTS5 a term scan ranks the same words (diagnostic ``fts5_unavailable``);
``knowledge_schema`` says why the full-text table is made at run time.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ithaca.kernel import canon, files, ids, journal
from ithaca.kernel.connection import write_transaction
from ithaca.kernel.errors import IthacaError, NotFound, invalid_field
from ithaca.kernel.project import Project
from ithaca.kernel.store import WRITE_PATIENCE_S, Store
from ithaca.ulysses import knowledge_tables as knowledge_schema
from ithaca.ulysses import lessons

SEARCH_LIMIT_DEFAULT = 5
SEARCH_LIMIT_MAX = 20
RELATED_MAX = 3
QUERY_MAX_CHARS = 4000
ID_MAX_CHARS = 200
MAX_TERMS = 16
MIN_TERM_CHARS = 3
MAX_FILE_BYTES = 1024 * 1024
# bm25 weights for (title, problem, summary, body), the full-text table's column order.
WEIGHTS = (4.0, 2.0, 2.0, 1.0)
SNIPPET_TOKENS = 12
# Where a pending row's file stands (``_file_state``).
HOLDS, AHEAD, BEHIND = "holds", "ahead", "behind"

# English function words: they match nearly every lesson and would drown the rest.
_STOP_WORDS_TEXT = """
    about above after again all also and any are because been before being below between
    both but can cannot could did does doing down during each few for from further had has
    have having her here hers him his how into its itself just more most nor not now off
    once only other our ours out over own same she should some such than that the their
    theirs them then there these they this those through too under until very was were
    what when where which while who whom why will with would you your yours
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

_WORD = re.compile(r"\w+")
_COMMON_FIELDS = frozenset({"operation", "session"})


# --- recording ----------------------------------------------------------------------------


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
    sync(conn, project)
    key = lessons.lesson_key(closed["problem"], closed["constraints"], closed["summary"])
    existing = conn.execute(
        "SELECT seq, id, path, record FROM lessons WHERE key = ?", (key,)
    ).fetchone()
    if existing is not None:
        seq, lesson_id, path, stored = existing
        record = lessons.merged_record(json.loads(stored), closed)
        _drop(conn, seq)
        kind = "knowledge.lesson_merged"
    else:
        lesson_id = ids.new("lsn")
        record = lessons.new_record(lesson_id, key, closed)
        path = _free_path(conn, project, closed)
        kind = "knowledge.lesson_recorded"
    _put(conn, record, path=path, body=lessons.render_body(record), seen=None)
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
            _diagnostic(
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
    for _, path, stored in _pending(conn):
        if _file_state(project, path, stored) != BEHIND:
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
    for lesson_id, path, stored in _pending(conn):
        if _file_state(project, path, stored) == BEHIND:
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
    folder = _folder(project)
    date = lessons.date_of(closed["completed_at"])
    candidates = (f"{folder}/{name}" for name in lessons.file_names(date, closed["problem"]))
    return next(
        path
        for path in candidates
        if path not in taken and not os.path.lexists(os.path.join(project.root, path))
    )


# --- the index ----------------------------------------------------------------------------


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
            with _writing(conn):
                plan = _plan(conn, project)
                _apply(conn, plan)
    except OSError as exc:
        return [_diagnostic("knowledge_folder_unreadable", f"{project.knowledge_dir}: {exc}")]
    return plan.diagnostics


def _plan(conn: sqlite3.Connection, project: Project) -> _Plan:
    folder = _folder(project)
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
            state = _file_state(project, path, stored) if seen is not None else BEHIND
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
            plan.diagnostics.append(_diagnostic("lesson_file_invalid", f"{path}: {exc}"))
            continue
        except OSError as exc:
            plan.diagnostics.append(_diagnostic("lesson_file_unreadable", f"{path}: {exc}"))
            continue
        key = _index_key(record)
        if record["id"] in kept_ids or key in kept_keys:
            plan.diagnostics.append(
                _diagnostic(
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
        _drop(conn, seq)
    for seq, size, mtime_ns in plan.adopts:
        conn.execute(
            "UPDATE lessons SET size = ?, mtime_ns = ? WHERE seq = ? AND size IS NULL",
            (size, mtime_ns, seq),
        )
    for record, path, body, seen in plan.puts:
        _put(conn, record, path=path, body=body, seen=seen)


def _put(
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


def _drop(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("DELETE FROM lessons WHERE seq = ?", (seq,))
    if _fts_maintained(conn):
        conn.execute(f"DELETE FROM {knowledge_schema.FTS_TABLE} WHERE rowid = ?", (seq,))


def _fts_maintained(conn: sqlite3.Connection) -> bool:
    """Whether this process keeps the full-text table in step as rows change (a process
    without FTS5 leaves it behind; the next search that has FTS5 rebuilds it)."""
    return knowledge_schema.fts5_available() and knowledge_schema.fts_exists(conn)


@contextmanager
def _writing(conn: sqlite3.Connection) -> Iterator[None]:
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


def _folder(project: Project) -> str:
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


def _file_state(project: Project, path: str, stored: str) -> str:
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


def _pending(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """``(id, path, record)`` of each row whose file has not been seen holding it."""
    return conn.execute(
        "SELECT id, path, record FROM lessons WHERE size IS NULL ORDER BY seq"
    ).fetchall()


# --- search -------------------------------------------------------------------------------


def query_terms(text: str) -> list[str]:
    """The words a query searches for: ≥ 3 characters, lowercased, no stop words, ≤ 16."""
    terms: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) >= MIN_TERM_CHARS and word not in STOP_WORDS and word not in terms:
            terms.append(word)
            if len(terms) == MAX_TERMS:
                break
    return terms


def fts_query(terms: list[str]) -> str:
    """An FTS5 query in which every term is a quoted string: no operator can slip in."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def search_index(
    conn: sqlite3.Connection, text: str, limit: int
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Ranked hits ``{id, title, date, terminalState, snippet, path, summary}`` and
    diagnostics; the caller has synced the index."""
    terms = query_terms(text)
    if not terms or limit <= 0:
        return [], []
    if not knowledge_schema.fts5_available():
        unavailable = _diagnostic(
            "fts5_unavailable", "this SQLite has no FTS5; lessons were found by a term scan"
        )
        return _scan(conn, terms, limit), [unavailable]
    if not (knowledge_schema.fts_exists(conn) and knowledge_schema.fts_in_step(conn)):
        with _writing(conn):
            knowledge_schema.ensure_fts(conn)
    table = knowledge_schema.FTS_TABLE
    weights = ", ".join(str(weight) for weight in WEIGHTS)
    rows = conn.execute(
        f"SELECT l.id, l.title, l.date, l.terminal_state,"
        f" snippet({table}, -1, '[', ']', '…', {SNIPPET_TOKENS}), l.path, l.summary"
        f" FROM {table} JOIN lessons AS l ON l.seq = {table}.rowid"
        f" WHERE {table} MATCH ? ORDER BY bm25({table}, {weights}), l.date DESC, l.id LIMIT ?",
        (fts_query(terms), limit),
    ).fetchall()
    return [_hit(*row) for row in rows], []


def _scan(conn: sqlite3.Connection, terms: list[str], limit: int) -> list[dict[str, Any]]:
    """The FTS5-less ranking: weighted counts of the terms among each field's words."""
    wanted = set(terms)
    scored: list[tuple[float, dict[str, Any]]] = []
    for lesson_id, title, date, state, path, problem, summary, body in conn.execute(
        "SELECT id, title, date, terminal_state, path, problem, summary, body FROM lessons"
        " ORDER BY date DESC, id"
    ).fetchall():
        fields = (title, problem, summary, body)
        score = sum(
            weight * sum(1 for word in _WORD.findall(field.lower()) if word in wanted)
            for weight, field in zip(WEIGHTS, fields, strict=True)
        )
        if score:
            snippet = _scan_snippet((summary, problem, body, title), wanted)
            scored.append((score, _hit(lesson_id, title, date, state, snippet, path, summary)))
    scored.sort(key=lambda item: item[0], reverse=True)  # stable: ties stay newest first
    return [hit for _, hit in scored[:limit]]


def _scan_snippet(fields: tuple[str, ...], wanted: set[str]) -> str:
    """About ``SNIPPET_TOKENS`` words of the field with the most hits, around its first hit,
    with the hits in brackets (as FTS5's ``snippet`` marks them)."""

    def marked(word: str) -> str:
        return _WORD.sub(lambda m: f"[{m[0]}]" if m[0].lower() in wanted else m[0], word)

    best: list[str] = []
    best_hits: list[bool] = []
    for field in fields:
        words = field.split()
        hits = [marked(word) != word for word in words]
        if sum(hits) > sum(best_hits):
            best, best_hits = words, hits
    if not any(best_hits):
        return ""
    start = max(0, best_hits.index(True) - SNIPPET_TOKENS // 3)
    end = min(len(best), start + SNIPPET_TOKENS)
    shown = " ".join(marked(word) for word in best[start:end])
    return ("…" if start else "") + shown + ("…" if end < len(best) else "")


def _hit(
    lesson_id: str,
    title: str,
    date: str,
    state: str,
    snippet: str,
    path: str,
    summary: str,
) -> dict[str, Any]:
    return {
        "id": lesson_id,
        "title": title,
        "date": date,
        "terminalState": state,
        "snippet": snippet,
        "path": path,
        "summary": summary,
    }


def related(
    conn: sqlite3.Connection,
    project: Project,
    problem: str,
    constraints: list[str],
    limit: int = RELATED_MAX,
) -> list[dict[str, Any]]:
    """At most three lessons for a new session's problem and constraints,
    ``{id, title, summary, terminalState, date, path}``. Never raises: a broken index must
    not stop a session from starting."""
    try:
        sync(conn, project)
        hits, _ = search_index(
            conn, " ".join([problem, *constraints]), max(0, min(limit, RELATED_MAX))
        )
    except (sqlite3.Error, OSError, ValueError, LookupError, TypeError, IthacaError):
        return []
    fields = ("id", "title", "summary", "terminalState", "date", "path")
    return [{name: hit[name] for name in fields} for hit in hits]


def _diagnostic(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


# --- the knowledge tool -------------------------------------------------------------------


class KnowledgeService:
    """``knowledge {operation: search|get}`` for the MCP tool and the CLI (authority
    ``agent``; both operations only read lessons, the index syncs on the way)."""

    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config

    def dispatch(self, arguments: dict[str, Any]) -> dict[str, Any]:
        operation = _mapping(arguments).get("operation")
        if operation == "search":
            return self.search(arguments)
        if operation == "get":
            return self.get(arguments)
        if operation is None:
            raise invalid_field("/operation", "REQUIRED", "operation is required (search or get)")
        raise invalid_field("/operation", "NOT_ALLOWED", "operation must be one of search, get")

    def search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``{query, limit?}`` → ``{results: [{id, title, date, terminalState, snippet,
        path}]}`` plus ``diagnostics`` when there are any."""
        _only_fields(arguments, "search", {"query", "limit"})
        query = _text(arguments, "query", QUERY_MAX_CHARS)
        limit = _limit(arguments.get("limit", SEARCH_LIMIT_DEFAULT))
        conn = self.store.connection()
        diagnostics = sync(conn, self.project)
        hits, more = search_index(conn, query, limit)
        result: dict[str, Any] = {
            "results": [{k: v for k, v in hit.items() if k != "summary"} for hit in hits]
        }
        if diagnostics or more:
            result["diagnostics"] = diagnostics + more
        return result

    def get(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``{id}`` → ``{id, path, record, markdown}``; ``LESSON_NOT_FOUND``."""
        _only_fields(arguments, "get", {"id"})
        lesson_id = _text(arguments, "id", ID_MAX_CHARS)
        conn = self.store.connection()
        sync(conn, self.project)
        row = conn.execute(
            "SELECT path, record, body FROM lessons WHERE id = ?", (lesson_id,)
        ).fetchone()
        if row is None:
            raise NotFound("LESSON_NOT_FOUND", f"no lesson {lesson_id}", {"id": lesson_id})
        path, stored, body = row
        return {"id": lesson_id, "path": path, "record": json.loads(stored), "markdown": body}


def _mapping(arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, dict):
        raise invalid_field("", "WRONG_TYPE", "the arguments must be an object")
    return arguments


def _only_fields(arguments: Any, operation: str, fields: set[str]) -> None:
    """Refuse unknown fields; ``session`` (filled in by the hook) is accepted and ignored."""
    for name in _mapping(arguments):
        if name == "operation" and arguments[name] != operation:
            raise invalid_field("/operation", "NOT_ALLOWED", f"operation must be {operation}")
        if name not in fields and name not in _COMMON_FIELDS:
            raise invalid_field(
                f"/{name}", "UNKNOWN_FIELD", f"{name!r} is not a field of {operation}"
            )


def _text(arguments: dict[str, Any], name: str, limit: int) -> str:
    pointer = f"/{name}"
    if name not in arguments:
        raise invalid_field(pointer, "REQUIRED", f"{name} is required")
    value = arguments[name]
    if not isinstance(value, str):
        raise invalid_field(pointer, "WRONG_TYPE", f"{name} must be a string")
    if not value.strip():
        raise invalid_field(pointer, "EMPTY", f"{name} must not be blank")
    if len(value) > limit:
        raise invalid_field(pointer, "TOO_LONG", f"{name} is longer than {limit} characters")
    return value


def _limit(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid_field("/limit", "WRONG_TYPE", "limit must be an integer")
    if not 1 <= value <= SEARCH_LIMIT_MAX:
        raise invalid_field(
            "/limit", "OUT_OF_RANGE", f"limit must be between 1 and {SEARCH_LIMIT_MAX}"
        )
    return value
