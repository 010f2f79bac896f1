"""``sync migrate``: bring the ledger file to the exact form this Ithaca writes
(docs/delivery.md, "The team ledger: sync").

Schema version 1 is the first, so there is no older schema to convert yet; what migrate
does today is the part every migration shares: a verified ledger whose bytes differ from
this version's rendering (reformatted by hand or by a tool) is backed up byte for byte
to ``.runtime/backups/ledger-<sha256>.json`` and rewritten, values and digests unchanged.
A newer schema is refused (``LEDGER_SCHEMA_TOO_NEW``: upgrade Ithaca instead); one that
does not verify is the same error an import gives.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.ledger import base as ledger_base
from ithaca.delivery.ledger.format import (
    LEDGER_PATH,
    SCHEMA_VERSION,
    document_digest,
    parse,
    render,
    schema_version_of,
)
from ithaca.delivery.sync.incoming import check_project, journal_head, read_file
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite, unchanged
from ithaca.kernel import journal
from ithaca.kernel.errors import Refused
from ithaca.kernel.files import write_atomic
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

OP = "sync.migrate"


def plan(conn: sqlite3.Connection, project: Project) -> Plan:
    found = read_file(project.state_root)
    if found.data is None:
        return unchanged(OP, {"status": "missing", "migrated": False}, [])
    version = schema_version_of(found.data)
    if version is not None and version > SCHEMA_VERSION:
        raise Refused(
            "LEDGER_SCHEMA_TOO_NEW",
            f"{LEDGER_PATH} has schema_version {version}; this Ithaca knows up to"
            f" {SCHEMA_VERSION}: upgrade Ithaca",
            {"schema_version": version, "known": SCHEMA_VERSION},
        )
    ledger = parse(found.data)
    base = ledger_base.load(conn)
    check_project(base, ledger)
    data = render(ledger)
    if data == found.data:
        return unchanged(OP, {"status": "current", "migrated": False}, [])
    digest = document_digest(data)
    backup = f"backups/ledger-{found.digest}.json"
    head = journal_head(conn)
    result: dict[str, Any] = {"status": "migrated", "migrated": True, "backup": backup}

    def before() -> None:
        if read_file(project.state_root).digest != found.digest:
            raise Stale(LEDGER_PATH)
        write_atomic(project.runtime, backup, found.data or b"")

    def commit(tx: sqlite3.Connection) -> Outcome:
        if journal_head(tx) != head:
            raise Stale("ledger")
        if base is not None and base.document_digest == found.digest:
            ledger_base.save(tx, ledger, digest)
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.ledger.migrated",
            subject=ledger.state_digest,
            payload={
                "backup": backup,
                "from_digest": found.digest,
                "to_digest": digest,
                "schema_version": SCHEMA_VERSION,
            },
        )
        return Outcome(result, seq)

    write = TrackedWrite(LEDGER_PATH, data, "ledger", "project", None)
    return Plan(OP, commit, (write,), [], before=before)
