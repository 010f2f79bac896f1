"""The append-only, hash-chained journal.

Every state transition appends one event in the same transaction as the change, so the
journal explains every state and an edit made behind Ithaca's back breaks the chain:
``hash = sha256(prev_hash + canonical(event))`` where the event is
``{seq, at, actor, kind, subject, payload}`` and the genesis ``prev_hash`` is 64 zeros.
Checking the whole chain is ``kernel.journal_check`` (``ithaca doctor``), which hooks,
appending on every call, never load.
"""

from __future__ import annotations

from ithaca.kernel import anchor, canon, clock, lightjson
from ithaca.kernel.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

GENESIS = "0" * 64
ACTORS = ("agent", "hook", "user", "system")
EVENT_FIELDS = ("seq", "at", "actor", "kind", "subject", "payload")
# The events with which the user accepted the journal as it stood (a restore, a lifted
# lockdown): what an older journal said was granted counts for nothing after them.
REBASED = ("kernel.doctor_restored", "lockdown.lifted")


def append(
    conn: sqlite3.Connection,
    *,
    actor: str,
    kind: str,
    subject: str | None,
    payload: dict[str, Any],
    at: str | None = None,
) -> int:
    """Append one event; the caller holds the write transaction. Returns its ``seq``."""
    if actor not in ACTORS:
        raise InvalidInput("INVALID_ACTOR", f"unknown actor {actor!r}", {"actor": actor})
    last = head(conn)
    seq, prev_hash = (last[0] + 1, last[1]) if last else (1, GENESIS)
    event = {
        "seq": seq,
        "at": at or clock.now(),
        "actor": actor,
        "kind": kind,
        "subject": subject,
        "payload": payload,
    }
    event_hash = chain_hash(prev_hash, event)
    conn.execute(
        "INSERT INTO journal (seq, at, actor, kind, subject, payload, prev_hash, hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            seq,
            event["at"],
            actor,
            kind,
            subject,
            canon.canonical_text(payload),
            prev_hash,
            event_hash,
        ),
    )
    anchor.note(conn, seq, event_hash)
    return seq


def chain_hash(prev_hash: str, event: dict[str, Any]) -> str:
    return canon.sha256(prev_hash.encode("ascii") + canon.canonical(event)).hexdigest()


def stored_event(*fields: Any) -> dict[str, Any]:
    """The event a stored row's ``seq, at, actor, kind, subject`` and decoded ``payload``
    make, as ``chain_hash`` hashes it."""
    return dict(zip(EVENT_FIELDS, fields, strict=True))


def query(
    conn: sqlite3.Connection,
    *,
    kind: str | None = None,
    subject: str | None = None,
    after_seq: int = 0,
    limit: int | None = None,
    newest: bool = False,
) -> list[dict[str, Any]]:
    """Events in order. ``kind`` matches exactly, or as a prefix when it ends in ``.`` or
    ``*`` (``protocols.*``). With ``newest``, ``limit`` keeps the latest events."""
    clauses = ["seq > ?"]
    params: list[Any] = [after_seq]
    if kind:
        if kind.endswith("*") or kind.endswith("."):
            prefix = kind.rstrip("*")
            clauses.append("substr(kind, 1, ?) = ?")
            params += [len(prefix), prefix]
        else:
            clauses.append("kind = ?")
            params.append(kind)
    if subject:
        clauses.append("subject = ?")
        params.append(subject)
    sql = (
        "SELECT seq, at, actor, kind, subject, payload, hash FROM journal WHERE "
        + " AND ".join(clauses)
        + (" ORDER BY seq DESC" if newest else " ORDER BY seq")
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    rows = conn.execute(sql, params).fetchall()
    if newest:
        rows.reverse()
    return [
        {
            "seq": seq,
            "at": at,
            "actor": actor,
            "kind": kind_,
            "subject": subj,
            "payload": _payload(payload),
            "hash": event_hash,
        }
        for seq, at, actor, kind_, subj, payload, event_hash in rows
    ]


def _payload(text: str) -> Any:
    """A stored payload; one edited into invalid JSON is shown as it is (doctor reports it)."""
    try:
        return lightjson.loads(text)
    except ValueError:
        return {"unreadablePayload": text}


def latest_seq(conn: sqlite3.Connection) -> int | None:
    """The seq of the last event, or None for an empty journal."""
    found = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
    return None if found is None else int(found)


def verified_event(conn: sqlite3.Connection, seq: int) -> dict[str, Any] | None:
    """The event at ``seq`` if its hash still holds and its successor (if any) is still
    chained to it; None when it is missing, edited or cut out of the chain."""
    found = conn.execute(
        "SELECT at, actor, kind, subject, payload, prev_hash, hash FROM journal WHERE seq = ?",
        (seq,),
    ).fetchone()
    if found is None:
        return None
    at, actor, kind, subject, payload_text, prev_hash, stored_hash = found
    try:
        payload = lightjson.loads(payload_text)
    except ValueError:
        return None
    event = stored_event(seq, at, actor, kind, subject, payload)
    try:
        if chain_hash(prev_hash, event) != stored_hash:
            return None
    except InvalidInput:
        return None
    successor = conn.execute(
        "SELECT prev_hash FROM journal WHERE seq > ? ORDER BY seq LIMIT 1", (seq,)
    ).fetchone()
    if successor is not None and successor[0] != stored_hash:
        return None
    return event


def count(conn: sqlite3.Connection) -> int:
    """How many events the journal holds."""
    return int(conn.execute("SELECT count(*) FROM journal").fetchone()[0])


def head(conn: sqlite3.Connection) -> tuple[int, str] | None:
    """``(seq, hash)`` of the last row, or None for an empty journal."""
    row = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    return (int(row[0]), str(row[1])) if row else None


def last_rebase(conn: sqlite3.Connection) -> int:
    """The seq of the last event with which the user accepted the journal as it stood
    (``REBASED``), or 0."""
    row = conn.execute("SELECT max(seq) FROM journal WHERE kind IN (?, ?)", REBASED).fetchone()
    return int(row[0] or 0)


def hash_at(conn: sqlite3.Connection, seq: int) -> str | None:
    row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()
    return str(row[0]) if row else None
