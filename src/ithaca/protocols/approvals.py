"""Approvals for exact actions.

When a ``require_approval`` constraint fires, the hook records a pending request keyed
on (host session, action digest) and tells the agent which command the user must run.
The user grants it in a terminal; the grant is valid for that digest only, until its
expiry, once. A changed command, working folder or diff has another digest and needs a
new approval, and an approval never turns a deny into an allow.
"""

from __future__ import annotations

from ithaca.kernel import clock, ids, journal, lightjson
from ithaca.kernel.errors import NotFound, Refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

COLUMNS = (
    "id, host_session_id, event_id, action_digest, action_blob, protocol_ids_json, status,"
    " requested_at, granted_at, expires_at, consumed_at"
)


def request_id(conn: sqlite3.Connection, session_id: str, action_digest: str, now: str) -> str:
    """The id the user will be asked to approve: the pending request's, else the next one.

    The next id is derived from the session, the action and how many requests it had
    before, so concurrent identical calls name the same request (and ``request`` stores
    it once) instead of each showing an id that was never kept.
    """
    existing = pending(conn, session_id, action_digest, now)
    if existing:
        return existing
    (earlier,) = conn.execute(
        "SELECT count(*) FROM protocol_approvals WHERE host_session_id = ? AND action_digest = ?",
        (session_id, action_digest),
    ).fetchone()
    return ids.derived("apr", f"{session_id}\n{action_digest}\n{earlier}")


def later(stamp: str, seconds: int) -> str:
    from datetime import timedelta  # only when a request is stored or granted

    moment = clock.parse(stamp) + timedelta(seconds=seconds)
    return clock.format_ms(int(moment.timestamp() * 1000))


def granted(conn: sqlite3.Connection, session_id: str, action_digest: str, now: str) -> str | None:
    """The id of a granted, unexpired approval for exactly this action, if any.

    A one-time approval is used up by a row of this database, so an older copy put back
    would show it unused. None counts while the journal's seals do not hold (an older
    copy put back with its anchor falls short of the head kept in the user's home), nor
    one granted before the user last accepted the journal as it stood (a restore, a
    lifted lockdown: ``journal.REBASED``)."""
    from ithaca.kernel import anchor

    if not anchor.holds(conn):
        return None
    row = conn.execute(
        "SELECT id FROM protocol_approvals AS a WHERE host_session_id = ? AND action_digest = ?"
        " AND status = 'granted' AND expires_at > ? AND (SELECT max(seq) FROM journal"
        " WHERE kind = 'protocols.approval_granted' AND subject = a.id) > ?"
        " ORDER BY granted_at LIMIT 1",
        (session_id, action_digest, now, journal.last_rebase(conn)),
    ).fetchone()
    return row[0] if row else None


def pending(conn: sqlite3.Connection, session_id: str, action_digest: str, now: str) -> str | None:
    row = conn.execute(
        "SELECT id FROM protocol_approvals WHERE host_session_id = ? AND action_digest = ?"
        " AND status = 'pending' AND expires_at > ? LIMIT 1",
        (session_id, action_digest, now),
    ).fetchone()
    return row[0] if row else None


def request(
    conn: sqlite3.Connection,
    *,
    approval_id: str,
    session_id: str,
    event_id: str | None,
    action_digest: str,
    action: dict[str, Any],
    protocol_ids: list[str],
    now: str,
    ttl_seconds: int,
) -> None:
    """Record the pending request ``approval_id`` (from ``request_id``) unless it exists."""
    conn.execute(
        f"INSERT OR IGNORE INTO protocol_approvals ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?,"
        " 'pending', ?, NULL, ?, NULL)",
        (
            approval_id,
            session_id,
            event_id,
            action_digest,
            lightjson.dumps(action, ensure_ascii=False),
            lightjson.dumps(protocol_ids),
            now,
            later(now, ttl_seconds),
        ),
    )


def consume(conn: sqlite3.Connection, approval_id: str, now: str) -> bool:
    """Mark a granted approval used; false when another call consumed it first."""
    cursor = conn.execute(
        "UPDATE protocol_approvals SET status = 'consumed', consumed_at = ?"
        " WHERE id = ? AND status = 'granted'",
        (now, approval_id),
    )
    return cursor.rowcount == 1


def get(conn: sqlite3.Connection, approval_id: str) -> dict[str, Any]:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM protocol_approvals WHERE id = ?", (approval_id,)
    ).fetchone()
    if row is None:
        raise NotFound(
            "APPROVAL_NOT_FOUND", f"no approval {approval_id}", {"approvalId": approval_id}
        )
    return to_dict(row)


def to_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    (
        aid,
        session,
        event,
        digest,
        blob,
        protocol_ids,
        status,
        requested,
        granted_at,
        expires,
        consumed,
    ) = row
    return {
        "id": aid,
        "hostSessionId": session,
        "eventId": event,
        "actionDigest": digest,
        "action": lightjson.loads(blob) if blob else None,
        "protocolIds": lightjson.loads(protocol_ids),
        "status": status,
        "requestedAt": requested,
        "grantedAt": granted_at,
        "expiresAt": expires,
        "consumedAt": consumed,
    }


def listing(conn: sqlite3.Connection, *, include_all: bool, now: str) -> list[dict[str, Any]]:
    sql = f"SELECT {COLUMNS} FROM protocol_approvals"
    params: tuple[Any, ...] = ()
    if not include_all:
        sql += " WHERE status IN ('pending', 'granted') AND expires_at > ?"
        params = (now,)
    return [to_dict(row) for row in conn.execute(sql + " ORDER BY requested_at", params)]


def check_grantable(conn: sqlite3.Connection, approval_id: str, now: str) -> dict[str, Any]:
    """The approval, if it is a pending request that has not expired; else the refusal."""
    approval = get(conn, approval_id)
    if approval["status"] in ("consumed", "granted"):
        raise Refused(
            "APPROVAL_USED",
            f"approval {approval_id} was already {approval['status']}",
            {"approvalId": approval_id, "status": approval["status"]},
        )
    if approval["expiresAt"] <= now:
        raise Refused(
            "APPROVAL_EXPIRED",
            f"approval request {approval_id} expired at {approval['expiresAt']}; retry the call",
            {"approvalId": approval_id},
        )
    return approval


def grant(
    conn: sqlite3.Connection, approval_id: str, *, ttl_seconds: int, now: str
) -> dict[str, Any]:
    """Grant a pending request; the caller holds the write transaction."""
    approval = check_grantable(conn, approval_id, now)
    expires = later(now, ttl_seconds)
    conn.execute(
        "UPDATE protocol_approvals SET status = 'granted', granted_at = ?, expires_at = ?"
        " WHERE id = ?",
        (now, expires, approval_id),
    )
    journal.append(
        conn,
        actor="user",
        kind="protocols.approval_granted",
        subject=approval_id,
        payload={
            "approvalId": approval_id,
            "actionDigest": approval["actionDigest"],
            "expiresAt": expires,
        },
    )
    return dict(approval, status="granted", grantedAt=now, expiresAt=expires)
