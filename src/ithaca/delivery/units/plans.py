"""What an action hands a recoverable unit: the files it writes, the folders it moves and
the commit that runs inside T2 (``ithaca.delivery.units.recoverable`` runs it).

A plan is prepared on a read snapshot; its commit re-checks what it was based on and
raises ``Stale`` when that moved, so the request is prepared again from the new state.
A file the plan was based on without writing it (the ledger an import takes) is one of
its ``reads``: the unit locks it like a target and checks its bytes before committing.
``unchanged`` is the plan of a request that changes nothing; ``flat`` is the answer
shape the single-unit tools share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ithaca.delivery.contract import Diagnostic
from ithaca.kernel import canon

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


@dataclass(frozen=True)
class TrackedWrite:
    """One tracked file a unit writes; ``path`` is relative to the state root.

    ``digest`` is taken once, when the write is made: a unit compares, records and
    registers it, and a ledger of 10,000 tasks is megabytes to hash."""

    path: str
    data: bytes
    kind: str
    scope_type: str
    scope_id: str | None
    digest: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", canon.digest_bytes(self.data))


@dataclass(frozen=True)
class Rename:
    """A folder a unit moves; both paths relative to the state root, on one filesystem."""

    source: str
    target: str


@dataclass(frozen=True)
class Read:
    """A file a plan relied on without writing it: its bytes' digest when read (None:
    absent). The unit locks the path as it locks its targets, so no other unit can be
    writing it, then checks it still holds those bytes before it commits; otherwise the
    plan is ``Stale``. A file another unit wrote and had not committed yet is thus never
    taken for committed state (docs/delivery.md, "Recoverable units")."""

    path: str
    digest: str | None


@dataclass(frozen=True)
class Outcome:
    """What an action's commit returns: its result and the last journal seq it wrote."""

    result: dict[str, Any]
    journal_seq: int | None


@dataclass
class Plan:
    """A prepared action: the files it writes and the commit that runs inside T2.

    ``commit`` re-checks what the plan was based on and raises ``Stale`` when that moved,
    so the caller prepares again from the new state.
    """

    op: str
    commit: Callable[[sqlite3.Connection], Outcome]
    writes: tuple[TrackedWrite, ...] = ()
    diagnostics: list[Diagnostic] = field(default_factory=list)
    renames: tuple[Rename, ...] = ()
    # Content-addressed work done first, outside any transaction (an envelope blob):
    # harmless to repeat or to leave behind when the unit fails.
    before: Callable[[], object] | None = None
    # A no-op that writes nothing at all, not even its key's answer: a retry looks again.
    writes_nothing: bool = False
    # Files the plan was based on without writing them (``Read``).
    reads: tuple[Read, ...] = ()


class Stale(Exception):
    """What a plan was based on changed before it could commit; prepare it again."""


def flat(answer: dict[str, Any]) -> dict[str, Any]:
    """A single-unit tool's answer: the action's result beside diagnostics and seq."""
    return {
        **answer["result"],
        "diagnostics": answer["diagnostics"],
        "journal_seq": answer["journal_seq"],
    }


def unchanged(
    op: str, result: dict[str, Any], diagnostics: list[Diagnostic], *, keyed: bool = True
) -> Plan:
    """A plan that changes nothing and writes no event; its key still records the answer
    unless ``keyed`` is false, and then the store is not written at all."""
    return Plan(
        op,
        lambda conn: Outcome({**result, "unchanged": True}, None),
        (),
        diagnostics,
        writes_nothing=not keyed,
    )
