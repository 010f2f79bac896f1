"""A sync's bulk work runs with the cyclic garbage collector paused.

Parsing a ledger of 10,000 records, projecting the database and writing the rows back
allocate a few hundred thousand dicts and lists in well under a second. CPython's
collector is driven by allocation counts: as the heap grows it keeps traversing every
object the process holds, which measured up to a third of parsing a 10,000-task ledger.
Parsed JSON and the records made from it hold no reference cycles, so those passes free
nothing; ``paused()`` defers them to the end of the sync, where the collector resumes as
it was. Standard library only: the merge driver runs from Git.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Collect no cycles inside the block (nested blocks and a collector already off are
    left as they are)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
