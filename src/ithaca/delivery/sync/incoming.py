"""What the ledger file brings, measured against this checkout's base and its database.

Import and publish start the same way: read and verify the file (theirs), load the base,
project the database (ours) and merge per record. Only then do they differ: import takes
theirs into the database, publish also writes the merged state back. A ``conflicts``
block the merge driver left in the file is settled here first, from ``resolve`` (the
file rewritten without it), so the rest of the merge sees an ordinary ledger.

A generation this checkout is still publishing is no one's state yet: ``sync publish``
writes the file before its transaction commits, and puts the old file back if it fails
or its writer dies (docs/delivery.md, "Recoverable units"). Such a file is recognised by
the pending unit that writes it (``in_flight``) and never merged: imported, then put
back, it would look like a branch switched back and undo what it published. The plans
also name the file as one of their ``reads``, so a publish that starts writing after
the snapshot was read is waited for, and the plan prepared again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.ledger import projection as ledger_projection
from ithaca.delivery.ledger.base import Base
from ithaca.delivery.ledger.format import (
    LEDGER_PATH,
    Key,
    Ledger,
    Record,
    Stamp,
    document,
    document_digest,
    parse,
    render,
)
from ithaca.delivery.ledger.merge import ACTIVE_TASK, Merge, three_way
from ithaca.delivery.ledger.projection import Ours
from ithaca.delivery.units import registry
from ithaca.delivery.units.pending import pending_units
from ithaca.delivery.units.plans import Read, Stale
from ithaca.kernel import journal
from ithaca.kernel.errors import Conflict, Corrupt

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

# How many clashes an error or an answer lists in full (the count is always given).
LISTED = 50


@dataclass(frozen=True)
class FileState:
    """The ledger file as read: its bytes (None when absent) and their digest."""

    data: bytes | None
    digest: str | None


class Previous(NamedTuple):
    project_id: str
    generation: int
    state_digest: str
    ancestors: tuple[str, ...]
    stamps: dict[Key, Stamp]


@dataclass
class Incoming:
    """The sides of one sync: ``file`` is None when there is nothing new to merge (no
    file, or the very bytes of the last sync); ``head`` is the journal's last seq, which
    a commit compares to know nothing moved since."""

    base: Base | None
    file: Ledger | None
    found: FileState
    ours: Ours
    merge: Merge
    relation: str
    head: int
    # The file's bytes with a merge driver's conflicts settled, and which ones, if any.
    rewritten: bytes | None = None
    settled: tuple[str, ...] = ()
    # The unit of this checkout that wrote the file and has not committed: left alone.
    flight: InFlight | None = None
    # Tasks completed here that a rewound or diverged file would have undone: kept.
    kept: tuple[str, ...] = ()

    @property
    def data(self) -> bytes:
        """The bytes the base keeps: the settled rewrite, else the file as read."""
        found = self.rewritten if self.rewritten is not None else self.found.data
        return found or b""

    def previous(self) -> Previous | None:
        """The ledger a publish follows: the file when it brings one, else the base."""
        if self.file is not None:
            head = self.file
            stamps = {found.key: found.stamp for found in head.records}
            return Previous(
                head.project_id, head.generation, head.state_digest, head.ancestors, stamps
            )
        if self.base is not None:
            base = self.base
            return Previous(
                base.project_id, base.generation, base.state_digest, base.ancestors, base.stamps
            )
        return None


@dataclass(frozen=True)
class InFlight:
    """A pending unit of this checkout that wrote the ledger file as it is now and has not
    committed: ``alive`` while its writer runs (a publish in progress), else a writer that
    died and whose unit the next recovery rolls back."""

    intent_id: str
    op: str
    owner_pid: int
    alive: bool


def in_flight(conn: sqlite3.Connection, found: FileState) -> InFlight | None:
    """The pending unit whose write the file holds, if any (on the caller's snapshot)."""
    if found.digest is None:
        return None
    for unit in pending_units(conn):
        target = unit.target(LEDGER_PATH)
        if target is not None and target["expected"] == found.digest:
            return InFlight(unit.intent_id, unit.op, unit.owner_pid, unit.alive)
    return None


def in_flight_note(flight: InFlight) -> Diagnostic:
    """What a sync that left such a file alone says: ``LEDGER_PUBLISH_IN_PROGRESS``
    (information) while the unit's writer runs, ``LEDGER_UNCOMMITTED`` once it died."""
    if flight.alive:
        return diagnostic(
            "LEDGER_PUBLISH_IN_PROGRESS",
            "info",
            f"{LEDGER_PATH} holds the generation {flight.op} (pid {flight.owner_pid}) is"
            " writing and has not committed yet; it is not imported: it becomes the base"
            " when that publish commits, or the committed file is put back",
            LEDGER_PATH,
        )
    return diagnostic(
        "LEDGER_UNCOMMITTED",
        "needs_attention",
        f"{LEDGER_PATH} holds a generation {flight.op} (unit {flight.intent_id}, pid"
        f" {flight.owner_pid}) wrote and never committed: its writer died. It is never"
        " imported; `ithaca doctor --repair` (or the next Ithaca command) puts the"
        " committed ledger back",
        LEDGER_PATH,
    )


def read_file(state_root: str) -> FileState:
    data = registry.read_bytes(state_root, LEDGER_PATH)
    return FileState(data, None if data is None else document_digest(data))


def read_of(found: FileState) -> Read:
    """The file as a plan's ``Read``: locked by its unit, checked before it commits."""
    return Read(LEDGER_PATH, found.digest)


def require_unchanged(state_root: str, found: FileState) -> None:
    """``Stale`` when the file no longer holds the bytes read (a checkout raced a sync)."""
    if registry.read_bytes(state_root, LEDGER_PATH) != found.data:
        raise Stale(LEDGER_PATH)


def journal_head(conn: sqlite3.Connection) -> int:
    return journal.latest_seq(conn) or 0


def nothing_new(base: Base | None, found: FileState) -> bool:
    """No file, or exactly the bytes of this checkout's last sync: nothing to import."""
    return found.data is None or (base is not None and found.digest == base.document_digest)


def gather(
    conn: sqlite3.Connection,
    base: Base | None,
    found: FileState,
    resolve: dict[str, str] | None = None,
) -> Incoming:
    """The three sides and their merge, given the base and the file as the caller read
    them in this snapshot; raises for a file that cannot be trusted."""
    head = journal_head(conn)
    ours = ledger_projection.project(conn)
    if found.data is None or nothing_new(base, found):
        return Incoming(base, None, found, ours, Merge(), "current", head)
    flight = in_flight(conn, found)
    if flight is not None:
        return Incoming(base, None, found, ours, Merge(), "current", head, flight=flight)
    theirs = parse(found.data)
    check_project(base, theirs)
    rewritten = None
    settled = tuple(conflict.label for conflict in theirs.conflicts)
    if settled:
        theirs = settle(theirs, resolve or {})
        rewritten = render(theirs)
    merge = three_way(
        {} if base is None else base.digests(),
        ours.records,
        theirs.index,
        resolve=resolve,
        frozen=ours.running,
    )
    name = relation(base, theirs)
    kept = keep_completions(merge, ours.records) if name in ("rewound", "diverged") else ()
    return Incoming(base, theirs, found, ours, merge, name, head, rewritten, settled, kept=kept)


def keep_completions(merge: Merge, ours: Mapping[Key, Record]) -> tuple[str, ...]:
    """Take back from ``merge`` every task record that would undo a completion made here:
    a task completed here whose record in the file is not completed with the same
    outcome, or is absent. Only for a file whose history does not hold this checkout's
    base (rewound, diverged): it never saw that completion, so it cannot have undone
    it; a task is reopened with ``reopen``, and a file that descends from the base
    brings that decision as usual. The task stays as unpublished local work, which the
    next publish writes again. Returns the labels kept."""
    kept = []
    for key, found in list(merge.taken.items()):
        mine = ours.get(key)
        if key[0] != "task" or mine is None or mine.body.get("status") != "completed":
            continue
        if found is not None and _completion(found.body) == _completion(mine.body):
            continue
        del merge.taken[key]
        kept.append(f"{key[0]}:{key[1]}")
    return tuple(kept)


def _completion(body: dict[str, Any]) -> tuple[Any, Any]:
    return body.get("status"), body.get("outcome")


def kept_notes(kept: tuple[str, ...]) -> list[Diagnostic]:
    if not kept:
        return []
    return [
        diagnostic(
            "LEDGER_COMPLETION_KEPT",
            "warning",
            f"{len(kept)} task(s) completed here are not completed so in the ledger, whose"
            " history does not hold this checkout's last sync; they stay completed (unpublished"
            f" work the next publish writes): {', '.join(kept[:LISTED])}",
        )
    ]


def check_project(base: Base | None, theirs: Ledger) -> None:
    if base is not None and theirs.project_id != base.project_id:
        raise Corrupt(
            "LEDGER_PROJECT_MISMATCH",
            f"{LEDGER_PATH} belongs to project {theirs.project_id}, this checkout to"
            f" {base.project_id}",
            {"file": theirs.project_id, "base": base.project_id},
        )


def relation(base: Base | None, theirs: Ledger | None) -> str:
    """How the file's history relates to the base's (the statuses of `sync inspect`)."""
    if theirs is None or (base is not None and theirs.state_digest == base.state_digest):
        return "current"
    if base is None or base.state_digest in theirs.ancestors:
        return "behind"
    if theirs.state_digest in base.ancestors:
        return "rewound"
    return "diverged"


def relation_notes(name: str) -> list[Diagnostic]:
    if name == "rewound":
        return [
            diagnostic(
                "LEDGER_REWOUND",
                "warning",
                "the ledger is older than this checkout's last sync (a branch switch?); the"
                " database follows it and keeps unpublished edits",
            )
        ]
    if name == "diverged":
        return [
            diagnostic(
                "LEDGER_DIVERGED",
                "warning",
                "the ledger's history does not contain this checkout's last sync; records"
                " were merged one by one against it",
            )
        ]
    return []


def settle(theirs: Ledger, resolve: dict[str, str]) -> Ledger:
    """The ledger with its merge-driver conflicts settled by ``resolve``."""
    open_ones = [found.label for found in theirs.conflicts if found.label not in resolve]
    if open_ones:
        raise Conflict(
            "LEDGER_UNRESOLVED_CONFLICTS",
            f"{LEDGER_PATH} holds {len(open_ones)} merge conflict(s); choose a side for each"
            f" with resolve (`--resolve TYPE:ID=ours|theirs`): {', '.join(open_ones[:LISTED])}",
            {"conflicts": open_ones[:LISTED], "count": len(open_ones)},
        )
    records = dict(theirs.index)
    for found in theirs.conflicts:
        chosen = found.ours if resolve[found.label] == "ours" else found.theirs
        if chosen is None:
            records.pop((found.type, found.id), None)
        else:
            records[(found.type, found.id)] = chosen
    return document(
        theirs.project_id,
        tuple(records.values()),
        generation=theirs.generation,
        parent_digest=theirs.parent_digest,
        ancestors=theirs.ancestors,
    )


def require_settled(merge: Merge) -> None:
    """``LEDGER_CONFLICT`` (or ``LEDGER_ACTIVE_TASK_CONFLICT`` when only running tasks
    clash) unless every record merged; nothing has been applied."""
    if not merge.clashes:
        return
    active = all(clash.reason == ACTIVE_TASK for clash in merge.clashes)
    code = "LEDGER_ACTIVE_TASK_CONFLICT" if active else "LEDGER_CONFLICT"
    labels = [clash.label for clash in merge.clashes]
    what = "tasks a session runs here" if active else "records changed here and in the ledger"
    raise Conflict(
        code,
        f"{len(labels)} {what}: {', '.join(labels[:LISTED])}; nothing was applied. Choose"
        " a side with resolve (`--resolve TYPE:ID=ours|theirs`)",
        {"conflicts": [clash.as_dict() for clash in merge.clashes[:LISTED]], "count": len(labels)},
    )
