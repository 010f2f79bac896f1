"""The ``record`` tool: parse a batch, run each entry as its own idempotent unit
(docs/delivery.md, "The record tool" and "Idempotency").

The whole request is checked before anything runs — its size, the envelope, and each
entry's ``data`` against its (kind, action) schema — so a malformed batch changes
nothing. Entries then run in order. Each is prepared on a read snapshot (the action reads
state, files and Git there and returns a ``Plan``) and committed as a recoverable unit
guarded by its idempotency key; a plan overtaken by another writer is prepared again.
The first error stops the batch: its ``details`` name the failing ``index`` and the
``committed`` indices, which a retry with the same keys replays.

``task_outcome`` entries are bound to execution sessions and Worker Packets, so they run
through ``sessions_outcome`` (``start`` acquires a session; the others are units like
the rest), under the same per-entry idempotency key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ithaca.delivery.contract import check_request_size, under, validation_error
from ithaca.delivery.idempotency import Guard, request_digest
from ithaca.delivery.records import artifacts, baseline, changes, decisions, observations, tasks
from ithaca.delivery.records.tool import RECORD_SCHEMA
from ithaca.delivery.schemas.dialect import check
from ithaca.delivery.schemas.record import DATA_SCHEMAS, actions_of
from ithaca.delivery.sessions import outcome as sessions_outcome
from ithaca.delivery.units.plans import Plan
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import ids
from ithaca.kernel.errors import IthacaError
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

TOOL = "record"

Handler = Callable[["sqlite3.Connection", Project, dict[str, Any]], Plan]

HANDLERS: dict[tuple[str, str], Handler] = {
    ("baseline", "initialize"): baseline.initialize,
    ("baseline", "start"): baseline.start,
    ("baseline", "observe"): baseline.observe,
    ("baseline", "revise"): baseline.revise,
    ("baseline", "accept"): baseline.accept,
    ("change_contract", "open"): changes.open_change,
    ("change_contract", "revise"): changes.revise_change,
    ("change_contract", "cancel"): changes.cancel_change,
    ("decision", "accept"): decisions.accept,
    ("decision", "defer"): decisions.defer,
    ("task_contract", "define"): tasks.define,
    ("task_contract", "revise"): tasks.revise,
    ("task_contract", "remove"): tasks.remove,
    ("artifact", "bind"): artifacts.bind,
    ("event", "append"): observations.append,
}


@dataclass(frozen=True)
class Entry:
    index: int
    kind: str
    action: str
    data: dict[str, Any]
    key: str
    # The caller's host session (the hook-filled ``session`` field), which owns the
    # session a ``task_outcome start`` acquires.
    host_session: str | None = None


def parse(arguments: Any) -> list[Entry]:
    """Every entry of a ``record`` request, checked and normalised."""
    if not isinstance(arguments, dict):
        raise validation_error("", "WRONG_TYPE", "expected an object with entries")
    check_request_size(arguments)
    request = check(RECORD_SCHEMA, arguments)
    if "session" in request and not ids.is_session_id(request["session"]):
        raise validation_error("/session", "WRONG_FORMAT", "must be a host session id")
    entries = []
    for index, raw in enumerate(request["entries"]):
        pointer = f"/entries/{index}"
        kind, action = raw["kind"], raw["action"]
        known = actions_of(kind)
        if action not in known:
            raise validation_error(
                f"{pointer}/action", "NOT_ALLOWED", f"{kind} takes {' | '.join(known)}"
            )
        schema = DATA_SCHEMAS.get((kind, action)) or sessions_outcome.DATA_SCHEMAS[(kind, action)]
        data = check(schema, raw["data"], f"{pointer}/data")
        entries.append(
            Entry(index, kind, action, data, raw["idempotency_key"], request.get("session"))
        )
    return entries


def run(store: Store, project: Project, units: Units, entries: list[Entry]) -> dict[str, Any]:
    """Run the entries in order: ``{results, journal_seq, diagnostics}``."""
    results: list[dict[str, Any]] = []
    for entry in entries:
        try:
            results.append(_run_entry(store, project, units, entry))
        except IthacaError as exc:
            raise _stopped_at(exc, entry, results) from exc
    seqs = [result["journal_seq"] for result in results if result["journal_seq"] is not None]
    return {
        "results": results,
        "journal_seq": max(seqs) if seqs else None,
        "diagnostics": [found for result in results for found in result["diagnostics"]],
    }


def _run_entry(store: Store, project: Project, units: Units, entry: Entry) -> dict[str, Any]:
    operation = f"{entry.kind}.{entry.action}"
    guard = Guard(entry.key, TOOL, request_digest(TOOL, operation, entry.data))
    if entry.kind == "task_outcome":
        answer, replayed = sessions_outcome.run(
            store, project, units, entry.action, entry.data, guard, entry.host_session
        )
    else:
        handler = HANDLERS[(entry.kind, entry.action)]
        answer, replayed = units.run_keyed(
            guard,
            lambda conn: handler(conn, project, entry.data),
            operation,
            {"operation": operation},
        )
    head = {"index": entry.index, "kind": entry.kind, "action": entry.action}
    if replayed:
        return {**head, "status": "replayed", "replayed": True, **answer}
    return {**head, "status": "committed", **answer}


def _stopped_at(exc: IthacaError, entry: Entry, results: list[dict[str, Any]]) -> IthacaError:
    """The entry's error, its pointer placed under the entry, with the batch position."""
    found = under(f"/entries/{entry.index}/data", exc)
    details = {
        **found.details,
        "index": entry.index,
        "committed": [result["index"] for result in results],
    }
    return type(found)(found.code, found.message, details)
