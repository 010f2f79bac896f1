"""The ``context`` tool: the Canonical Context Envelope (docs/delivery.md, "context").

One generator answers every "what am I working on?" — MCP reads, the CLI, checkpoints
and worker handoffs — so they cannot disagree. It reads in one short transaction and
writes nothing: no ledger import, no journal event, no blob (``checkpoint`` stores
snapshots through ``store_snapshot``). The envelope names files by ``{path, digest,
bytes}`` and never inlines a body.

Its digest is taken over the uncompacted envelope without ``generated_at``, ``cursors``,
``snapshot`` and ``execution`` (the asking process's session and its lease, which every
heartbeat moves: ``context_execution``), so the same authority gives the same digest in
every process and at every budget; ``id`` is ``ctx-`` and the first 24 hex digits of it.
The answer is then fitted to the detail's byte budget (``context_bounds``); lists cut on
the way come with cursors, which a later call with the same scope turns into the next
slice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ithaca.delivery.context import bounds as context_bounds
from ithaca.delivery.context import execution as context_execution
from ithaca.delivery.context import repository as context_git
from ithaca.delivery.context import scope as context_scope
from ithaca.delivery.context import sections as context_sections
from ithaca.delivery.contract import check_request_size, validation_error
from ithaca.delivery.schemas.dialect import check
from ithaca.delivery.schemas.ids import CHANGE_ID, TASK_ID
from ithaca.kernel import canon, clock, journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Corrupt
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

SCHEMA = "ithaca.context/1"
DETAILS = ("summary", "full")

CONTEXT_DESCRIPTION = (
    "Read the delivery context (no side effects) of a scope {change_id?, task_id?}: "
    "change, task, decisions, checkpoints, evidence. detail summary|full; pass a returned "
    "cursor for more."
)
CONTEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "stage": {"type": "string", "enum": list(context_sections.STAGES)},
        "scope": {
            "type": "object",
            "properties": {"change_id": CHANGE_ID, "task_id": TASK_ID},
            "additionalProperties": False,
        },
        "detail": {"type": "string", "enum": list(DETAILS), "default": "summary"},
        "cursor": {"type": "string", "maxLength": context_bounds.MAX_CURSOR_CHARS},
    },
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Request:
    stage: str | None
    scope: dict[str, Any]
    detail: str
    cursor: str | None


def parse(arguments: Any) -> Request:
    """A ``context`` request, checked against ``CONTEXT_SCHEMA``."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise validation_error("", "WRONG_TYPE", "expected an object")
    check_request_size(arguments)
    found = check(CONTEXT_SCHEMA, arguments)
    return Request(found.get("stage"), found.get("scope", {}), found["detail"], found.get("cursor"))


def envelope(
    project: Project,
    conn: sqlite3.Connection,
    *,
    stage: str | None = None,
    scope: dict[str, Any] | None = None,
    detail: str = "full",
) -> dict[str, Any]:
    """The uncompacted envelope (with ``id`` and ``digest``) read in the caller's snapshot."""
    resolved = context_scope.resolve(conn, scope or {})
    return _assemble(project, context_sections.gather(conn, resolved), stage, detail)


def snapshot_bytes(uncompacted: dict[str, Any]) -> bytes:
    """The canonical bytes an envelope's digest is taken over."""
    return canon.canonical(_digested(uncompacted))


def store_snapshot(project: Project, uncompacted: dict[str, Any]) -> str:
    """Store the uncompacted envelope as a kernel blob named by its digest (identical
    authority reuses the blob); returns that digest."""
    stored = BlobStore(project.blobs_dir).put(snapshot_bytes(uncompacted))
    if stored != uncompacted["digest"]:
        raise Corrupt(
            "CONTEXT_SNAPSHOT_MISMATCH",
            "the envelope's bytes do not hash to its digest",
            {"digest": uncompacted["digest"], "stored": stored},
        )
    return stored


def context(
    project: Project, store: Store, config: dict[str, Any], arguments: Any
) -> dict[str, Any]:
    """``context {stage?, scope?, detail?, cursor?}`` → the fitted envelope, or the slice a
    cursor names."""
    request = parse(arguments)
    cursor = None if request.cursor is None else context_bounds.decode_cursor(request.cursor)
    with store.read() as conn:
        acting = context_execution.acting(conn)
        resolved = context_scope.resolve(conn, request.scope, acting)
        found = context_sections.gather(conn, resolved)
        execution = context_execution.section(project, conn, acting, resolved)
        seq = journal.latest_seq(conn)
    whole = _assemble(project, found, request.stage, request.detail)
    if cursor is not None:
        return _slice(whole, *cursor, request.detail, seq)
    answer = {
        **whole,
        "execution": execution,
        "generated_at": clock.now(),
        "journal_seq": seq,
        "snapshot": {"stored": BlobStore(project.blobs_dir).exists(whole["digest"])},
    }
    fitted = context_bounds.compact(answer, request.detail)
    if fitted is None:
        budget = context_bounds.BUDGETS[request.detail].limit
        raise Corrupt(
            "CONTEXT_LIMIT_EXCEEDED",
            f"the {request.detail} envelope does not fit {budget} bytes even fully compacted",
            {"digest": whole["digest"], "bytes": context_bounds.size(answer)},
        )
    return fitted[0]


def _assemble(
    project: Project, found: context_sections.Authority, stage: str | None, detail: str
) -> dict[str, Any]:
    if detail not in DETAILS:
        raise ValueError(f"unknown detail {detail!r}")
    sections, notes = context_sections.build(project, found)
    body: dict[str, Any] = {
        "schema": SCHEMA,
        "detail": detail,
        "stage": stage,
        "scope": found.scope.view(),
        "git": context_git.head(project.work_root),
        **sections,
    }
    state = body["git"].pop("state")
    if detail == "full":
        paths = _scope_paths(found)
        body["git"].update(context_git.scope_state(project.work_root, paths, state))
    body["diagnostics"] = context_sections.grouped(notes)
    digest = canon.digest(body)
    return {**body, "id": f"ctx-{digest[:24]}", "digest": digest}


def _scope_paths(found: context_sections.Authority) -> list[str]:
    row = found.accepted_baseline or found.open_baseline
    return [] if row is None else list(row["scope"].get("paths", []))


def _digested(uncompacted: dict[str, Any]) -> dict[str, Any]:
    left_out = (
        "id",
        "digest",
        "generated_at",
        "cursors",
        "snapshot",
        "journal_seq",
        "execution",
    )
    return {name: value for name, value in uncompacted.items() if name not in left_out}


def _slice(
    whole: dict[str, Any], section: str, offset: int, digest: str, detail: str, seq: int | None
) -> dict[str, Any]:
    context_bounds.require_current(digest, whole["digest"])
    items = whole[section]
    head = {"id": whole["id"], "digest": whole["digest"], "section": section, "offset": offset}
    room = context_bounds.BUDGETS[detail].limit - context_bounds.size(head) - 1024
    taken, after = context_bounds.page(items, offset, detail, room)
    answer = {**head, "total": len(items), "items": taken, "journal_seq": seq}
    if after < len(items):
        answer["cursor"] = context_bounds.encode_cursor(section, after, whole["digest"])
    return answer
