"""Checking the journal's hash chain: every row that does not fit the one before it.

``ithaca doctor`` runs it (from the last verified row, or from the start with
``--full``); the hooks only append (``kernel.journal``) and never load it.
"""

from __future__ import annotations

from ithaca.kernel import lightjson
from ithaca.kernel.journal import GENESIS, chain_hash, stored_event

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections import namedtuple
    from typing import Any
else:
    from ithaca.kernel.tuples import namedtuple


class ChainProblem(namedtuple("ChainProblem", "seq problem")):
    """A journal row that does not fit the chain; ``problem`` is HASH_MISMATCH,
    PREV_HASH_MISMATCH, SEQ_GAP or PAYLOAD_UNREADABLE."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "problem": self.problem}


def verify(conn: sqlite3.Connection, after: tuple[int, str] | None = None) -> list[ChainProblem]:
    """Recompute the chain, from the start or from the verified row ``after`` (seq, hash);
    every row that does not fit is reported by ``seq``."""
    problems: list[ChainProblem] = []
    expected_seq, expected_prev = (after[0] + 1, after[1]) if after else (1, GENESIS)
    rows = conn.execute(
        "SELECT seq, at, actor, kind, subject, payload, prev_hash, hash FROM journal"
        " WHERE seq >= ? ORDER BY seq",
        (expected_seq,),
    )
    for seq, at, actor, kind, subject, payload, prev_hash, stored_hash in rows:
        if seq != expected_seq:
            problems.append(ChainProblem(seq, "SEQ_GAP"))
        if prev_hash != expected_prev:
            problems.append(ChainProblem(seq, "PREV_HASH_MISMATCH"))
        try:
            body = lightjson.loads(payload)
        except ValueError:
            problems.append(ChainProblem(seq, "PAYLOAD_UNREADABLE"))
        else:
            event = stored_event(seq, at, actor, kind, subject, body)
            if chain_hash(prev_hash, event) != stored_hash:
                problems.append(ChainProblem(seq, "HASH_MISMATCH"))
        expected_prev = stored_hash
        expected_seq = seq + 1
    return problems
