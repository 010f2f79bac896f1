"""``sync import --rehash`` (user-only): accept a ledger someone edited by hand
(docs/delivery.md, "The team ledger: sync").

A hand edit breaks the digests, so ``import`` refuses the file (``LEDGER_DIGEST_MISMATCH``)
rather than trust it. When the edit was meant, the user says so: the CLI shows each
edited record against the version this checkout last synced, the user types a
confirmation, and the file is rewritten with fresh digests (each edited record the next
revision of what it claimed to be), then imported as usual. Agents are not offered this:
the MCP tool has no such action, and the CLI asks for a person at a terminal.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from ithaca.delivery.ledger import base as ledger_base
from ithaca.delivery.ledger.format import LEDGER_PATH, Ledger, Record, parse, rehash, render
from ithaca.delivery.sync.incoming import check_project, journal_head, read_file, require_unchanged
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite
from ithaca.kernel import journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Conflict, IthacaError, NotFound
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

OP = "sync.rehash"


@dataclass(frozen=True)
class Edits:
    """The file taken as it stands, and the labels of the records edited in it."""

    ledger: Ledger
    edited: list[str]


def read_edits(project: Project) -> Edits:
    found = read_file(project.state_root)
    if found.data is None:
        raise NotFound("LEDGER_MISSING", f"there is no {LEDGER_PATH} to rehash", {})
    ledger, edited = rehash(found.data)
    return Edits(ledger, edited)


def diff(project: Project, store: Store, edits: Edits) -> list[str]:
    """Each edited record's body against its version at this checkout's last sync."""
    synced = _last_synced(project, store)
    lines: list[str] = []
    for label in edits.edited:
        kind, _, name = label.partition(":")
        before = synced.get((kind, name))
        lines += difflib.unified_diff(
            [] if before is None else _pretty(before),
            _pretty(edits.ledger.index[(kind, name)]),
            fromfile=f"{label} (last sync)",
            tofile=f"{label} ({LEDGER_PATH})",
            lineterm="",
        )
    return lines


def plan(conn: sqlite3.Connection, project: Project, expected: str) -> Plan:
    """Rewrite the file with fresh digests, provided it still holds the edit the user
    was shown (its rehashed state digest is ``expected``)."""
    found = read_file(project.state_root)
    if found.data is None:
        raise Stale(LEDGER_PATH)
    ledger, edited = rehash(found.data)
    if ledger.state_digest != expected:
        raise Conflict(
            "LEDGER_CHANGED",
            f"{LEDGER_PATH} changed after it was shown; run the command again",
            {"expected": expected, "actual": ledger.state_digest},
        )
    check_project(ledger_base.load(conn), ledger)
    head = journal_head(conn)

    def commit(tx: sqlite3.Connection) -> Outcome:
        if journal_head(tx) != head:
            raise Stale("ledger")
        seq = journal.append(
            tx,
            actor="user",
            kind="delivery.ledger.rehashed",
            subject=ledger.state_digest,
            payload={"state_digest": ledger.state_digest, "edited": edited},
        )
        return Outcome({"rehashed": edited, "state_digest": ledger.state_digest}, seq)

    write = TrackedWrite(LEDGER_PATH, render(ledger), "ledger", "project", None)
    return Plan(
        OP, commit, (write,), [], before=lambda: require_unchanged(project.state_root, found)
    )


def _last_synced(project: Project, store: Store) -> dict[tuple[str, str], Record]:
    with store.read() as conn:
        base = ledger_base.load(conn)
    if base is None:
        return {}
    try:
        return dict(parse(BlobStore(project.blobs_dir).get(base.document_digest)).index)
    except IthacaError:
        return {}  # the kept copy is gone or damaged: show the edited records whole


def _pretty(found: Record) -> list[str]:
    return json.dumps(found.body, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
