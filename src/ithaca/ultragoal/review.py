"""The review lane's operations: tickets, submissions, resolutions, dismissals, renewal.

A review counts only when it comes from a dispatch the hook claimed against the budget,
and only when the PreToolUse hook saw the reviewer subagent itself submit it: the host
names the subagent in the hook payload, and the hook then mints a one-use pass bound to
the open dispatch and the exact artifact (``lifecycle.mint_review_pass``).
``submit-review`` spends one pass per attempt, and without one it refuses
(``REVIEW_NOT_SEEN_FROM_REVIEWER``): a submission from the agent under review, from a
client it started itself or from a script, carries none. The dispatch's nonce names a
dispatch and authorises nothing. The artifact is validated strictly and reduced by code
(``reducer``). MEDIUM repairs are closed with hash-bound evidence
(``record-comment-resolution``); a wrong admitted finding can be dismissed only by the
user and only unambiguously, pinned to the artifact so it lapses with the next review;
more dispatches than the budget need the user's renewal.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput, IthacaError, Refused, invalid_field
from ithaca.ultragoal import evidence, records, reducer, review_diff
from ithaca.ultragoal.contract import scope_digest
from ithaca.ultragoal.operation import Context, Row, require_phase, require_user
from ithaca.ultragoal.planning import add_evidence

PURSUING = frozenset({"pursuing"})
RENEWAL = 5


def result(ctx: Context) -> dict[str, Any]:
    """``get-review-result``: the reducer's reading of the current artifact."""
    with ctx.store.read() as conn:
        row = records.load(conn, ctx.session_id)
        if row is None:
            return reducer.reduce(None, [], None, [])
        return reducer.reduce(
            row,
            records.stories(conn, ctx.session_id),
            records.review(conn, ctx.session_id),
            records.dismissals(conn, ctx.session_id),
        )


def review_ticket(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PURSUING, "PHASE_NOT_PURSUING")
        found = tx.execute(
            "SELECT dispatch_no, nonce FROM ultragoal_review_dispatch WHERE session_id = ?"
            " AND picked_up_at IS NULL AND consumed_at IS NULL AND void = 0"
            " AND nonce IS NOT NULL ORDER BY dispatch_no LIMIT 1",
            (ctx.session_id,),
        ).fetchone()
        if found is None:
            raise Refused("REVIEW_TICKET_NONE", "no claimed review dispatch is waiting")
        dispatch_no, nonce = found
        tx.execute(
            "UPDATE ultragoal_review_dispatch SET picked_up_at = ?, nonce = NULL"
            " WHERE session_id = ? AND dispatch_no = ?",
            (ctx.now, ctx.session_id, dispatch_no),
        )
        ctx.commit(tx, row, "review_ticket_issued", {"dispatch_no": dispatch_no})
        return {"session_id": ctx.session_id, "dispatch_no": dispatch_no, "nonce": nonce}

    return ctx.write(apply)


def submit_review(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    nonce = command.get("nonce")
    artifact = command["artifact"]
    artifact_sha = canon.digest(artifact)
    seen = _pass(ctx.read(), ctx.session_id, artifact_sha)
    if seen is None:
        raise _not_seen(ctx.read(), ctx.session_id)
    try:
        return _submit(ctx, seen, nonce, artifact, artifact_sha)
    except IthacaError:
        _spend(ctx, seen[0])  # one attempt per pass: the hook mints a new one per call
        raise


def _submit(
    ctx: Context, seen: tuple[int, int], nonce: str | None, artifact: Any, artifact_sha: str
) -> dict[str, Any]:
    coverage = _coverage(ctx, artifact)

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PURSUING, "PHASE_NOT_PURSUING")
        if _pass(tx, ctx.session_id, artifact_sha) != seen:
            raise _not_seen(tx, ctx.session_id)
        pass_no, dispatch_no = seen
        if nonce is not None:  # a label: it picks the open dispatch, it authorises nothing
            named = tx.execute(
                "SELECT dispatch_no FROM ultragoal_review_dispatch WHERE session_id = ?"
                " AND nonce_sha256 = ? AND consumed_at IS NULL AND void = 0",
                (ctx.session_id, canon.digest_bytes(nonce.encode("utf-8"))),
            ).fetchone()
            if named is None:
                raise Refused(
                    "REVIEW_NONCE_INVALID",
                    "the nonce names no claimed, unconsumed review dispatch of this session"
                    " (leave it out: the review is bound to the dispatch the hook saw)",
                )
            dispatch_no = int(named[0])
        problem = reducer.artifact_problem(artifact)
        if problem is not None:
            raise InvalidInput(
                "REVIEW_ARTIFACT_INVALID",
                f"the review artifact is invalid at {problem[0] or '/'}: {problem[1]}"
                " (the dispatch stays open: submit the corrected artifact)",
                {"path": problem[0], "problem": problem[1]},
            )
        sha = reducer.artifact_sha256(artifact)
        previous = records.review(tx, ctx.session_id)
        superseded = None
        if previous is not None:
            superseded = ctx.blobs.put(canon.canonical(previous["artifact"]))
        tx.execute(
            "INSERT INTO ultragoal_review (session_id, artifact, artifact_sha256, dispatch_no)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
            " artifact = excluded.artifact, artifact_sha256 = excluded.artifact_sha256,"
            " dispatch_no = excluded.dispatch_no",
            (ctx.session_id, canon.canonical_text(artifact), sha, dispatch_no),
        )
        tx.execute(
            "UPDATE ultragoal_review_dispatch SET consumed_at = ?,"
            " picked_up_at = coalesce(picked_up_at, ?), nonce = NULL"
            " WHERE session_id = ? AND dispatch_no = ?",
            (ctx.now, ctx.now, ctx.session_id, dispatch_no),
        )
        tx.execute(
            "UPDATE ultragoal_review_pass SET spent_at = ? WHERE session_id = ? AND pass_no = ?",
            (ctx.now, ctx.session_id, pass_no),
        )
        inputs = {
            "dispatch_no": dispatch_no,
            "pass_no": pass_no,
            "artifact_sha256": sha,
            "superseded_blob": superseded,
            "coverage": coverage,
        }
        ctx.inputs = {k: v for k, v in ctx.inputs.items() if k not in ("nonce", "artifact")}
        ctx.commit(tx, row, "review_submitted", inputs)
        return reducer.reduce(
            row,
            records.stories(tx, ctx.session_id),
            records.review(tx, ctx.session_id),
            records.dismissals(tx, ctx.session_id),
        )

    return ctx.write(apply)


def _pass(conn: sqlite3.Connection, session_id: str, artifact_sha: str) -> tuple[int, int] | None:
    """``(pass_no, dispatch_no)`` of the newest unspent pass the hook minted for exactly
    this artifact on an open dispatch of the session, or None."""
    found = conn.execute(
        "SELECT p.pass_no, p.dispatch_no FROM ultragoal_review_pass p"
        " JOIN ultragoal_review_dispatch d"
        " ON d.session_id = p.session_id AND d.dispatch_no = p.dispatch_no"
        " WHERE p.session_id = ? AND p.artifact_sha256 = ? AND p.spent_at IS NULL"
        " AND d.consumed_at IS NULL AND d.void = 0 ORDER BY p.pass_no DESC LIMIT 1",
        (session_id, artifact_sha),
    ).fetchone()
    return None if found is None else (int(found[0]), int(found[1]))


def _not_seen(conn: sqlite3.Connection, session_id: str) -> Refused:
    """The refusal of a submission no hook saw coming from the reviewer subagent."""
    open_dispatch = conn.execute(
        "SELECT 1 FROM ultragoal_review_dispatch WHERE session_id = ? AND consumed_at IS NULL"
        " AND void = 0",
        (session_id,),
    ).fetchone()
    return Refused(
        "REVIEW_NOT_SEEN_FROM_REVIEWER",
        "a review counts only when Ithaca's hook saw the reviewer subagent it started submit"
        " it (submit_review with this exact artifact, called by the reviewer itself); this"
        " submission came from somewhere else"
        + ("" if open_dispatch else ", and no claimed review dispatch is open")
        + ". Start the reviewer subagent and let it submit its own review.",
        {"dispatch_open": open_dispatch is not None},
    )


def _spend(ctx: Context, pass_no: int) -> None:
    with ctx.store.write() as tx:
        tx.execute(
            "UPDATE ultragoal_review_pass SET spent_at = ? WHERE session_id = ? AND pass_no = ?"
            " AND spent_at IS NULL",
            (ctx.now, ctx.session_id, pass_no),
        )


def _coverage(ctx: Context, artifact: Any) -> dict[str, Any] | None:
    """A COMPLETE review's files checked against the change (``review_diff``), before the
    transaction: what it covers, or None for an artifact the submission refuses anyway."""
    if reducer.artifact_problem(artifact) is not None or artifact["status"] != "COMPLETE":
        return None
    row = records.load(ctx.read(), ctx.session_id)
    if row is None:
        return None
    return review_diff.check_citations(ctx.project.root, row["review_base"], artifact)


def record_comment_resolution(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    sha = command["artifact_sha256"]
    if not reducer.is_sha256(sha):
        raise invalid_field("/artifact_sha256", "NOT_SHA256", "must be 64 lowercase hex digits")
    if not command["evidence"]:
        raise invalid_field("/evidence", "EMPTY", "a resolution needs at least one evidence path")
    conn = ctx.read()
    row = records.load(conn, ctx.session_id)
    if row is not None:
        _check_resolution(conn, row, sha)
    pairs = evidence.record(command["evidence"], ctx.roots, "/evidence")

    def apply(tx: sqlite3.Connection, current: Row) -> dict[str, Any]:
        _check_resolution(tx, current, sha)
        resolution = {
            "artifact_sha256": sha,
            "evidence": [pair["path"] for pair in pairs],
            "evidence_sha256": {pair["path"]: pair["sha256"] for pair in pairs},
            "at": ctx.now,
        }
        current["review_resolution"] = resolution
        add_evidence(tx, ctx.session_id, pairs)
        ctx.commit(tx, current, "comment_resolution_recorded", {"resolution": resolution})
        return {"session_id": ctx.session_id, "review_resolution": resolution}

    return ctx.write(apply)


def _check_resolution(conn: sqlite3.Connection, row: Row, sha: str) -> None:
    require_phase(row, PURSUING, "PHASE_NOT_PURSUING")
    review = records.review(conn, row["session_id"])
    if review is None or review["artifact_sha256"] != sha:
        raise Refused(
            "REVIEW_SHA_MISMATCH",
            "the hash is not the current review artifact's (get-review-result shows it)",
            {"current": None if review is None else review["artifact_sha256"]},
        )
    reduced = reducer.reduce(
        row,
        records.stories(conn, row["session_id"]),
        review,
        records.dismissals(conn, row["session_id"]),
    )
    if reduced["verdict"] != "COMMENT" or reduced.get("reason"):
        raise Refused(
            "REVIEW_NOT_COMMENT",
            f"the review reduces to {reduced['verdict']}; a resolution closes a COMMENT",
            {"verdict": reduced["verdict"], "reason": reduced.get("reason")},
        )


def dismiss_review_finding(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    ref, finding_class, rationale = command["ref"], command["class"], command["rationale"]
    if not ref.strip() or not rationale.strip():
        raise Refused("DISMISS_INPUT_BLANK", "a dismissal needs a ref and a rationale")
    if finding_class not in reducer.CLASSES:
        raise invalid_field(
            "/class", "NOT_ALLOWED", f"class must be one of {', '.join(reducer.CLASSES)}"
        )
    require_user(ctx, "dismiss a review finding")

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PURSUING, "PHASE_NOT_PURSUING")
        all_stories = records.stories(tx, ctx.session_id)
        review = records.review(tx, ctx.session_id)
        if review is None or reducer.artifact_problem(review["artifact"]) is not None:
            raise Refused("REVIEW_MISSING", "there is no valid review artifact")
        artifact = review["artifact"]
        if artifact["scope_contract_sha256"] != scope_digest(row, all_stories):
            raise Refused("REVIEW_SCOPE_STALE", "the review was made against an older scope")
        confirmed = {s["id"] for s in all_stories if s["status"] == "confirmed"}
        if not all(reducer.reference_valid(f, row, confirmed) for f in artifact["findings"]):
            raise Refused("REVIEW_SCOPE_EVIDENCE_INVALID", "the artifact cites scope it lacks")
        matches = [
            f
            for f in artifact["findings"]
            if f["scope"] == "IN_SCOPE"
            and f.get("ref") == ref
            and f["class"] == finding_class
            and reducer.classify(f)[0] != "NOTE"
        ]
        if not matches:
            raise Refused(
                "DISMISS_NO_MATCH", f"no blocking in-scope {finding_class} finding at {ref}"
            )
        if len(matches) > 1:
            raise Refused(
                "DISMISS_AMBIGUOUS",
                f"{len(matches)} findings share {ref} and {finding_class}; dismissing one would"
                " clear its twin",
                {"count": len(matches)},
            )
        if matches[0]["verdict"] != "CONFIRMED":
            raise Refused(
                "DISMISS_NOT_CONFIRMED", "only a CONFIRMED finding can be dismissed; adjudicate"
            )
        key = (ctx.session_id, review["artifact_sha256"], ref, finding_class)
        exists = tx.execute(
            "SELECT 1 FROM ultragoal_dismissal WHERE session_id = ? AND artifact_sha256 = ?"
            " AND ref = ? AND class = ?",
            key,
        ).fetchone()
        if exists is None:
            tx.execute(
                "INSERT INTO ultragoal_dismissal (session_id, artifact_sha256, ref, class,"
                " rationale, at) VALUES (?, ?, ?, ?, ?, ?)",
                (*key, rationale, ctx.now),
            )
            ctx.commit(
                tx, row, "review_finding_dismissed", {"artifact_sha256": review["artifact_sha256"]}
            )
        return {
            "session_id": ctx.session_id,
            "dismissed": {"artifact_sha256": key[1], "ref": ref, "class": finding_class},
            "repeated": exists is not None,
        }

    return ctx.write(apply)


def approve_review_dispatch_renewal(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    require_user(ctx, "renew the review-dispatch budget")

    def apply(tx: sqlite3.Connection, row: Row) -> dict[str, Any]:
        require_phase(row, PURSUING, "PHASE_NOT_PURSUING")
        row["review_dispatch_cap"] += RENEWAL
        review = records.review(tx, ctx.session_id)
        if review is not None and reducer.artifact_problem(review["artifact"]) is None:
            row["approved_review_artifact_sha256"] = review["artifact_sha256"]
        ctx.commit(tx, row, "review_dispatch_renewed", {"cap": row["review_dispatch_cap"]})
        used, cap = row["review_dispatch_used"], row["review_dispatch_cap"]
        return {
            "allowed": used < cap,
            "reason": "allowed" if used < cap else "budget_exhausted",
            "used": used,
            "cap": cap,
        }

    return ctx.write(apply)
