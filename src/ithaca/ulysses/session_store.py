"""Where Ulysses sessions are kept: the ``ulysses_sessions`` and ``ulysses_notes`` rows,
the journal events a transition yields and the gate record the hook reads.

A session row holds the whole state as canonical JSON; ``commit`` saves it, appends its
events and brings the kernel gate record in step in the caller's transaction, so the hook
never sees a phase the store does not hold. ``load_unchanged`` is the optimistic check of
an operation whose validator ran outside the transaction: it refuses (``STATE_CONFLICT``)
when the session moved meanwhile.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ithaca.kernel import canon, gates, journal
from ithaca.kernel.errors import Conflict, Corrupt, NotFound
from ithaca.ulysses.session import State, is_tamper
from ithaca.validators import bindings


def decode_state(text: str) -> State:
    """A stored ``state_json``; ``STATE_UNREADABLE`` when it is not JSON."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise Corrupt(
            "STATE_UNREADABLE", "a stored Ulysses session is not JSON; run `ithaca doctor`"
        ) from exc
    return dict(value)


def load_active(conn: sqlite3.Connection) -> State | None:
    """The active session, if there is one."""
    row = conn.execute("SELECT state_json FROM ulysses_sessions WHERE status = 'active'").fetchone()
    return None if row is None else decode_state(row[0])


def load_session(conn: sqlite3.Connection, session_id: str) -> State:
    """Any session by id, active or closed; ``SESSION_NOT_FOUND``."""
    row = conn.execute(
        "SELECT state_json FROM ulysses_sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise NotFound(
            "SESSION_NOT_FOUND", f"no Ulysses session {session_id}", {"session_id": session_id}
        )
    return decode_state(row[0])


def load_last_closed(conn: sqlite3.Connection) -> State | None:
    """The session that closed most recently, if any."""
    row = conn.execute(
        "SELECT state_json FROM ulysses_sessions WHERE status != 'active'"
        " ORDER BY completed_at DESC, rowid DESC LIMIT 1"
    ).fetchone()
    return None if row is None else decode_state(row[0])


def load_unchanged(conn: sqlite3.Connection, expected: State) -> State:
    """The active session, provided nothing committed since ``expected`` was read."""
    current = load_active(conn)
    if (
        current is None
        or current["session_id"] != expected["session_id"]
        or current["version"] != expected["version"]
    ):
        raise Conflict(
            "STATE_CONFLICT",
            "the session changed while the validator ran, so its verdict was not applied;"
            " call status before trying again",
            {
                "session_id": expected["session_id"],
                "expected_version": expected["version"],
                "version": None if current is None else current["version"],
            },
        )
    return current


def record_validator_run(
    conn: sqlite3.Connection, binding_id: str, validation: dict[str, Any]
) -> None:
    """Keep a run with the transition it causes. A failed snapshot check whose binding
    row was deleted has no row to keep it under; the tamper transition still commits."""
    try:
        bindings.record_run(conn, binding_id, validation)
    except NotFound:
        if not is_tamper(validation):
            raise


def save(conn: sqlite3.Connection, state: State) -> None:
    """Insert or update the session's row."""
    conn.execute(
        "INSERT INTO ulysses_sessions (session_id, status, version, state_json, created_at,"
        " completed_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
        " status = excluded.status, version = excluded.version,"
        " state_json = excluded.state_json, completed_at = excluded.completed_at",
        (
            state["session_id"],
            state["status"],
            state["version"],
            canon.canonical_text(state),
            state["created_at"],
            state["completed_at"],
        ),
    )


def append_events(conn: sqlite3.Connection, events: list[dict[str, Any]]) -> list[int]:
    """Journal the events a transition yielded; returns their seqs."""
    return [
        journal.append(
            conn,
            actor=event["actor"],
            kind=event["kind"],
            subject=event["subject"],
            payload=event["payload"],
        )
        for event in events
    ]


def commit(conn: sqlite3.Connection, state: State, events: list[dict[str, Any]]) -> list[int]:
    """Save ``state``, append its events and bring the gate record in step."""
    save(conn, state)
    seqs = append_events(conn, events)
    _sync_gate(conn, seqs[-1])
    return seqs


def save_note(
    conn: sqlite3.Connection, state: State, command: dict[str, Any], now: str, seq: int
) -> None:
    """The note ``state`` just counted, kept beside the event that recorded it."""
    data = command.get("data")
    conn.execute(
        "INSERT INTO ulysses_notes (session_id, note_seq, kind, thought, data_json, at,"
        " journal_seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            state["session_id"],
            state["note_count"],
            command["kind"],
            command["thought"],
            None if data is None else canon.canonical_text(data),
            now,
            seq,
        ),
    )


def recent_notes(conn: sqlite3.Connection, session_id: str, limit: int) -> list[dict[str, Any]]:
    """The session's last ``limit`` notes, oldest first."""
    rows = conn.execute(
        "SELECT note_seq, kind, thought, data_json, at FROM ulysses_notes"
        " WHERE session_id = ? ORDER BY note_seq DESC LIMIT ?",
        (session_id, limit),
    ).fetchall()
    return [
        {
            "note_seq": note_seq,
            "kind": kind,
            "thought": thought,
            "data": None if data_json is None else json.loads(data_json),
            "at": at,
        }
        for note_seq, kind, thought, data_json, at in reversed(rows)
    ]


def _sync_gate(conn: sqlite3.Connection, seq: int) -> None:
    """The kernel gate record names the active session and its phase, or is absent."""
    row = conn.execute(
        "SELECT session_id, json_extract(state_json, '$.phase') FROM ulysses_sessions"
        " WHERE status = 'active'"
    ).fetchone()
    if row is None:
        gates.clear_state(conn, "ulysses", "project")
        return
    state = canon.canonical_text({"session_id": row[0], "phase": row[1]})
    gates.save_state(conn, "ulysses", "project", state, seq)
