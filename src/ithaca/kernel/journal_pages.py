"""The journal's rows as SQLite stores them: the pages of its table, read from the file.

A routine ``ithaca doctor`` must see an edit of any journal row, however old, and a
million rows cannot be re-hashed event by event in a second; nor can SQLite hand them
over column by column that fast (about 1.5 µs a row for the seven columns). What can be
read at the speed of memory is the file itself. A table whose keys only grow fills its
leaf pages left to right and, once a leaf is full, never writes it again: SQLite starts
the next row on a new page (its ``balance_quick``). So once the doctor has re-derived the
chain of the rows a full leaf holds, the bytes of that leaf (and of any overflow page a
long row spills into) stand for those rows: an edit, a deletion or a move of any of them
rewrites the page or takes it out of the table.

This module reads those pages as SQLite would: from the write-ahead log where a newer
copy of a page is there (``-shm`` names the last committed frame), else from the database
file; walks the table's b-tree to list its leaves in key order; and parses a leaf's cells
for their row ids and overflow chains. It follows SQLite's documented file format
(https://www.sqlite.org/fileformat2.html) and changes nothing. Whatever it cannot read as
expected it says so (``PageError``), and the caller falls back to SQL. Doctor only.

It runs in a process of its own (this file, run by its path with ``python -I -S``, driven
by ``kernel.journal_check`` over its standard streams), never beside an open SQLite
connection: closing any descriptor of a database file drops every POSIX lock the process
holds on it, SQLite's own included (https://www.sqlite.org/howtocorrupt.html, 2.2), and
another process may then write over what SQLite believes is still locked.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
import sys
from collections.abc import Iterable
from typing import Any

HEADER = b"SQLite format 3\x00"
SEAL_DOMAIN = b"ithaca journal seal v1\n"
TABLE_LEAF = 0x0D
TABLE_INTERIOR = 0x05
WAL_HEADER = 32
FRAME_HEADER = 24
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
# A b-tree deeper than this is a loop in a damaged file, not a table.
MAX_DEPTH = 40


class PageError(Exception):
    """The file is not as this reader expects (damaged, changing under it, or another
    format); the caller checks by SQL instead."""


class Pages:
    """The current content of a database's pages, WAL included; ``close()`` when done."""

    def __init__(self, db_path: str):
        self._files: list[mmap.mmap] = []
        main = self._map(db_path)
        if main is None or len(main) < 100 or main[:16] != HEADER:
            self.close()
            raise PageError("not an SQLite database file")
        self.main: mmap.mmap = main
        size = _U16.unpack_from(self.main, 16)[0]
        self.page_size = 65536 if size == 1 else size
        self.usable = self.page_size - self.main[20]
        self.pages_in_file = len(self.main) // self.page_size
        self.frames: dict[int, int] = {}  # page number -> offset of its newest WAL copy
        self.wal: mmap.mmap | None = None
        self.wal_mark: bytes = b""
        self._read_wal(db_path)

    def _map(self, path: str) -> mmap.mmap | None:
        try:
            with open(path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size == 0:
                    return None
                mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise PageError(f"cannot read {os.path.basename(path)}: {exc}") from exc
        self._files.append(mapped)
        return mapped

    def _read_wal(self, db_path: str) -> None:
        """Map each page to its newest committed copy in the WAL (frames 1..mxFrame as the
        shared-memory index names them, with the WAL header's salt)."""
        wal = self._map(db_path + "-wal")
        if wal is None:
            return
        mark = self._wal_index(db_path)
        if mark is None:
            raise PageError("the write-ahead log has no readable index (-shm)")
        max_frame, salt = mark
        self.wal, self.wal_mark = wal, bytes(self._index_header(db_path) or b"")
        if max_frame == 0:
            return
        if len(wal) < WAL_HEADER or wal[16:24] != salt:
            raise PageError("the write-ahead log does not match its index")
        stride = FRAME_HEADER + self.page_size
        if WAL_HEADER + max_frame * stride > len(wal):
            raise PageError("the write-ahead log is shorter than its index says")
        frames = self.frames
        for number in range(max_frame):
            offset = WAL_HEADER + number * stride
            if wal[offset + 8 : offset + 16] != salt:
                raise PageError("a frame of the write-ahead log has another salt")
            frames[_U32.unpack_from(wal, offset)[0]] = offset + FRAME_HEADER

    def _index_header(self, db_path: str) -> bytes | None:
        """The first copy of the WAL index header, when both copies agree."""
        try:
            with open(db_path + "-shm", "rb") as handle:
                both = handle.read(96)
        except OSError:
            return None
        if len(both) < 96 or both[:48] != both[48:96]:
            return None
        return both[:48]

    def _wal_index(self, db_path: str) -> tuple[int, bytes] | None:
        """``(mxFrame, salt)`` from the WAL index, read until two reads agree."""
        for _ in range(5):
            header = self._index_header(db_path)
            if header is None or header[12] != 1:  # not initialised
                continue
            max_frame = struct.unpack_from("=I", header, 16)[0]
            return max_frame, bytes(header[32:40])
        return None

    def changed_since_opened(self, db_path: str) -> bool:
        """Whether a commit moved the WAL index since this reader mapped it."""
        if self.wal is None:
            return os.path.exists(db_path + "-wal") and os.path.getsize(db_path + "-wal") > 0
        return self._index_header(db_path) != self.wal_mark

    def page(self, number: int) -> memoryview:
        """Page ``number`` (1-based) as SQLite sees it now."""
        offset = self.frames.get(number)
        if offset is not None and self.wal is not None:
            return memoryview(self.wal)[offset : offset + self.page_size]
        if not 1 <= number <= self.pages_in_file:
            raise PageError(f"page {number} lies beyond the database file")
        start = (number - 1) * self.page_size
        return memoryview(self.main)[start : start + self.page_size]

    def leaves(self, root: int) -> list[int]:
        """The leaf pages of the table b-tree rooted at ``root``, in key order."""
        found: list[int] = []
        level = [root]
        for _ in range(MAX_DEPTH):
            # Every page of one level has the kind of the first: a leaf among interior
            # pages would be read as one (and fail its seal), never skipped.
            kind = self._kind(level[0])
            if kind == TABLE_LEAF:
                found.extend(level)
                return found
            if kind != TABLE_INTERIOR:
                raise PageError("the table's b-tree holds a page of another kind")
            below: list[int] = []
            for number in level:
                below.extend(self._children(number))
            if len(set(below)) != len(below) or len(below) > self.pages_in_file + len(self.frames):
                raise PageError("the table's b-tree names a page twice (a loop)")
            level = below
        raise PageError("the table's b-tree is deeper than any real table")

    def _kind(self, number: int) -> int:
        return int(self.page(number)[100 if number == 1 else 0])

    def _children(self, number: int) -> list[int]:
        page = self.page(number)
        base = 100 if number == 1 else 0
        count = _U16.unpack_from(page, base + 3)[0]
        pointers = base + 12
        unpack16, unpack32 = _U16.unpack_from, _U32.unpack_from
        children = [unpack32(page, unpack16(page, pointers + 2 * i)[0])[0] for i in range(count)]
        children.append(unpack32(page, base + 8)[0])
        return children

    def leaf_rows(self, number: int) -> tuple[int, int, list[int]]:
        """``(first rowid, last rowid, overflow pages)`` of a table leaf page."""
        page = self.page(number)
        base = 100 if number == 1 else 0
        if page[base] != TABLE_LEAF:
            raise PageError(f"page {number} is not a table leaf")
        count = _U16.unpack_from(page, base + 3)[0]
        if count == 0:
            raise PageError(f"leaf page {number} holds no rows")
        usable = self.usable
        most_local = usable - 35
        least_local = ((usable - 12) * 32 // 255) - 23
        overflow: list[int] = []
        rowids: list[int] = []
        for index in range(count):
            at = _U16.unpack_from(page, base + 8 + 2 * index)[0]
            size, at = _varint(page, at)
            rowid, at = _varint(page, at)
            rowids.append(rowid)
            if size <= most_local:
                continue
            local = least_local + (size - least_local) % (usable - 4)
            if local > most_local:
                local = least_local
            overflow.extend(self._chain(_U32.unpack_from(page, at + local)[0], size - local))
        if rowids != sorted(rowids):
            raise PageError(f"leaf page {number} holds its rows out of order")
        return rowids[0], rowids[-1], overflow

    def _chain(self, first: int, remaining: int) -> list[int]:
        """The overflow pages from ``first`` on, until ``remaining`` bytes are covered."""
        chain: list[int] = []
        number = first
        per_page = self.usable - 4
        while remaining > 0:
            if number == 0 or len(chain) > self.pages_in_file + len(self.frames):
                raise PageError("an overflow chain ends early or loops")
            chain.append(number)
            remaining -= per_page
            number = _U32.unpack_from(self.page(number), 0)[0]
        return chain

    def digest(self, numbers: Iterable[int], into: Any) -> None:
        """Feed the pages ``numbers`` to the hash object ``into``, in order; a run of
        consecutive pages that all lie in the database file goes in as one buffer."""
        update = into.update
        run_start = run_end = 0  # pages run_start..run_end-1, all in the file
        for number in numbers:
            if number == run_end and number not in self.frames and number <= self.pages_in_file:
                run_end += 1
                continue
            if run_end > run_start:
                update(self._span(run_start, run_end))
            if number in self.frames or not 1 <= number <= self.pages_in_file:
                update(self.page(number))
                run_start = run_end = 0
            else:
                run_start, run_end = number, number + 1
        if run_end > run_start:
            update(self._span(run_start, run_end))

    def _span(self, first: int, end: int) -> memoryview:
        size = self.page_size
        return memoryview(self.main)[(first - 1) * size : (end - 1) * size]

    def close(self) -> None:
        for mapped in self._files:
            try:
                mapped.close()
            except BufferError:  # a view still held; the mapping goes with the process
                pass
        self._files.clear()


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    """An SQLite varint at ``at``: its value and the offset after it."""
    value = 0
    for step in range(8):
        byte = data[at + step]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + step + 1
    return (value << 8) | data[at + 8], at + 9


def pack(numbers: Iterable[int]) -> bytes:
    """Page numbers as stored in a seal: 4 bytes each, big-endian."""
    listed = list(numbers)
    return struct.pack(f">{len(listed)}I", *listed)


def unpack(blob: bytes) -> list[int]:
    if not isinstance(blob, bytes) or len(blob) % 4:
        raise PageError("a seal's page list is not whole 4-byte numbers")
    return list(struct.unpack(f">{len(blob) // 4}I", blob))


def digest(pages: Pages, first: int, last: int, leaves: list[int], overflow: list[int]) -> str:
    """A seal's digest: SHA-256 over its range, its page lists and then the pages' bytes;
    "" when a page cannot be read."""
    hashed = hashlib.sha256(SEAL_DOMAIN)
    hashed.update(f"{first}\n{last}\n".encode())
    hashed.update(pack(leaves))
    hashed.update(b"\n")
    hashed.update(pack(overflow))
    try:
        pages.digest(leaves, hashed)
        pages.digest(overflow, hashed)
    except PageError:
        return ""
    return hashed.hexdigest()


# --- the reader process ---------------------------------------------------------------------


class Session:
    """One reader's answers, request by request (one JSON object a line each way). Page
    lists travel as hex of their packed form (``pack``), the form seals store them in.

    - ``{"op": "open", "db": path, "root": page}`` → ``{"leaves": hex}``, the journal's
      leaf pages in key order
    - ``{"op": "digests", "seals": [[first, last, leaves, overflow], ...]}`` →
      ``{"digests": [...]}``
    - ``{"op": "seal", "db": path, "root": page, "after": leaf, "expected": seq,
      "through": seq, "chunk": n}`` → ``{"seals": [[first, last, leaves, overflow,
      digest], ...]}``: the full leaves after the leaf page ``after`` (from the first with
      0), never the last, while they hold the rows that follow ``expected`` up to
      ``through``, in chunks of ``n`` leaves; the tree is walked again first where the
      log moved on since ``open``

    A request that cannot be answered gets ``{"error": why}``.
    """

    def __init__(self) -> None:
        self.pages: Pages | None = None
        self.leaves: list[int] = []

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            if request["op"] == "open" or (
                request["op"] == "seal"
                and (self.pages is None or self.pages.changed_since_opened(request["db"]))
            ):
                self.open(request["db"], int(request["root"]))
            if request["op"] == "open":
                return {"leaves": pack(self.leaves).hex()}
            if self.pages is None:
                return {"error": "no database open"}
            if request["op"] == "digests":
                return {"digests": self.digests(request["seals"])}
            if request["op"] == "seal":
                return {"seals": self.seal(request)}
        except PageError as exc:
            return {"error": str(exc)}
        except (IndexError, struct.error, ValueError) as exc:  # a damaged page's numbers
            return {"error": f"a page of the journal is damaged ({exc})"}
        return {"error": f"unknown request {request.get('op')!r}"}

    def open(self, db_path: str, root: int) -> None:
        for _ in range(2):  # a commit while walking can show a tree caught mid-balance
            if self.pages is not None:
                self.pages.close()
            self.pages = Pages(db_path)
            self.leaves = self.pages.leaves(root)
            if not self.pages.changed_since_opened(db_path):
                return

    def digests(self, seals: list[list[Any]]) -> list[str]:
        pages = self.pages
        assert pages is not None

        # One thread: two hashing threads measured no faster on the 2-vCPU machine the
        # benchmark ran on (bench/journal_verify.py), and are more to go wrong.
        return [
            digest(pages, first, last, _listed(leaves), _listed(overflow))
            for first, last, leaves, overflow in seals
        ]

    def seal(self, request: dict[str, Any]) -> list[list[Any]]:
        pages = self.pages
        assert pages is not None
        made: list[list[Any]] = []
        expected = first = int(request["expected"])
        through, chunk = int(request["through"]), int(request["chunk"])
        after = int(request["after"])
        start = self.leaves.index(after) + 1 if after else 0
        group: list[int] = []
        overflow: list[int] = []
        for number in self.leaves[start:-1]:
            low, high, spilled = pages.leaf_rows(number)
            if low != expected or high > through:
                break
            group.append(number)
            overflow += spilled
            expected = high + 1
            if len(group) == chunk:
                made.append([first, high, group, overflow])
                first, group, overflow = expected, [], []
        if group:
            made.append([first, expected - 1, group, overflow])
        answer = []
        for first_seq, last_seq, leaves, spilled in made:
            sealed = digest(pages, first_seq, last_seq, leaves, spilled)
            if not sealed:
                raise PageError("a page to seal could not be read")
            answer.append([first_seq, last_seq, pack(leaves).hex(), pack(spilled).hex(), sealed])
        return answer


def _listed(packed: str) -> list[int]:
    return unpack(bytes.fromhex(packed))


def serve() -> None:
    """Answer requests from standard input until it closes."""
    session = Session()
    for line in sys.stdin:
        try:
            answer = session.answer(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            answer = {"error": f"bad request: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    os._exit(0)  # nothing left to tidy: the mappings go with the process, at once


if __name__ == "__main__":
    serve()
