"""The ``session`` tool: admission, acquire, heartbeat and close of execution sessions
(docs/delivery.md, "Execution: session and Worker Packets").

A session is the unit of execution: one task, one lease renewed by heartbeats, one Git
worktree, one immutable Worker Packet. This module is the tool's surface — its MCP
description and schema, the parsing of a request, and ``session``, the one entry the
MCP server, the CLI and Python share; the work is done in ``sessions.admission``,
``sessions.acquire``, ``sessions.close`` and ``leases``.

``acquire`` and ``close`` change state and need an ``idempotency_key``; ``heartbeat``
is exempt (it only moves a lease forward, so repeating it is harmless) and ``admission``
only reads. Who is asking matters for admission: the caller's host session comes from
the ``session`` field (the kernel guard fills it for Ithaca's own MCP calls), else from
``ITHACA_SESSION_ID`` in the environment (the CLI inside a host session).
"""

from __future__ import annotations

import os
from typing import Any

from ithaca.delivery.contract import check_request_size, validation_error
from ithaca.delivery.idempotency import Guard, request_digest
from ithaca.delivery.schemas.dialect import Schema, check
from ithaca.delivery.schemas.ids import IDEMPOTENCY_KEY, TASK_ID
from ithaca.delivery.sessions import leases, worktrees
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.sessions.acquire import STRATEGIES, AcquireRequest, acquire_session
from ithaca.delivery.sessions.admission import Caller, admit
from ithaca.delivery.sessions.close import REASONS, CloseRequest, close_session
from ithaca.kernel import ids
from ithaca.kernel.errors import Conflict
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TOOL = "session"
OPERATIONS = ("admission", "acquire", "heartbeat", "close")
WORKTREE_MODES = ("create", "none")
SESSION_ID: Schema = {"type": "string", "pattern": r"^ses_[0-9A-HJKMNP-TV-Z]{26}$"}
RUNTIME: Schema = {"type": "string", "pattern": r"^[A-Za-z0-9._-]{1,64}$"}
# Which fields each operation needs and which it takes.
_NEEDS: dict[str, tuple[str, ...]] = {
    "admission": ("task_id",),
    "acquire": ("task_id", "strategy", "idempotency_key"),
    "heartbeat": ("session_id",),
    "close": ("session_id", "idempotency_key"),
}
_TAKES: dict[str, tuple[str, ...]] = {
    "admission": ("session_id", "worktree"),
    "acquire": ("session_id", "runtime", "worktree"),
    "heartbeat": (),
    "close": ("reason", "remove_worktree"),
}

SESSION_DESCRIPTION = (
    "Execution sessions: admission {task_id} (a verdict; reads only), acquire {task_id, "
    "strategy} (lease, worktree, Worker Packet), heartbeat {session_id}, close "
    "{session_id, reason?}."
)
SESSION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": list(OPERATIONS)},
        "task_id": TASK_ID,
        "session_id": SESSION_ID,
        "strategy": {"type": "string", "enum": list(STRATEGIES)},
        "runtime": RUNTIME,
        "worktree": {"type": "string", "enum": list(WORKTREE_MODES)},
        "reason": {"type": "string", "enum": list(REASONS)},
        "remove_worktree": {"type": "boolean"},
        "idempotency_key": IDEMPOTENCY_KEY,
        "session": {"type": "string"},
    },
    "required": ["operation"],
    "additionalProperties": False,
}


def session(
    project: Project,
    store: Store,
    config: dict[str, Any],
    request: dict[str, Any],
    *,
    force: bool = False,
) -> dict[str, Any]:
    """Run one ``session`` request; the answer always carries ``diagnostics`` and
    ``journal_seq``. ``force`` (a takeover of a live lease) is the user's, from the CLI
    after its confirmation; no tool request can set it."""
    found = parse(request)
    operation = found["operation"]
    if operation == "admission":
        return admission(project, store, found)
    if operation == "heartbeat":
        return heartbeat(store, found["session_id"])
    digested = {**_digested(found), "force": True} if force else _digested(found)
    guard = Guard(found["idempotency_key"], TOOL, request_digest(TOOL, operation, digested))
    if operation == "acquire":
        answer, replayed = acquire_session(
            project,
            store,
            AcquireRequest(
                task_id=found["task_id"],
                strategy=found["strategy"],
                caller=caller(found.get("session"), found.get("session_id")),
                runtime=found.get("runtime", "agent"),
                worktree=found.get("worktree", "create"),
                ttl_s=leases.ttl_s(config),
                force=force,
                actor="user" if force else "agent",
            ),
            guard,
        )
    else:
        answer, replayed = close_session(
            project,
            store,
            CloseRequest(
                session_id=found["session_id"],
                reason=found.get("reason", "abandoned"),
                remove_worktree=found.get("remove_worktree", False),
            ),
            guard,
        )
    return {**answer, "replayed": True} if replayed else answer


def parse(request: Any) -> dict[str, Any]:
    """The request checked against the schema and the operation's own fields."""
    if not isinstance(request, dict):
        raise validation_error("", "WRONG_TYPE", "expected an object with operation")
    check_request_size(request)
    found: dict[str, Any] = check(SESSION_SCHEMA, request)
    operation = found["operation"]
    for name in _NEEDS[operation]:
        if name not in found:
            raise validation_error(f"/{name}", "MISSING_FIELD", f"{operation} needs {name}")
    allowed = {"operation", "session", *_NEEDS[operation], *_TAKES[operation]}
    for name in sorted(found):
        if name not in allowed:
            raise validation_error(f"/{name}", "NOT_ALLOWED", f"{operation} takes no {name}")
    if "session" in found and not ids.is_session_id(found["session"]):
        raise validation_error("/session", "WRONG_FORMAT", "must be a host session id")
    return found


def caller(host_session: str | None, named_session: str | None) -> Caller:
    """Who asks: the given host session, else the one this process runs in."""
    if host_session is None:
        from_environment = os.environ.get("ITHACA_SESSION_ID")
        host_session = from_environment if ids.is_session_id(from_environment) else None
    return Caller(host_session, named_session)


def admission(project: Project, store: Store, found: dict[str, Any]) -> dict[str, Any]:
    """The verdict for the caller on the task, with blockers and warnings (reads only)."""
    wants_worktree = found.get("worktree", "create") == "create"
    ready = not wants_worktree or worktrees.git_ready()
    with store.read() as conn:
        verdict = admit(
            conn,
            project,
            found["task_id"],
            caller(found.get("session"), found.get("session_id")),
            leases.now_ms(),
            git_ready=ready,
        )
    answer = verdict.view()
    return {**answer, "diagnostics": answer["warnings"], "journal_seq": None}


def heartbeat(store: Store, session_id: str) -> dict[str, Any]:
    """Renew the session's lease: ``LEASE_LOST`` once it stopped running,
    ``LEASE_EXPIRED`` once its lease ran out. No key and no journal event."""
    with store.write() as tx:
        row = sessions_rows.load(tx, session_id)
        if row["status"] != "running":
            raise sessions_rows.lease_lost(row)
        at_ms = leases.now_ms()
        if leases.expired(row["lease_expires_at"], at_ms) or (
            leases.renew(tx, session_id, at_ms) is None
        ):
            raise Conflict(
                "LEASE_EXPIRED",
                f"session {session_id}'s lease ran out at {row['lease_expires_at']}; ask"
                " `session admission` whether to resume it",
                {"session_id": session_id, "lease_expires_at": row["lease_expires_at"]},
            )
        renewed = sessions_rows.load(tx, session_id)
    return {"session": sessions_rows.view(renewed), "diagnostics": [], "journal_seq": None}


def _digested(found: dict[str, Any]) -> dict[str, Any]:
    """The request as its idempotency digest sees it: without the key and the caller."""
    return {
        name: value
        for name, value in found.items()
        if name not in ("idempotency_key", "session", "operation")
    }
