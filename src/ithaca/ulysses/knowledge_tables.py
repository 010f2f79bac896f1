"""The knowledge index's tables (docs/ulysses.md, "Lessons"), and its full-text table made
at run time.

``lessons`` is an index of the lesson files under ``.ithaca/knowledge/``: the files are
the truth, the rows are rebuilt from them. ``size`` and ``mtime_ns`` are what the file
looked like when it was last indexed; both are NULL while the file does not yet hold the
row's record (written after the commit, or a write that failed), and such a row
survives a sync until the file catches up or is restored from it. ``seq`` never reuses a
value (AUTOINCREMENT) and a row whose text changes is replaced, never updated, so the
full-text table is in step exactly when it holds one entry per ``seq``.

The FTS5 table is kept out of the migration on purpose: a migration that created it
would leave the whole store unopenable on a Python whose SQLite lacks FTS5. It is made
the first time a search needs it (``ensure_fts``), maintained alongside each row where
FTS5 exists, and rebuilt whenever it is found out of step; without FTS5 searches scan
terms instead (diagnostic ``fts5_unavailable``).
"""

from __future__ import annotations

import sqlite3
from functools import cache

KNOWLEDGE_V1 = """
CREATE TABLE lessons (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  key TEXT NOT NULL UNIQUE CHECK (length(key) = 64),
  path TEXT NOT NULL UNIQUE,
  size INTEGER,
  mtime_ns INTEGER,
  record TEXT NOT NULL CHECK (json_valid(record) AND json_type(record) = 'object'),
  title TEXT NOT NULL,
  problem TEXT NOT NULL,
  summary TEXT NOT NULL,
  body TEXT NOT NULL,
  terminal_state TEXT NOT NULL
    CHECK (terminal_state IN ('resolved','insufficient_information','environment_compromised')),
  date TEXT NOT NULL CHECK (date GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'),
  CHECK ((size IS NULL) = (mtime_ns IS NULL))
);
"""

FTS_TABLE = "lessons_fts"

# Column order matters: the bm25 weights in ``lesson_search`` follow it.
FTS_DDL = f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(title, problem, summary, body)"


@cache
def fts5_available() -> bool:
    """Whether this process's SQLite has the FTS5 module (probed once, in memory)."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()
    return True


def fts_exists(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (FTS_TABLE,)
    ).fetchone()
    return row is not None


def fts_in_step(conn: sqlite3.Connection) -> bool:
    """Whether the full-text table holds exactly one entry per lesson row."""
    lessons, entries, unmatched = conn.execute(
        f"SELECT (SELECT count(*) FROM lessons), (SELECT count(*) FROM {FTS_TABLE}),"
        f" (SELECT count(*) FROM lessons WHERE seq NOT IN (SELECT rowid FROM {FTS_TABLE}))"
    ).fetchone()
    return bool(lessons == entries and unmatched == 0)


def ensure_fts(conn: sqlite3.Connection) -> None:
    """Create the full-text table if missing and rebuild it from the rows; the caller holds
    the write transaction and has checked ``fts5_available``."""
    if not fts_exists(conn):
        conn.execute(FTS_DDL)
    elif fts_in_step(conn):
        return
    conn.execute(f"DELETE FROM {FTS_TABLE}")
    conn.execute(
        f"INSERT INTO {FTS_TABLE} (rowid, title, problem, summary, body)"
        " SELECT seq, title, problem, summary, body FROM lessons"
    )
