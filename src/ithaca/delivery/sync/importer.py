"""``sync import``: take the ledger file into the database, record by record
(docs/delivery.md, "The team ledger: `sync`").

The file is verified first (every record digest, the state digest, the project), then
merged per record against this checkout's base: records only the file changed are taken,
records only the database changed stay (they are unpublished work), records both changed
conflict, and so does any change to a task a session runs here. One conflict left
unresolved and nothing is applied (``LEDGER_CONFLICT``). Otherwise one transaction
applies every taken record, makes the file the new base and journals
``delivery.ledger.imported``; a file already equal to the base writes nothing.

A file this checkout's own publish wrote and has not committed yet is left alone
(``incoming.in_flight``): it is nobody's state until that commit, and a publish that fails
puts the old file back. Every import also holds the file as one of its unit's ``reads``,
so what it takes is committed state, never bytes a publish may still take back.

``auto_import`` is the same import run quietly before a mutating call: a conflict or an
untrustworthy file does not fail that call, it becomes a ``needs_attention`` diagnostic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.ledger import apply as ledger_apply
from ithaca.delivery.ledger import base as ledger_base
from ithaca.delivery.ledger import bulk as ledger_bulk
from ithaca.delivery.ledger import intake as ledger_intake
from ithaca.delivery.ledger.base import Base
from ithaca.delivery.ledger.format import LEDGER_PATH, Ledger, document_digest
from ithaca.delivery.sync.incoming import (
    FileState,
    Incoming,
    InFlight,
    gather,
    in_flight_note,
    journal_head,
    kept_notes,
    nothing_new,
    read_file,
    read_of,
    relation_notes,
    require_settled,
    require_unchanged,
)
from ithaca.delivery.units import registry
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite, unchanged
from ithaca.delivery.units.recoverable import MAX_ATTEMPTS, Units
from ithaca.kernel import journal
from ithaca.kernel.errors import Conflict, Corrupt
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

OP = "sync.import"


def plan(conn: sqlite3.Connection, project: Project, resolve: dict[str, str]) -> Plan:
    """The import as a recoverable unit (its only file write: settling driver conflicts)."""
    base = ledger_base.load(conn)
    found = read_file(project.state_root)
    incoming = None if nothing_new(base, found) else gather(conn, base, found, resolve)
    if incoming is not None and incoming.flight is not None:
        return _left_alone(incoming.flight, base, found)
    if incoming is None or incoming.file is None:
        state = None if base is None else base.state_digest
        result = {"status": "missing" if found.data is None else "current", "state_digest": state}
        return unchanged(OP, result, [], keyed=False)  # equal to its base: no write
    require_settled(incoming.merge)
    return taking(project, incoming, incoming.file, OP, _unused(incoming, resolve))


def _left_alone(flight: InFlight, base: Base | None, found: FileState) -> Plan:
    """The plan for a file a unit of this checkout wrote and has not committed: nothing
    is imported. A live writer's unit settles itself; a dead one's is settled by this
    plan's unit, which holds the file as a read (its T1 rolls the dead unit back, the
    file changes and the import is prepared again from the committed file)."""
    state = None if base is None else base.state_digest
    note = in_flight_note(flight)
    if flight.alive:
        return unchanged(OP, {"status": "publishing", "state_digest": state}, [note], keyed=False)
    result = {"status": "uncommitted", "state_digest": state}
    return Plan(OP, lambda tx: Outcome(result, None), (), [note], reads=(read_of(found),))


def taking(
    project: Project, incoming: Incoming, theirs: Ledger, op: str, notes: list[Diagnostic]
) -> Plan:
    """A plan that applies what the file (``theirs``) brings and makes it the base."""
    prepared = ledger_intake.prepare(project.state_root, incoming.merge.taken)
    data = incoming.data
    digest = document_digest(data)
    writes: tuple[TrackedWrite, ...] = ()
    if incoming.rewritten is not None:
        writes = (TrackedWrite(LEDGER_PATH, data, "ledger", "project", None),)
    diagnostics = (
        relation_notes(incoming.relation) + kept_notes(incoming.kept) + prepared.diagnostics + notes
    )
    result = _summary(incoming, "imported")

    def commit(tx: sqlite3.Connection) -> Outcome:
        if journal_head(tx) != incoming.head:
            raise Stale("ledger")
        ledger_apply.apply_taken(tx, prepared)
        ledger_base.save(tx, theirs, digest)
        if not writes:
            registry.register(tx, LEDGER_PATH, digest, "ledger", "project", None)
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.ledger.imported",
            subject=theirs.state_digest,
            payload=imported_payload(incoming, theirs),
        )
        return Outcome(result, seq)

    def before() -> None:
        require_unchanged(project.state_root, incoming.found)
        ledger_base.keep_document(project, data, digest)

    return Plan(op, commit, writes, diagnostics, before=before, reads=(read_of(incoming.found),))


def imported_payload(incoming: Incoming, theirs: Ledger) -> dict[str, Any]:
    taken = incoming.merge.taken
    return {
        "state_digest": theirs.state_digest,
        "generation": theirs.generation,
        "relation": incoming.relation,
        "applied": len(taken),
        "removed": sum(1 for found in taken.values() if found is None),
        "resolved": incoming.merge.resolved,
    }


def auto_import(project: Project, store: Store, units: Units) -> list[Diagnostic]:
    """Import before a mutating call when the file moved since the last sync; problems
    become ``needs_attention`` diagnostics and the call goes on un-imported."""
    with store.read() as conn:
        base = ledger_base.load(conn)
    if ledger_base.unchanged_since_sync(base, project.state_root):
        return []
    found = read_file(project.state_root)
    if found.data is None:
        return []
    if base is not None and found.digest == base.document_digest:
        ledger_base.remember_stat(store, project.state_root)
        return []
    try:
        answer = run_unkeyed(store, units, lambda conn: plan(conn, project, {}))
    except (Conflict, Corrupt) as exc:
        return [diagnostic(exc.code, "needs_attention", exc.message)]
    if answer is None:
        return []  # other writers kept moving; the next call tries again
    if answer["result"]["status"] == "publishing":
        return []  # this checkout's own publish is writing the file: nothing to say yet
    ledger_base.remember_stat(store, project.state_root)
    return list(answer["diagnostics"])


def run_unkeyed(
    store: Store, units: Units, prepare: Callable[[sqlite3.Connection], Plan]
) -> dict[str, Any] | None:
    """Run a sync another call triggered (it has no key of its own), preparing again
    while other writers overtake it; None when they kept doing so."""
    with ledger_bulk.paused():
        for _ in range(MAX_ATTEMPTS):
            try:
                with store.read() as conn:
                    prepared = prepare(conn)
                return units.run(prepared, None)
            except Stale:
                continue
    return None


def _summary(incoming: Incoming, status: str) -> dict[str, Any]:
    taken = incoming.merge.taken
    head = incoming.file
    return {
        "status": status,
        "relation": incoming.relation,
        "settled": list(incoming.settled),
        "state_digest": None if head is None else head.state_digest,
        "generation": None if head is None else head.generation,
        "applied": len(taken),
        "resolved": incoming.merge.resolved,
    }


def _unused(incoming: Incoming, resolve: dict[str, str]) -> list[Diagnostic]:
    used = set(incoming.merge.resolved) | set(incoming.settled)
    return [
        diagnostic(
            "LEDGER_RESOLVE_UNUSED", "info", f"{label} did not conflict; nothing chosen", label
        )
        for label in sorted(set(resolve) - used)
    ]
