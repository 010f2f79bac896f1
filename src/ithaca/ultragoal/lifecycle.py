"""The transitions hooks perform in-process: seed, review-dispatch claim, LIMIT and GC.

Hooks run inside the dispatcher's commit phase, on a connection that already holds the
``BEGIN IMMEDIATE`` transaction (DESIGN, Kernel contracts 2), so every function here takes
that connection, writes its rows and appends its event, and never opens a transaction
of its own. Marker files are the caller's to sync after the commit (``marker.sync`` and
``reconcile_markers``). Like every hook-path module, this one imports only the standard
library and the kernel.
"""

from __future__ import annotations

import os

from ithaca.kernel import canon, ids, journal
from ithaca.ultragoal import marker, records
from ithaca.ultragoal.ttl import COMPLETE_TTL_S, LIVE_TTL_S, elapsed_s

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

# Claim outcomes: reason -> the code the hook denies with (None: allowed).
CLAIM_CODES = {
    "failure": "REVIEW_DISPATCH_NOT_PURSUING",
    "stories_pending": "REVIEW_STORIES_PENDING",
    "completion_eligible": "REVIEW_COMPLETION_ELIGIBLE",
    "budget_exhausted": "REVIEW_DISPATCH_CAP_REACHED",
    "no_diff": "REVIEW_DIFF_UNAVAILABLE",
    "allowed": None,
}
RENEWAL_COMMAND = "ithaca ultragoal approve-review-dispatch-renewal"


def seed(
    conn: sqlite3.Connection,
    session_id: str,
    *,
    now: str,
    max_iterations: int,
    user_typed: bool,
    actor: str = "hook",
) -> dict[str, Any]:
    """Seed a pristine pursuit when the skill is invoked (docs/ultragoal.md, "In Claude Code").

    Returns ``{outcome, phase?, objective?}`` where ``outcome`` is ``seeded`` (a new
    pristine row, over none or a complete one), ``pristine_exists``,
    ``active_pursuit_exists`` (the hook adds ``ULTRAGOAL ACTIVE_PURSUIT_EXISTS`` context),
    ``fresh_start_authorised`` (a user-typed invocation over a paused pursuit), ``paused``
    (the agent's own invocation over one: nothing changes) or ``adopted_away``."""
    if records.adopted_into(conn, session_id) is not None:
        return {"outcome": "adopted_away"}
    row = records.load(conn, session_id)
    if row is None or row["phase"] == "complete":
        if row is not None:
            records.delete(conn, session_id)
        fresh = records.pristine(session_id, now, max_iterations)
        records.commit(conn, fresh, actor=actor, kind="seeded", payload={}, now=now)
        return {"outcome": "seeded", "phase": "planning"}
    if row["phase"] in records.PAUSED_PHASES:
        if not user_typed:
            return {"outcome": "paused", "phase": row["phase"], "objective": row["outcome"]}
        if not row["fresh_start_authorised"]:
            row["fresh_start_authorised"] = True
            records.commit(
                conn, row, actor=actor, kind="fresh_start_authorised", payload={}, now=now
            )
        return {"outcome": "fresh_start_authorised", "phase": row["phase"]}
    if records.is_pristine(row):
        return {"outcome": "pristine_exists", "phase": row["phase"]}
    return {"outcome": "active_pursuit_exists", "phase": row["phase"], "objective": row["outcome"]}


def claim_review_dispatch(
    conn: sqlite3.Connection, session_id: str, *, now: str, nonce_in_prompt: bool
) -> dict[str, Any]:
    """Reserve one final code-review dispatch (docs/ultragoal.md, "Operations", review lane).

    Returns ``{allowed, reason, used, cap, code, nonce?, dispatch_no?}``; only an allowed
    claim writes (``used + 1``, a dispatch row keeping the nonce's SHA-256, one event).
    The nonce names the dispatch and authorises nothing (a submission needs the pass the
    hook mints when it sees the reviewer submit, ``mint_review_pass``). With
    ``nonce_in_prompt`` the hook starts the reviewer itself, so the dispatch counts as
    picked up and the nonce is kept nowhere; otherwise it waits for ``review-ticket``."""
    row = records.load(conn, session_id)
    if row is None or row["phase"] != "pursuing" or not row["active"]:
        used, cap = (
            (0, 0) if row is None else (row["review_dispatch_used"], row["review_dispatch_cap"])
        )
        return _claim("failure", used, cap)
    used, cap = row["review_dispatch_used"], row["review_dispatch_cap"]
    stories = records.stories(conn, session_id)
    verdicts = records.verdicts(conn, session_id)
    pending = [
        story["id"]
        for story in stories
        if story["status"] != "retired"
        and (
            story["status"] != "confirmed"
            or verdicts.get(story["id"], {}).get("verdict") != "APPROVE"
        )
    ]
    if pending:
        return {**_claim("stories_pending", used, cap), "ids": pending}
    if row.get("review_base") is None:  # no change to check a review against: it would fail
        return _claim("no_diff", used, cap)
    review = records.review(conn, session_id)
    if review is not None:  # without one nothing can be eligible: no reducer to load
        from ithaca.ultragoal import reducer

        result = reducer.reduce(row, stories, review, records.dismissals(conn, session_id))
        if result.get("reason") is None and result["verdict"] in ("APPROVE", "COMMENT"):
            return _claim("completion_eligible", used, cap)
    if used >= cap:
        return {**_claim("budget_exhausted", used, cap), "renewal_command": RENEWAL_COMMAND}
    nonce = os.urandom(16).hex()
    dispatch_no = 1 + int(
        conn.execute(
            "SELECT coalesce(max(dispatch_no), 0) FROM ultragoal_review_dispatch"
            " WHERE session_id = ?",
            (session_id,),
        ).fetchone()[0]
    )
    nonce_sha256 = canon.digest_bytes(nonce.encode("ascii"))
    conn.execute(
        "INSERT INTO ultragoal_review_dispatch (session_id, dispatch_no, nonce_sha256, nonce,"
        " claimed_at, picked_up_at) VALUES (?, ?, ?, ?, ?, ?)",
        (
            session_id,
            dispatch_no,
            nonce_sha256,
            None if nonce_in_prompt else nonce,
            now,
            now if nonce_in_prompt else None,
        ),
    )
    row["review_dispatch_used"] = used + 1
    records.commit(
        conn,
        row,
        actor="hook",
        kind="review_dispatch_claimed",
        payload={"dispatch_no": dispatch_no, "nonce_sha256": nonce_sha256, "cap": cap},
        now=now,
    )
    return {**_claim("allowed", used + 1, cap), "nonce": nonce, "dispatch_no": dispatch_no}


def mint_review_pass(
    conn: sqlite3.Connection,
    session_id: str,
    *,
    artifact_sha256: str,
    host: str,
    agent_id: str,
    agent_type: str,
    now: str,
) -> dict[str, Any] | None:
    """Record that the PreToolUse hook saw the reviewer subagent submit the artifact whose
    SHA-256 is ``artifact_sha256`` (docs/ultragoal.md, "Operations", review lane): a pass
    bound to the session, the oldest open dispatch and that exact artifact, which
    ``submit-review`` spends. Returns ``{pass_no, dispatch_no}``, or None when no claimed
    dispatch is open (the submission is then refused by the service)."""
    row = records.load(conn, session_id)
    if row is None:
        return None
    found = conn.execute(
        "SELECT dispatch_no FROM ultragoal_review_dispatch WHERE session_id = ?"
        " AND consumed_at IS NULL AND void = 0 ORDER BY dispatch_no LIMIT 1",
        (session_id,),
    ).fetchone()
    if found is None:
        return None
    pass_no = 1 + int(
        conn.execute(
            "SELECT coalesce(max(pass_no), 0) FROM ultragoal_review_pass WHERE session_id = ?",
            (session_id,),
        ).fetchone()[0]
    )
    conn.execute(
        "INSERT INTO ultragoal_review_pass (session_id, pass_no, dispatch_no, artifact_sha256,"
        " host, agent_id, agent_type, minted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, pass_no, found[0], artifact_sha256, host, agent_id, agent_type, now),
    )
    records.commit(
        conn,
        row,
        actor="hook",
        kind="review_pass_minted",
        payload={
            "pass_no": pass_no,
            "dispatch_no": found[0],
            "artifact_sha256": artifact_sha256,
            "agent_id": agent_id,
            "agent_type": agent_type,
        },
        now=now,
    )
    return {"pass_no": pass_no, "dispatch_no": found[0]}


def limit_budget(
    conn: sqlite3.Connection, row: dict[str, Any], *, kind: str, actor: str, now: str
) -> int:
    """Pause a pursuing row as ``budget_limited`` (the Stop gate's LIMIT); returns the
    event's seq. The caller removes the marker after the commit."""
    pause_for_budget(row, kind)
    return records.commit(
        conn, row, actor=actor, kind="budget_limited", payload={"budget_kind": kind}, now=now
    )


def pause_for_budget(row: dict[str, Any], kind: str) -> None:
    """The row fields of a budget pause (``iterations``, ``wall_clock`` or ``user``)."""
    row.update(phase="budget_limited", active=False, budget_limit_notified=True, budget_kind=kind)


def stop_view(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    """What the Stop gate and re-injection read about a session: the row, whether it is
    pristine, its current story and its stories, or None without a row."""
    row = records.load(conn, session_id)
    if row is None:
        return None
    stories = records.stories(conn, session_id)
    current = records.current_story(stories, records.verdicts(conn, session_id))
    return {
        "row": row,
        "pristine": records.is_pristine(row),
        "current_story": current,
        "stories": stories,
    }


def reap(conn: sqlite3.Connection, now: str) -> list[str]:
    """Delete pursuits idle past their TTL (6 h; 30 min once complete), one
    ``ultragoal.reaped`` event each; returns the reaped session ids."""
    rows = conn.execute(
        "SELECT session_id, phase, last_touched_at, started_at FROM ultragoal_pursuit"
    ).fetchall()
    reaped = []
    for session_id, phase, touched, started in rows:
        idle = elapsed_s(touched or started, now)
        limit = COMPLETE_TTL_S if phase == "complete" else LIVE_TTL_S
        if idle <= limit:
            continue
        records.delete(conn, session_id)
        journal.append(
            conn,
            actor="system",
            kind="ultragoal.reaped",
            subject=session_id,
            payload={"phase": phase, "idle_seconds": int(idle)},
            at=now,
        )
        reaped.append(str(session_id))
    return reaped


def reconcile_markers(conn: sqlite3.Connection, runtime: str) -> None:
    """Make the marker files match the pursuing rows (after a commit, or at GC)."""
    pursuing = {
        str(found[0])
        for found in conn.execute(
            "SELECT session_id FROM ultragoal_pursuit WHERE phase = 'pursuing'"
        ).fetchall()
    }
    for session_id in set(marker.listed(runtime)) - pursuing:
        if ids.is_session_id(session_id):  # not a temporary file mid-write
            marker.sync(runtime, session_id, False)
    for session_id in pursuing:
        if not marker.exists(runtime, session_id):
            marker.sync(runtime, session_id, True)


def _claim(reason: str, used: int, cap: int) -> dict[str, Any]:
    return {
        "allowed": reason == "allowed",
        "reason": reason,
        "used": used,
        "cap": cap,
        "code": CLAIM_CODES[reason],
    }
