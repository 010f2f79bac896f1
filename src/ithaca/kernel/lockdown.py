"""Lockdown: what a session is in once something Ithaca protects changed without it.

The effect check (``ithaca.hosts.effects``) compares the protected files with the
fingerprint Ithaca last accepted (``kernel.fingerprint``). A change that Ithaca did not
make puts the session in lockdown: one row here and a ``lockdown.entered`` event, in
the same transaction. While it holds, the session's mutating calls are denied. Only the
user lifts it (``ithaca doctor lift-lockdown``, from their own terminal), which accepts
the files as they are then: the fingerprint is recorded anew and every lockdown ends,
with a ``lockdown.lifted`` event.

The accepted fingerprint is one row: the signature the hook compares first (the
protected files' bytes side by side, the user's own files by digest), the contents the
slow path compares when that moved, and the blobs the checked-out commit held for the
team's files (``kernel.git_head``).
Ithaca records it itself when it writes what it protects (``ithaca init``, ``install``,
``uninstall``, a restore), after rebuilding the derived configuration cache, which is
never accepted as it stands. Standard library and light modules only (hook path).
"""

from __future__ import annotations

from ithaca.kernel import canon, fingerprint, ids, journal, lightjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

    from ithaca.kernel.project import Project

SCHEMA = """
CREATE TABLE effect_baseline (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  signature TEXT NOT NULL,
  contents_json TEXT NOT NULL CHECK (json_valid(contents_json)),
  heads_json TEXT NOT NULL CHECK (json_valid(heads_json)),
  recorded_at TEXT NOT NULL
);
CREATE TABLE lockdowns (
  id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  host_session_id TEXT,
  entered_at TEXT NOT NULL,
  event TEXT NOT NULL,
  tool TEXT,
  changes_json TEXT NOT NULL CHECK (json_valid(changes_json)),
  lifted_at TEXT
);
CREATE INDEX lockdowns_active ON lockdowns(lifted_at, host, host_session_id);
"""
CODE = "LOCKDOWN"
ENTERED = "lockdown.entered"
LIFTED = "lockdown.lifted"
BASELINED = "effects.baselined"
# The recorded signature while something other than a regular file stands where one
# belongs: no signature equals it, so every check compares the contents.
UNSETTLED = "unsettled"


def baseline(
    conn: sqlite3.Connection,
) -> tuple[str | bytes, dict[str, Any], dict[str, str]] | None:
    """The accepted ``(signature, contents, heads)``; None before any was recorded. The
    signature is ``fingerprint.signature``'s bytes (text from an older release, or
    ``UNSETTLED``, which no signature equals)."""
    row = conn.execute(
        "SELECT signature, contents_json, heads_json FROM effect_baseline"
    ).fetchone()
    return None if row is None else (row[0], lightjson.loads(row[1]), lightjson.loads(row[2]))


def record_baseline(
    conn: sqlite3.Connection, project: Project, *, actor: str, reason: str, at: str
) -> None:
    """Accept the protected files as they are now; the caller holds the transaction."""
    from ithaca.kernel import config, git_head  # Git runs here: not on the hook's fast path

    config.refresh(project.state_root)  # derived: rebuilt from the files, never accepted
    surveyed = fingerprint.survey(project)
    contents = fingerprint.contents(project, surveyed)
    heads = git_head.blobs(project)
    conn.execute(
        "INSERT INTO effect_baseline (id, signature, contents_json, heads_json, recorded_at)"
        " VALUES (1, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET signature ="
        " excluded.signature, contents_json = excluded.contents_json, heads_json ="
        " excluded.heads_json, recorded_at = excluded.recorded_at",
        (
            fingerprint.signature(project, surveyed) or UNSETTLED,
            canon.canonical_text(contents),
            canon.canonical_text(heads),
            at,
        ),
    )
    payload = {"reason": reason, "files": sorted(contents)}
    journal.append(conn, actor=actor, kind=BASELINED, subject=None, payload=payload, at=at)


def resign(conn: sqlite3.Connection, signature: bytes, heads: dict[str, str]) -> None:
    """Record a new signature for contents that did not change, and the blobs the
    checked-out commit holds now that the working files agree with it."""
    conn.execute(
        "UPDATE effect_baseline SET signature = ?, heads_json = ?",
        (signature, canon.canonical_text(heads)),
    )


def active(conn: sqlite3.Connection, host: str, session_id: str | None) -> dict[str, Any] | None:
    """The session's lockdown in force, if any: ``{"id", "enteredAt", "changes"}``."""
    row = conn.execute(
        "SELECT id, entered_at, changes_json FROM lockdowns WHERE lifted_at IS NULL"
        " AND host = ? AND host_session_id IS ? ORDER BY entered_at LIMIT 1",
        (host, session_id),
    ).fetchone()
    if row is None:
        return None
    return {"id": row[0], "enteredAt": row[1], "changes": lightjson.loads(row[2])}


def enter(
    conn: sqlite3.Connection,
    *,
    host: str,
    session_id: str | None,
    event: str,
    tool: str | None,
    changes: list[dict[str, str]],
    at: str,
) -> str:
    """Put the session in lockdown for ``changes``; the caller holds the transaction."""
    lockdown_id = ids.new("lck")
    conn.execute(
        "INSERT INTO lockdowns (id, host, host_session_id, entered_at, event, tool,"
        " changes_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (lockdown_id, host, session_id, at, event, tool, canon.canonical_text(changes)),
    )
    payload = {"host": host, "session": session_id, "event": event, "tool": tool,
               "changes": changes}  # fmt: skip
    journal.append(conn, actor="hook", kind=ENTERED, subject=lockdown_id, payload=payload, at=at)
    return lockdown_id


def all_active(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every lockdown in force, oldest first."""
    rows = conn.execute(
        "SELECT id, host, host_session_id, entered_at, event, tool, changes_json"
        " FROM lockdowns WHERE lifted_at IS NULL ORDER BY entered_at, id"
    ).fetchall()
    return [
        {
            "id": row[0],
            "host": row[1],
            "session": row[2],
            "enteredAt": row[3],
            "event": row[4],
            "tool": row[5],
            "changes": lightjson.loads(row[6]),
        }  # fmt: skip
        for row in rows
    ]


def lift(conn: sqlite3.Connection, project: Project, *, at: str) -> list[str]:
    """End every lockdown and accept the files, and the journal, as they are; returns the
    ids lifted."""
    from ithaca.kernel import anchor

    lifted = [row["id"] for row in all_active(conn)]
    anchor.rebase_on_commit(conn)  # the journal too is accepted as it is, under a sound seal
    conn.execute("UPDATE lockdowns SET lifted_at = ? WHERE lifted_at IS NULL", (at,))
    journal.append(conn, actor="user", kind=LIFTED, subject=None, payload={"lifted": lifted}, at=at)
    record_baseline(conn, project, actor="user", reason="lockdown lifted", at=at)
    return lifted


def accept(project: Project, *, reason: str) -> None:
    """Record the fingerprint after Ithaca itself changed what it protects (an install, an
    uninstall, a restore); nothing to do before the project has a database."""
    import os

    from ithaca.kernel import clock
    from ithaca.kernel.store import Store

    if not os.path.exists(project.db_path):
        return
    store = Store(project.db_path, backups_dir=project.backups_dir)
    try:
        with store.write() as conn:
            record_baseline(conn, project, actor="user", reason=reason, at=clock.now())
    finally:
        store.close()
