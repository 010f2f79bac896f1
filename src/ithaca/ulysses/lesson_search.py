"""Searching the lessons: the ``knowledge`` tool's search and a new session's related lessons.

Queries never reach FTS5 syntax: each word of three or more characters (lowercased,
stop words dropped, at most 16) becomes a quoted FTS5 string, OR-joined, ranked by
``bm25``. Without FTS5 a term scan ranks the same words (diagnostic ``fts5_unavailable``);
``knowledge_tables`` says why the full-text table is made at run time.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ithaca.kernel.errors import IthacaError
from ithaca.kernel.project import Project
from ithaca.ulysses import knowledge_tables as knowledge_schema
from ithaca.ulysses import lesson_index
from ithaca.ulysses.diagnostics import diagnostic

RELATED_MAX = 3
MAX_TERMS = 16
MIN_TERM_CHARS = 3
# bm25 weights for (title, problem, summary, body), the full-text table's column order.
WEIGHTS = (4.0, 2.0, 2.0, 1.0)
SNIPPET_TOKENS = 12

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
        unavailable = diagnostic(
            "fts5_unavailable", "this SQLite has no FTS5; lessons were found by a term scan"
        )
        return _scan(conn, terms, limit), [unavailable]
    if not (knowledge_schema.fts_exists(conn) and knowledge_schema.fts_in_step(conn)):
        with lesson_index.writing(conn):
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
        lesson_index.sync(conn, project)
        hits, _ = search_index(
            conn, " ".join([problem, *constraints]), max(0, min(limit, RELATED_MAX))
        )
    except (sqlite3.Error, OSError, ValueError, LookupError, TypeError, IthacaError):
        return []
    fields = ("id", "title", "summary", "terminalState", "date", "path")
    return [{name: hit[name] for name in fields} for hit in hits]
