"""Idempotency keys: a retried mutation replays its first answer (docs/delivery.md, "Idempotency").

The key is bound to what was asked: ``request_digest = digest({tool, operation, input})``
over the normalised input (defaults filled, sets sorted), without the key. The same key
with the same digest returns the stored result marked ``replayed`` and changes nothing;
the same key with another digest is ``IDEMPOTENCY_KEY_REUSED``. Keys never expire (the
original's expiring keys let a late retry apply twice). The row is written in the
transaction that commits the effect, and re-checked there, so of two racing requests
with one key exactly one commits and the other replays it. Errors store nothing, so a
refused request can be retried with its key once the cause is fixed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ithaca.kernel import canon, clock
from ithaca.kernel.errors import Conflict

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


def request_digest(tool: str, operation: str, data: Any) -> str:
    return canon.digest({"tool": tool, "operation": operation, "input": data})


class Replayed(Exception):
    """The key was already used for this very request; ``stored`` is its first answer."""

    def __init__(self, stored: dict[str, Any]):
        super().__init__("replayed")
        self.stored = stored


@dataclass(frozen=True)
class Guard:
    """One request's key, checked before and sealed inside its committing transaction."""

    key: str
    tool: str
    digest: str

    def check(self, conn: sqlite3.Connection) -> None:
        """Raise ``Replayed`` or ``IDEMPOTENCY_KEY_REUSED`` if the key was used before."""
        row = conn.execute(
            "SELECT tool, request_digest, result, created_at FROM delivery_idempotency"
            " WHERE key = ?",
            (self.key,),
        ).fetchone()
        if row is None:
            return
        tool, digest, result, created_at = row
        if tool == self.tool and digest == self.digest:
            raise Replayed(json.loads(result))
        raise Conflict(
            "IDEMPOTENCY_KEY_REUSED",
            f"idempotency key {self.key!r} was used on {created_at} for a different request;"
            " use a new key for new data",
            {"key": self.key, "tool": tool, "used_at": created_at},
        )

    def seal(self, conn: sqlite3.Connection, answer: dict[str, Any]) -> None:
        """Store the answer under the key (inside the transaction that commits it)."""
        conn.execute(
            "INSERT INTO delivery_idempotency"
            " (key, tool, request_digest, result, journal_seq, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                self.key,
                self.tool,
                self.digest,
                canon.canonical_text(answer),
                answer.get("journal_seq"),
                clock.now(),
            ),
        )
