"""``sync publish``: write the database's team-visible state to the ledger file
(docs/delivery.md, "The team ledger: `sync`").

Publish first imports what the file brings (a conflict stops it: ``LEDGER_CONFLICT``),
then projects the database and numbers each record against the ledger it follows: an
unchanged body keeps its revision, a changed one becomes the next revision of it, a new
one starts at 1. When the state digest did not move nothing is written; otherwise the
next generation, whose parent and first ancestor are the previous state, is written
atomically as one recoverable unit with the new base, the tasks' published statuses and
``delivery.ledger.published``. Every record is written, whatever their number. A file
that went missing (a branch that predates the ledger) is written again.

The file is written before the unit's transaction commits, so until then it holds a
generation that is nobody's state yet; another process's publish or import leaves it
alone (``incoming.in_flight``), and a publish that plans from the base meanwhile waits
for that unit to settle (the file is one of its ``reads`` and its target).
"""

from __future__ import annotations

import os
from typing import Any

from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.ledger import apply as ledger_apply
from ithaca.delivery.ledger import base as ledger_base
from ithaca.delivery.ledger import intake as ledger_intake
from ithaca.delivery.ledger.format import (
    LEDGER_PATH,
    Key,
    Record,
    Stamp,
    document,
    document_digest,
    render,
    revised,
)
from ithaca.delivery.sync.importer import imported_payload, run_unkeyed, taking
from ithaca.delivery.sync.incoming import (
    gather,
    journal_head,
    kept_notes,
    read_file,
    read_of,
    relation_notes,
    require_settled,
    require_unchanged,
)
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite, unchanged
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import journal
from ithaca.kernel.errors import IthacaError
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

OP = "sync.publish"


def new_project_id() -> str:
    """``prj-`` and 12 random hex digits."""
    return "prj-" + os.urandom(6).hex()


def plan(conn: sqlite3.Connection, project: Project) -> Plan:
    incoming = gather(conn, ledger_base.load(conn), read_file(project.state_root))
    require_settled(incoming.merge)
    previous = incoming.previous()
    project_id = new_project_id() if previous is None else previous.project_id
    stamps = {} if previous is None else previous.stamps
    merged = incoming.merge.merged(incoming.ours.records)
    numbered, changed = _numbered(merged, stamps)
    ledger = document(
        project_id,
        numbered,
        generation=0 if previous is None else previous.generation + 1,
        parent_digest=None if previous is None else previous.state_digest,
        ancestors=() if previous is None else (previous.state_digest, *previous.ancestors),
    )
    records = ledger.records
    present = incoming.found.data is not None
    if previous is not None and ledger.state_digest == previous.state_digest and present:
        if incoming.file is not None:
            return taking(project, incoming, incoming.file, OP, [])
        summary = _summary("unchanged", ledger.state_digest, previous.generation, records, 0)
        return unchanged(OP, summary, [])
    data = render(ledger)
    digest = document_digest(data)
    removed = sum(1 for key in stamps if key not in merged)
    prepared = ledger_intake.prepare(project.state_root, incoming.merge.taken)
    diagnostics: list[Diagnostic] = (
        relation_notes(incoming.relation) + kept_notes(incoming.kept) + prepared.diagnostics
    )
    result = _summary("published", ledger.state_digest, ledger.generation, records, changed)

    def commit(tx: sqlite3.Connection) -> Outcome:
        if journal_head(tx) != incoming.head:
            raise Stale("ledger")
        if incoming.file is not None:
            ledger_apply.apply_taken(tx, prepared)
            journal.append(
                tx,
                actor="agent",
                kind="delivery.ledger.imported",
                subject=incoming.file.state_digest,
                payload=imported_payload(incoming, incoming.file),
            )
        tx.execute(
            "UPDATE delivery_tasks SET published_status = CASE status WHEN 'in_progress'"
            " THEN ifnull(published_status, 'pending') ELSE status END"
            " WHERE status != 'removed'"
            " AND published_status IS NOT (CASE status WHEN 'in_progress'"
            " THEN ifnull(published_status, 'pending') ELSE status END)"
        )
        ledger_base.save(tx, ledger, digest)
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.ledger.published",
            subject=ledger.state_digest,
            payload={
                "state_digest": ledger.state_digest,
                "parent_digest": ledger.parent_digest,
                "generation": ledger.generation,
                "records": len(records),
                "changed": changed,
                "removed": removed,
            },
        )
        return Outcome(result, seq)

    def before() -> None:
        require_unchanged(project.state_root, incoming.found)
        ledger_base.keep_document(project, data, digest)

    write = TrackedWrite(LEDGER_PATH, data, "ledger", "project", None)
    read = read_of(incoming.found)
    return Plan(OP, commit, (write,), diagnostics, before=before, reads=(read,))


def auto_publish(project: Project, store: Store, units: Units) -> list[Diagnostic]:
    """Publish after another tool changed team-visible state (an accepted checkpoint, an
    archive, a change opened or cancelled, a baseline accepted, a task completed or
    blocked). Its failure never fails that tool: it becomes ``needs_attention``
    ``LEDGER_PUBLISH_DEFERRED``, and the next publish catches up."""
    try:
        answer = run_unkeyed(store, units, lambda conn: plan(conn, project))
    except IthacaError as exc:
        return [_deferred(f"{exc.code}: {exc.message}")]
    if answer is None:
        return [_deferred("other writers kept changing the state")]
    ledger_base.remember_stat(store, project.state_root)
    return list(answer["diagnostics"])


def _numbered(
    merged: dict[Key, Record], stamps: dict[Key, Stamp]
) -> tuple[tuple[Record, ...], int]:
    """Each record numbered against the one it follows (``revised``), and how many
    changed: new ones and those whose digest moved."""
    numbered = []
    changed = 0
    for key, found in merged.items():
        previous = stamps.get(key)
        if previous is None or previous.digest != found.digest:
            changed += 1
        numbered.append(revised(found, previous))
    return tuple(numbered), changed


def _deferred(why: str) -> Diagnostic:
    return diagnostic(
        "LEDGER_PUBLISH_DEFERRED",
        "needs_attention",
        f"the team ledger was not published ({why}); run `ithaca sync publish`",
    )


def _summary(
    status: str, state: str, generation: int, records: tuple[Any, ...], changed: int
) -> dict[str, Any]:
    return {
        "status": status,
        "state_digest": state,
        "generation": generation,
        "records": len(records),
        "changed": changed,
    }
