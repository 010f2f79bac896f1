"""Pre-execution enforcement of a bundle, on PreToolUse (docs/protocols.md, "Constraints"
and "Strict mode").

In strict mode a mutating call waits until the current prompt's bundle is loaded; then
every typed constraint of the bundle votes deny, ask or approval, and the most severe
wins. ``decide`` only reads. ``commit`` runs in the dispatcher's write transaction and
records the decision (never the command text), refreshes the session's bundle cache,
reconciles changed protocol files, and stores or consumes approvals, knowing the final
answer of every gate.

Calls to Ithaca's own tools are allowed before any bundle is read, so the bundle,
constraint and approval modules are imported only by the functions that use them: an
agent's ``ithaca …`` line does not pay for them.

When the team's protocol files changed since the store last read them, ``decide``
computes the bundle from the files as they are now and ``commit`` reconciles them, so a
new file outside this event's workflow does not interrupt the agent. Seeds only change
with an Ithaca upgrade and are reconciled by CLI and MCP processes; until then a
mutating call is asked to call ``load_protocols`` again.
"""

from __future__ import annotations

import time

from ithaca.kernel import canon, journal, lightjson
from ithaca.kernel.call import Call
from ithaca.kernel.connection import sqlite
from ithaca.kernel.errors import IthacaError
from ithaca.kernel.gates import FAILED_CLOSED, GateContext, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

NAME = "protocols"
HOSTS_THAT_ASK = frozenset({"claude"})
_SEVERITY = {"allow": 0, "ask": 1, "deny": 2}


def constraint_vote(effect: str, *, approved: bool, host: str) -> tuple[str, str]:
    """What one fired constraint makes of a call: ``(logged result, vote)``.

    An ``ask`` or ``approval`` covered by a granted approval allows; an ``approval``, or an
    ``ask`` on a host that cannot ask its user, becomes a denial with an approval request.
    """
    if effect in ("ask", "approval") and approved:
        return "approved", "allow"
    if effect == "approval" or (effect == "ask" and host not in HOSTS_THAT_ASK):
        return "approval_required", "deny"
    return effect, effect


def approval_reason(approval_id: str, protocol_ids: list[str]) -> str:
    return (
        f"This action needs the user's approval (protocol {', '.join(protocol_ids)})."
        f' Ask the user to run "ithaca protocols approve {approval_id}" in a terminal,'
        " then retry the identical call."
    )


def load_reason(event_id: str) -> str:
    return (
        f'Ithaca: call load_protocols with {{"eventId": "{event_id}"}} first; mutating tools'
        " are blocked until this prompt's protocols are loaded."
    )


def decide(call: Call, ctx: GateContext) -> Opinion:
    started = time.perf_counter_ns()
    scratch: dict[str, Any] = {
        "tool": call.tool,
        "toolClass": call.tool_class,
        "mutating": call.mutating,
        "actionDigest": call.action_digest,
        "eventId": None,
        "revision": None,
        "matched": [],
        "fired": [],
        "approvalId": None,
        "approvalAction": None,
        "request": None,
        "cache": None,
    }
    ctx.scratch[NAME] = scratch
    try:
        opinion = _enforce(call, ctx, scratch)
    except (IthacaError, sqlite.Error, KeyError, ValueError, TypeError) as exc:
        code = getattr(exc, "code", type(exc).__name__)
        if call.mutating:
            opinion = Opinion(
                "deny",
                "ENFORCEMENT_ERROR",
                f"Ithaca could not evaluate this call ({code}); mutating calls are blocked.",
                gate=FAILED_CLOSED,
            )
        else:
            opinion = Opinion("allow", "ENFORCEMENT_ERROR")
    scratch["effect"] = opinion.effect
    scratch["code"] = opinion.code
    # The journal keeps reasons without command text (constraints may quote the command).
    scratch["reason"] = scratch.pop("logReason", opinion.reason)
    scratch["latencyUs"] = (time.perf_counter_ns() - started) // 1000
    return opinion


def _enforce(call: Call, ctx: GateContext, scratch: dict[str, Any]) -> Opinion:
    conn = ctx.conn
    if conn is None:
        raise IthacaError("STATE_UNREADABLE", "state.db is missing; run `ithaca init`")
    settings = ctx.config["protocols"]
    strict = settings["strict"]
    session = conn.execute(
        "SELECT current_event_id, bundle_revision, bundle_digest, bundle_ids_json, loaded_digest"
        " FROM protocol_sessions WHERE host_session_id = ?",
        (ctx.session_id,),
    ).fetchone()
    if call.tool_class == "ithaca":
        scratch["eventId"] = session[0] if session else None
        return Opinion("allow")
    if session is None or session[0] is None:
        if strict and call.mutating:
            return Opinion(
                "deny",
                "NO_CURRENT_EVENT",
                "Ithaca: no admitted prompt for this session, so no protocols apply yet; "
                "mutating tools are blocked until the user's next prompt is admitted.",
            )
        return Opinion("allow")
    from ithaca.protocols import reconcile

    event_id, cached_revision, cached_digest, cached_ids, loaded_digest = session
    scratch["eventId"] = event_id
    if strict and call.mutating and not reconcile.seeds_in_sync(conn):
        # Seeds are reconciled by CLI and MCP processes (load_protocols), never by hooks.
        return _load_required(event_id, loaded_digest)
    try:
        protocols, digest = _bundle(
            conn, ctx, event_id, cached_revision, cached_digest, cached_ids, scratch
        )
    except IthacaError as exc:
        if call.mutating:
            return Opinion(
                "deny",
                "BUNDLE_UNAVAILABLE",
                f"Ithaca: the protocols for event {event_id} cannot be computed ({exc.code}: "
                f"{exc.message}); mutating calls are blocked.",
            )
        return Opinion("allow")
    scratch["matched"] = [p["id"] for p in protocols]
    strict_opinion = None
    if strict and call.mutating and loaded_digest != digest:
        strict_opinion = _load_required(event_id, loaded_digest)
    return _apply_constraints(call, ctx, scratch, protocols, strict_opinion)


def _load_required(event_id: str, loaded_digest: str | None) -> Opinion:
    if loaded_digest is None:
        return Opinion("deny", "BUNDLE_NOT_LOADED", load_reason(event_id))
    return Opinion(
        "deny",
        "BUNDLE_STALE",
        load_reason(event_id).replace("first;", "again: the protocols changed;"),
    )


def _bundle(
    conn: sqlite3.Connection,
    ctx: GateContext,
    event_id: str,
    cached_revision: int | None,
    cached_digest: str | None,
    cached_ids: str | None,
    scratch: dict[str, Any],
) -> tuple[list[dict[str, Any]], str]:
    from ithaca.protocols import reconcile, seeds

    assert ctx.project is not None
    workflows = seeds.known_workflows(ctx.config)
    current, _, files_state = reconcile.stored_state(conn)
    if files_state.get("listing") != reconcile.files_listing(ctx.project.protocols_dir):
        scratch["reconcileFiles"] = True
        from ithaca.protocols import bundle, events

        computed = bundle.compute_after_files(
            conn,
            events.fetch(conn, event_id),
            workflows,
            ctx.project.protocols_dir,
            ctx.project.root,
        )
        return computed["protocols"], computed["digest"]
    error = reconcile.stored_error(files_state)
    if error is not None:
        raise error
    scratch["revision"] = current
    if cached_revision == current and cached_digest and cached_ids:
        cached = lightjson.loads(cached_ids)
        if isinstance(cached, list):  # written by an earlier release: ids, nothing verified
            cached = {"ids": cached, "verified": None}
        return _cached_protocols(conn, cached, ctx, scratch), cached_digest
    from ithaca.protocols import bundle, events  # the cache missed: match the event again

    event = events.fetch(conn, event_id)
    computed = bundle.compute(conn, event, workflows)
    scratch["cache"] = (current, computed["digest"], [p["id"] for p in computed["protocols"]])
    return computed["protocols"], computed["digest"]


def _cached_protocols(
    conn: sqlite3.Connection, cached: dict[str, Any], ctx: GateContext, scratch: dict[str, Any]
) -> list[dict[str, Any]]:
    """The cached bundle's rows, each verified (well formed, hash matching) unless these
    exact rows, under the same known workflows, were verified by an earlier call: the
    fingerprint of what was verified is kept with the cache, so an edited row, even one
    whose stored hash was forged to match, is verified again."""
    from ithaca.protocols import records
    from ithaca.protocols.seeds import known_workflows

    protocol_ids: list[str] = cached["ids"]
    seeds = records.seed_records(conn)
    workflows = known_workflows(ctx.config)
    stored = records.read_many(conn, protocol_ids)
    missing = next((pid for pid in protocol_ids if pid not in stored), None)
    if missing is not None:
        raise records.corrupt(missing, "MISSING_ROW")
    rows = [stored[protocol_id] for protocol_id in protocol_ids]
    seen = _fingerprint(rows, workflows)
    if seen != cached.get("verified"):
        from ithaca.kernel import states

        for record in rows:
            records.verify(record, workflows=workflows, states=states.KNOWN_STATES)
        scratch["verified"] = {"ids": protocol_ids, "verified": seen}
    return [records.bundle_shape(record, seeds) for record in rows]


def _fingerprint(rows: list[dict[str, Any]], workflows: frozenset[str]) -> str:
    """SHA-256 of the rows as read and the workflows they were checked against (the C JSON
    encoder with sorted keys: a stable text, compared only with another made here)."""
    text = lightjson.dumps([sorted(workflows), rows], sort_keys=True, ensure_ascii=False)
    return canon.digest_bytes(text.encode("utf-8"))


def _apply_constraints(
    call: Call,
    ctx: GateContext,
    scratch: dict[str, Any],
    protocols: list[dict[str, Any]],
    strict_opinion: Opinion | None,
) -> Opinion:
    from ithaca.protocols import constraints

    conn = ctx.conn
    assert conn is not None

    def state(name: str) -> bool:
        from ithaca.kernel import states  # only a rule that names a state asks

        return states.evaluate(name, conn, ctx.session_id)

    items = [
        (protocol["id"], index, constraint)
        for protocol in protocols
        for index, constraint in enumerate(protocol["constraints"])
    ]
    fired = constraints.evaluate(
        items,
        call,
        state=state,
        approved=False,
    )
    approval_id = None
    if any(f.effect in ("ask", "approval") for f in fired):
        from ithaca.protocols import approvals

        approval_id = approvals.granted(conn, ctx.session_id or "", call.action_digest, ctx.now)
    effect = "allow"
    reasons = [strict_opinion.reason] if strict_opinion and strict_opinion.reason else []
    log_reasons = list(reasons)
    declared = {(pid, index): constraint.get("reason") for pid, index, constraint in items}
    code = strict_opinion.code if strict_opinion else None
    if strict_opinion:
        effect = "deny"
    needs_request: list[str] = []
    logged = []
    for item in fired:
        result, vote = constraint_vote(item.effect, approved=bool(approval_id), host=ctx.host)
        if result == "approval_required":
            needs_request.append(item.protocol_id)
        logged.append(
            {
                "protocolId": item.protocol_id,
                "index": item.index,
                "kind": item.kind,
                "result": result,
            }
        )
        if vote != "allow":
            reasons.append(f"[{item.protocol_id}] {item.reason}")
            told = declared[(item.protocol_id, item.index)] or f"{item.kind} ({item.reason_code})"
            log_reasons.append(f"[{item.protocol_id}] {told}")
        if _SEVERITY[vote] > _SEVERITY[effect]:
            effect = vote
            code = "APPROVAL_REQUIRED" if result == "approval_required" else item.reason_code
    scratch["fired"] = logged
    if needs_request:
        from ithaca.protocols import approvals

        request_id = approvals.request_id(conn, ctx.session_id or "", call.action_digest, ctx.now)
        protocol_ids = sorted(set(needs_request))
        scratch["request"] = (request_id, protocol_ids)
        scratch["approvalId"] = request_id
        scratch["approvalAction"] = "requested"
        reasons.append(approval_reason(request_id, protocol_ids))
        log_reasons.append(approval_reason(request_id, protocol_ids))
    elif approval_id and effect == "allow":
        scratch["approvalId"] = approval_id
        scratch["approvalAction"] = "consumed"
    scratch["logReason"] = "\n".join(log_reasons) or None
    if effect == "allow":
        return Opinion("allow")
    return Opinion(effect, code, "\n".join(reasons))


def commit(
    conn: sqlite3.Connection, scratch: dict[str, Any], final: Opinion, ctx: GateContext
) -> Opinion | None:
    """Record the decision, refresh the bundle cache, store or consume approvals; returns
    a deny when the approval this call relied on was consumed by a concurrent call."""
    assert ctx.project is not None
    settings = ctx.config["protocols"]
    if scratch["cache"] is not None:
        revision, digest, protocol_ids = scratch["cache"]
        conn.execute(
            "UPDATE protocol_sessions SET bundle_revision = ?, bundle_digest = ?,"
            " bundle_ids_json = ? WHERE host_session_id = ? AND current_event_id = ?",
            (
                revision,
                digest,
                lightjson.dumps({"ids": protocol_ids, "verified": None}),
                ctx.session_id,
                scratch["eventId"],
            ),
        )
    elif scratch.get("verified") is not None:
        conn.execute(
            "UPDATE protocol_sessions SET bundle_ids_json = ?"
            " WHERE host_session_id = ? AND current_event_id = ?",
            (lightjson.dumps(scratch["verified"]), ctx.session_id, scratch["eventId"]),
        )
    if scratch.get("reconcileFiles"):
        from ithaca.protocols import reconcile, seeds

        reconcile.reconcile_files(
            conn,
            ctx.project.protocols_dir,
            ctx.project.root,
            seeds.known_workflows(ctx.config),
        )
    approval_action = scratch["approvalAction"]
    if scratch["request"] is not None or approval_action == "consumed":
        from ithaca.protocols import approvals
    if scratch["request"] is not None:
        request_id, protocol_ids = scratch["request"]
        call_input = ctx.payload.get("tool_input")
        approvals.request(
            conn,
            approval_id=request_id,
            session_id=ctx.session_id or "",
            event_id=scratch["eventId"],
            action_digest=scratch["actionDigest"],
            action={
                "tool": ctx.payload.get("tool_name"),
                "input": call_input,
                "cwd": ctx.payload.get("cwd"),
            },
            protocol_ids=protocol_ids,
            now=ctx.now,
            ttl_seconds=settings["approval_ttl_seconds"],
        )
    elif approval_action == "consumed":
        if final.effect not in ("allow", "abstain"):
            approval_action = None
        elif not approvals.consume(conn, scratch["approvalId"], ctx.now):
            # Another identical call used the approval first: this one is denied, and logged so.
            approval_action = "lost"
            lost = Opinion(
                "deny",
                "APPROVAL_USED",
                f"Ithaca: approval {scratch['approvalId']} was just used by another identical"
                " call; it allows one call. Ask the user to approve this action again.",
            )
            scratch.update(effect="deny", code=lost.code, reason=lost.reason)
            final = lost
    journal.append(
        conn,
        actor="hook",
        kind="protocols.decision",
        subject=scratch["eventId"] or ctx.session_id,
        payload={
            "eventId": scratch["eventId"],
            "hostSessionId": ctx.session_id,
            "tool": scratch["tool"],
            "toolClass": scratch["toolClass"],
            "mutating": scratch["mutating"],
            "actionDigest": scratch["actionDigest"],
            "revision": scratch["revision"],
            "matchedProtocolIds": scratch["matched"],
            "constraints": scratch["fired"],
            "effect": scratch["effect"],
            "reasonCode": scratch["code"],
            "reason": scratch["reason"],
            "approvalId": scratch["approvalId"],
            "approvalAction": approval_action,
            "latencyUs": scratch["latencyUs"],
            "final": {"effect": final.effect, "code": final.code, "gate": final.gate},
        },
    )
    return final if approval_action == "lost" else None
