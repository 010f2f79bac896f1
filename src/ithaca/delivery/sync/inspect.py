"""``sync inspect``: where the ledger file, the base and the database stand
(docs/delivery.md, "The team ledger: `sync`").

Read-only: no import, no write, no journal event. A file that cannot be trusted is an
answer here (``corrupt``, with the error's code as a diagnostic), not an error, because
inspecting is how one finds out what to do about it.

``status`` is ``current`` (file, base and database agree), ``ahead`` (the file is the
base, the database has unpublished edits), ``behind`` (the file descends from the base:
import), ``rewound`` (the base descends from the file: a branch switched back),
``diverged`` (neither), ``conflicted`` (the file holds a merge driver's conflicts, or
importing would conflict), ``missing``, ``migration_required`` or ``corrupt`` — or,
when the file holds a generation a unit of this checkout wrote and has not committed,
``publishing`` (its writer still runs) or ``uncommitted`` (its writer died: the file is
put back by the next Ithaca command or ``doctor --repair``). Such a file is never
imported; ``uncommitted_ledger`` is the same finding for ``doctor``.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.ledger import base as ledger_base
from ithaca.delivery.ledger import driver_setup as sync_install
from ithaca.delivery.ledger import projection as ledger_projection
from ithaca.delivery.ledger.format import (
    SCHEMA_VERSION,
    parse,
    schema_version_of,
)
from ithaca.delivery.ledger.merge import three_way
from ithaca.delivery.sync.incoming import (
    LISTED,
    check_project,
    in_flight,
    in_flight_note,
    read_file,
    relation,
)
from ithaca.kernel.errors import IthacaError
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


def inspect_ledger(conn: sqlite3.Connection, project: Project) -> dict[str, Any]:
    """The ``sync inspect`` answer: the ledger's status, digests, counts and conflicts."""
    base = ledger_base.load(conn)
    ours = ledger_projection.project(conn)
    base_digests = {} if base is None else base.digests()
    local = sum(
        1
        for key in set(base_digests) | set(ours.records)
        if base_digests.get(key) != _digest(ours.records.get(key))
    )
    answer: dict[str, Any] = {
        "status": "missing",
        "file_state_digest": None,
        "base_state_digest": None if base is None else base.state_digest,
        "local_unpublished": local,
        "incoming": 0,
        "conflicts": [],
        "merge_driver_registered": sync_install.registered(project),
        "journal_seq": None,
    }
    diagnostics: list[Diagnostic] = []
    if not answer["merge_driver_registered"]:
        diagnostics.append(
            diagnostic(
                "MERGE_DRIVER_MISSING",
                "warning",
                "Git would merge the ledger line by line; run `ithaca sync install-driver`",
            )
        )
    found = read_file(project.state_root)
    answer["diagnostics"] = diagnostics
    if found.data is None:
        return answer
    flight = in_flight(conn, found)
    if flight is not None:
        answer["status"] = "publishing" if flight.alive else "uncommitted"
        diagnostics.append(in_flight_note(flight))
        return answer
    version = schema_version_of(found.data)
    if isinstance(version, int) and version < SCHEMA_VERSION:
        answer["status"] = "migration_required"
        return answer
    if isinstance(version, int) and version > SCHEMA_VERSION:  # no migrate can read it
        answer["status"] = "corrupt"
        diagnostics.append(
            diagnostic(
                "LEDGER_SCHEMA_TOO_NEW",
                "needs_attention",
                f"the ledger has schema_version {version}; this Ithaca reads"
                f" {SCHEMA_VERSION}: upgrade Ithaca",
            )
        )
        return answer
    try:
        theirs = parse(found.data)
        check_project(base, theirs)
    except IthacaError as exc:
        answer["status"] = "corrupt"
        diagnostics.append(diagnostic(exc.code, "needs_attention", exc.message))
        return answer
    answer["file_state_digest"] = theirs.state_digest
    answer["incoming"] = sum(
        1
        for key in set(base_digests) | set(theirs.index)
        if base_digests.get(key) != _digest(theirs.index.get(key))
    )
    merge = three_way(base_digests, ours.records, theirs.index, frozen=ours.running)
    conflicts = [
        {
            "type": left.type,
            "id": left.id,
            "base_digest": left.base_digest,
            "ours_digest": _digest(left.ours),
            "theirs_digest": _digest(left.theirs),
            "reason": "merge_driver",
        }
        for left in theirs.conflicts
    ] + [clash.as_dict() for clash in merge.clashes]
    answer["conflicts"] = conflicts[:LISTED]
    if conflicts:
        answer["status"] = "conflicted"
    else:
        name = relation(base, theirs)
        answer["status"] = "ahead" if name == "current" and local else name
    if answer["incoming"] and not conflicts:
        diagnostics.append(
            diagnostic(
                "LEDGER_IMPORT_PENDING",
                "info",
                f"{answer['incoming']} record(s) of the ledger are not imported yet",
            )
        )
    return answer


def _digest(found: Any) -> str | None:
    return None if found is None else found.digest


def uncommitted_ledger(conn: sqlite3.Connection, project: Project) -> Diagnostic | None:
    """The doctor's finding when the ledger file holds a generation that no transaction
    committed: ``LEDGER_PUBLISH_IN_PROGRESS`` (information) while the unit that wrote it
    runs, ``LEDGER_UNCOMMITTED`` once its writer died (``doctor --repair``, or the next
    Ithaca command, rolls it back and puts the committed file back). None otherwise."""
    flight = in_flight(conn, read_file(project.state_root))
    return None if flight is None else in_flight_note(flight)
