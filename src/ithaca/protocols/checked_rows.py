"""Protocol rows read one by one, each verified on its own, for the operator tools.

``explain`` and ``lint`` are what a person reaches for when a lookup fails with
``STORE_CORRUPT``, so they cannot fail on the first bad row as a lookup does: every row is
checked alone, and a corrupt one comes back marked with what is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ithaca.kernel import states
from ithaca.kernel.errors import Corrupt, IthacaError
from ithaca.protocols import records

if TYPE_CHECKING:
    from ithaca.protocols.service import ProtocolsService


@dataclass(frozen=True)
class StoredRow:
    """One protocol row: the record when it is intact, else what is wrong with it."""

    protocol_id: str
    priority: int
    record: dict[str, Any] | None
    problem: str | None = None
    detail: str | None = None


def stored_rows(service: ProtocolsService) -> list[StoredRow]:
    """Every protocol row in bundle order, each verified on its own."""
    rows = records.read_rows(service.store.connection())
    return [_checked_row(row, service.workflows) for row in rows]


def _checked_row(row: tuple[Any, ...], workflows: frozenset[str]) -> StoredRow:
    protocol_id, priority = row[0], row[5]
    try:
        record = records.row_to_record(row)
    except (ValueError, TypeError) as exc:
        return StoredRow(protocol_id, priority, None, "INVALID_JSON", str(exc))
    try:
        records.verify(record, workflows=workflows, states=states.KNOWN_STATES)
    except Corrupt as exc:
        cause = exc.__cause__
        detail = cause.message if isinstance(cause, IthacaError) else exc.message
        return StoredRow(protocol_id, priority, None, exc.details.get("problem"), detail)
    return StoredRow(protocol_id, priority, record)
