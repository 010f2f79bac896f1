"""Reading and writing a session's ultragoal rows, and committing a transition.

Both the service and the hooks go through here, so it imports only the standard library
and the kernel. Rows come back as plain dicts keyed by column name, with 0/1 flags as
booleans and JSON columns decoded. ``commit`` is the one way a transition ends: it bumps
the pursuit's ``version``, stamps ``last_touched_at``, saves the row, appends the
``ultragoal.<name>`` event carrying the actor's inputs and the resulting state digest, and
brings the kernel ``gate_state`` record in step, all in the caller's transaction.
"""

from __future__ import annotations

from ithaca.kernel import canon, gates, journal, lightjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

    Row = dict[str, Any]

PART = "ultragoal"
REVIEW_CAP_INITIAL = 5
# The scalar fields ``get`` shows as they are stored, in its order.
STATE_FIELDS = (
    "outcome",
    "verification_surface",
    "constraints",
    "boundaries",
    "non_goals",
    "max_iterations",
    "blocked_stop",
    "phase",
    "iteration",
    "started_at",
    "active",
    "objective_verdict",
    "plan_path",
    "resume_summary",
    "budget_limit_notified",
    "blocked_reason",
)
PURSUIT_COLUMNS = (
    "session_id",
    *STATE_FIELDS,
    "completion_evidence",
    "schema_version",
    "last_touched_at",
    "progress_touched_at",
    "review_dispatch_used",
    "review_dispatch_cap",
    "approved_review_artifact_sha256",
    "review_resolution",
    "codex_goal_objective",
    "last_seen_head",
    "last_seen_stories_digest",
    "last_seen_evidence_count",
    "last_seen_validator_digest",
    "max_wall_minutes",
    "wall_used_s",
    "turn_started_at",
    "budget_kind",
    "stop_blocks_consecutive",
    "background_waits",
    "host_capped",
    "pursued_once",
    "fresh_start_authorised",
    "completion",
    "version",
    "review_base",
)
STORY_COLUMNS = (
    "id",
    "position",
    "story",
    "acceptance_criteria",
    "verification_surface",
    "status",
    "steering_evidence",
    "steering_rationale",
    "split_from",
    "split_into",
    "validator",
    "changed_seq",
    "confirmed_relayed",
    "ever_confirmed",
)
FLAG_COLUMNS = frozenset(
    {
        "active",
        "budget_limit_notified",
        "host_capped",
        "pursued_once",
        "fresh_start_authorised",
        "confirmed_relayed",
        "ever_confirmed",
    }
)
JSON_COLUMNS = frozenset(
    {
        "completion_evidence",
        "review_resolution",
        "completion",
        "acceptance_criteria",
        "split_into",
        "validator",
        "evidence",
        "artifact",
    }
)
ACTIVE_PHASES = frozenset({"planning", "pursuing"})
PAUSED_PHASES = frozenset({"budget_limited", "blocked"})


# --- reading ----------------------------------------------------------------------------


def load(conn: sqlite3.Connection, session_id: str) -> Row | None:
    """The session's pursuit row, or None."""
    found = conn.execute(
        f"SELECT {', '.join(PURSUIT_COLUMNS)} FROM ultragoal_pursuit WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return None if found is None else _decode(PURSUIT_COLUMNS, found)


def stories(conn: sqlite3.Connection, session_id: str) -> list[Row]:
    """The session's stories in stored order."""
    rows = conn.execute(
        f"SELECT {', '.join(STORY_COLUMNS)} FROM ultragoal_story WHERE session_id = ?"
        " ORDER BY position",
        (session_id,),
    ).fetchall()
    return [_decode(STORY_COLUMNS, row) for row in rows]


def verdicts(conn: sqlite3.Connection, session_id: str) -> dict[str, Row]:
    """The per-story verdict rows by story id."""
    names = ("story_id", "verdict", "evidence", "verifier", "validator_run_id", "at", "seq")
    rows = conn.execute(
        f"SELECT {', '.join(names)} FROM ultragoal_story_verdict WHERE session_id = ?",
        (session_id,),
    ).fetchall()
    return {row[0]: _decode(names, row) for row in rows}


def review(conn: sqlite3.Connection, session_id: str) -> Row | None:
    """The current review artifact row ``{artifact, artifact_sha256, dispatch_no}``."""
    names = ("artifact", "artifact_sha256", "dispatch_no")
    found = conn.execute(
        f"SELECT {', '.join(names)} FROM ultragoal_review WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if found is None else _decode(names, found)


def dismissals(conn: sqlite3.Connection, session_id: str) -> list[Row]:
    names = ("artifact_sha256", "ref", "class", "rationale", "at")
    rows = conn.execute(
        f"SELECT {', '.join(names)} FROM ultragoal_dismissal WHERE session_id = ?"
        " ORDER BY at, ref, class",
        (session_id,),
    ).fetchall()
    return [_decode(names, row) for row in rows]


def passing_run(conn: sqlite3.Connection, session_id: str, story: Row) -> str | None:
    """The newest passing validator run of ``story``'s current binding recorded after its
    last content change, or None."""
    validator = story.get("validator")
    if not validator:
        return None
    found = conn.execute(
        "SELECT run_id FROM ultragoal_validator_run WHERE session_id = ? AND story_id = ?"
        " AND binding_id = ? AND pass = 1 AND seq > ? ORDER BY seq DESC LIMIT 1",
        (session_id, story["id"], validator["binding_id"], story["changed_seq"]),
    ).fetchone()
    return None if found is None else str(found[0])


def adopted_into(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The session that adopted ``session_id``'s pursuit (its tombstone), or None."""
    found = conn.execute(
        "SELECT dst_session_id FROM ultragoal_adoption WHERE src_session_id = ?", (session_id,)
    ).fetchone()
    return None if found is None else str(found[0])


def current_story(all_stories: list[Row], by_story: dict[str, Row]) -> Row | None:
    """The first confirmed story in stored order without an ``APPROVE`` verdict."""
    for story in all_stories:
        if story["status"] != "confirmed":
            continue
        entry = by_story.get(story["id"])
        if entry is None or entry["verdict"] != "APPROVE":
            return story
    return None


def is_pristine(row: Row) -> bool:
    pristine: bool = row["phase"] == "planning" and row["iteration"] == 0 and row["outcome"] == ""
    return pristine


def state_digest(conn: sqlite3.Connection, session_id: str) -> str:
    """The digest of everything stored for the session (a refusal leaves it unchanged).

    Every transition records it in its event, so it is computed on hook paths too; the
    rows are plain SQL values in a fixed order, so CPython's C JSON encoder gives a stable
    text at a fraction of the canonical encoder's cost. The digest is only ever compared
    with another one computed here."""
    tables = {
        "pursuit": "SELECT * FROM ultragoal_pursuit WHERE session_id = ?",
        "stories": "SELECT * FROM ultragoal_story WHERE session_id = ? ORDER BY position",
        "verdicts": "SELECT * FROM ultragoal_story_verdict WHERE session_id = ? ORDER BY story_id",
        "runs": "SELECT * FROM ultragoal_validator_run WHERE session_id = ? ORDER BY seq, run_id",
        "evidence": "SELECT * FROM ultragoal_evidence WHERE session_id = ? ORDER BY path, sha256",
        "review": "SELECT * FROM ultragoal_review WHERE session_id = ?",
        "dispatches": "SELECT session_id, dispatch_no, nonce_sha256, claimed_at, picked_up_at,"
        " consumed_at, void FROM ultragoal_review_dispatch WHERE session_id = ?"
        " ORDER BY dispatch_no",
        "dismissals": "SELECT * FROM ultragoal_dismissal WHERE session_id = ?"
        " ORDER BY artifact_sha256, ref, class",
    }
    value = {
        name: [list(row) for row in conn.execute(sql, (session_id,)).fetchall()]
        for name, sql in tables.items()
    }
    text = lightjson.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return canon.digest_bytes(text.encode("utf-8"))


# --- writing ----------------------------------------------------------------------------


def pristine(session_id: str, now: str, max_iterations: int) -> Row:
    """A fresh, inert pursuit row: planning, nothing set, the review budget at 0/5."""
    return {
        "session_id": session_id,
        "outcome": "",
        "verification_surface": "",
        "constraints": "",
        "boundaries": "",
        "non_goals": "",
        "max_iterations": max_iterations,
        "blocked_stop": "",
        "phase": "planning",
        "iteration": 0,
        "started_at": now,
        "active": True,
        "objective_verdict": "absent",
        "plan_path": "",
        "resume_summary": "",
        "budget_limit_notified": False,
        "blocked_reason": "",
        "completion_evidence": [],
        "schema_version": 1,
        "last_touched_at": now,
        "progress_touched_at": None,
        "review_dispatch_used": 0,
        "review_dispatch_cap": REVIEW_CAP_INITIAL,
        "approved_review_artifact_sha256": "",
        "review_resolution": None,
        "codex_goal_objective": "",
        "last_seen_head": None,
        "review_base": None,
        "last_seen_stories_digest": None,
        "last_seen_evidence_count": None,
        "last_seen_validator_digest": None,
        "max_wall_minutes": None,
        "wall_used_s": 0.0,
        "turn_started_at": None,
        "budget_kind": None,
        "stop_blocks_consecutive": 0,
        "background_waits": 0,
        "host_capped": False,
        "pursued_once": False,
        "fresh_start_authorised": False,
        "completion": None,
        "version": 0,
    }


def save(conn: sqlite3.Connection, row: Row) -> None:
    """Insert or update the pursuit row in place (never REPLACE: that would cascade)."""
    names = PURSUIT_COLUMNS
    updates = ", ".join(f"{name} = excluded.{name}" for name in names[1:])
    conn.execute(
        f"INSERT INTO ultragoal_pursuit ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        f" ON CONFLICT (session_id) DO UPDATE SET {updates}",
        tuple(_encode(name, row[name]) for name in names),
    )


def delete(conn: sqlite3.Connection, session_id: str) -> None:
    """Delete the pursuit and, through the foreign keys, every row that hangs off it."""
    conn.execute("DELETE FROM ultragoal_pursuit WHERE session_id = ?", (session_id,))
    delete_gate(conn, session_id)


def delete_gate(conn: sqlite3.Connection, session_id: str) -> None:
    gates.clear_state(conn, PART, session_id)


def save_story(conn: sqlite3.Connection, session_id: str, story: Row) -> None:
    names = STORY_COLUMNS
    updates = ", ".join(f"{name} = excluded.{name}" for name in names[1:])
    conn.execute(
        f"INSERT INTO ultragoal_story (session_id, {', '.join(names)})"
        f" VALUES (?, {', '.join('?' * len(names))})"
        f" ON CONFLICT (session_id, id) DO UPDATE SET {updates}",
        (session_id, *(_encode(name, story.get(name)) for name in names)),
    )


def next_seq(conn: sqlite3.Connection) -> int:
    """The seq the next journal event will get (stable inside a write transaction)."""
    return (journal.latest_seq(conn) or 0) + 1


def commit(
    conn: sqlite3.Connection,
    row: Row,
    *,
    actor: str,
    kind: str,
    payload: dict[str, Any],
    now: str,
) -> int:
    """End a transition: save ``row`` (version + 1, touched now), append its event and sync
    the gate record. Children must already be written. Returns the event's seq."""
    row["version"] = int(row["version"]) + 1
    row["last_touched_at"] = now
    save(conn, row)
    event = {
        **payload,
        "phase": row["phase"],
        "version": row["version"],
        "state_sha256": state_digest(conn, row["session_id"]),
    }
    seq = journal.append(
        conn, actor=actor, kind=f"{PART}.{kind}", subject=row["session_id"], payload=event, at=now
    )
    sync_gate(conn, row, seq)
    return seq


def sync_gate(conn: sqlite3.Connection, row: Row, seq: int) -> None:
    """The kernel gate record for the session: its phase, whether it is active and
    pristine (hooks read it with ``json_extract``)."""
    state = {
        "session_id": row["session_id"],
        "phase": row["phase"],
        "active": bool(row["active"]),
        "pristine": is_pristine(row),
    }
    gates.save_state(conn, PART, row["session_id"], canon.canonical_text(state), seq)


# --- encoding ---------------------------------------------------------------------------


def _decode(names: tuple[str, ...], values: tuple[Any, ...]) -> Row:
    row: Row = {}
    for name, value in zip(names, values, strict=True):
        if name in FLAG_COLUMNS:
            row[name] = bool(value)
        elif name in JSON_COLUMNS and value is not None:
            row[name] = lightjson.loads(value)
        else:
            row[name] = value
    return row


def _encode(name: str, value: Any) -> Any:
    if name in FLAG_COLUMNS:
        return 1 if value else 0
    if name in JSON_COLUMNS and value is not None:
        return canon.canonical_text(value)
    return value
