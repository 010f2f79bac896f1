"""Checking the journal: every row, every time, in well under a second at a million rows.

The hash chain is ``hash = sha256(prev_hash + canonical(event))``; re-deriving it costs
10 to 30 µs a row in Python, tens of seconds at a million events. ``ithaca doctor --full``
still does exactly that (``verify``). A routine ``ithaca doctor`` reads every row too,
but through what SQLite stores: once the chain of the rows a full leaf page holds has
been re-derived, the doctor *seals* those pages (``journal_seals``: per chunk of up to
64 leaves, their page numbers, the overflow pages their long rows spill into, and one
SHA-256 over all their bytes). A later check walks the journal's b-tree, finds each
sealed chunk's leaves where they were, in the same order, and hashes their bytes again
(``kernel.journal_pages``, in a process of its own), at the speed of SHA-256 over memory.
An edited, deleted or reordered row changes a sealed page or takes it out of the table,
so its chunk no longer matches; the doctor then re-derives that chunk's rows and reports
what broke. The rows after the last sealed page are re-derived every time. (Reading the
columns through SQLite instead costs about 1.5 µs a row, too slow for a second.)

A chunk whose pages moved while its rows still chain (a ``VACUUM``, another SQLite) is
sealed again; a chunk found broken never is, so every later check reports it again.
Seals are written only after a check found nothing wrong. With the user's seal key
(``kernel.anchor``), each seal also carries a MAC, so a seal rewritten to match an edit
is itself reported. Doctor only: the hooks append (``kernel.journal``) and never load it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import namedtuple
from typing import Any

from ithaca.kernel import anchor, journal_pages, lightjson
from ithaca.kernel.errors import InvalidInput
from ithaca.kernel.journal import GENESIS, chain_hash, stored_event
from ithaca.kernel.journal_pages import PageError

# A chunk of sealed leaves: about 640 rows of small events, re-derived in a few
# milliseconds when its pages no longer match.
CHUNK_LEAVES = 64
SEAL_COLUMNS = "first_seq, last_seq, leaves, overflow, digest, mac"


class ChainProblem(namedtuple("ChainProblem", "seq problem")):
    """A journal row that does not fit the chain; ``problem`` is HASH_MISMATCH,
    PREV_HASH_MISMATCH, SEQ_GAP or PAYLOAD_UNREADABLE (or, for a sealed chunk whose
    seal is not the user's, SEAL_FORGED)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "problem": self.problem}


def verify(
    conn: sqlite3.Connection,
    after: tuple[int, str] | None = None,
    until: int | None = None,
) -> list[ChainProblem]:
    """Recompute the chain, from the start or from the verified row ``after`` (seq, hash),
    up to ``until`` (inclusive; the end when None); every row that does not fit is
    reported by ``seq``. With ``until``, the row after it must chain to the last one."""
    problems: list[ChainProblem] = []
    expected_seq, expected_prev = (after[0] + 1, after[1]) if after else (1, GENESIS)
    sql = (
        "SELECT seq, at, actor, kind, subject, payload, prev_hash, hash FROM journal"
        " WHERE seq >= ?" + (" AND seq <= ?" if until is not None else "") + " ORDER BY seq"
    )
    params = (expected_seq,) if until is None else (expected_seq, until)
    for seq, at, actor, kind, subject, payload, prev_hash, stored_hash in conn.execute(sql, params):
        if seq != expected_seq:
            problems.append(ChainProblem(seq, "SEQ_GAP"))
        if prev_hash != expected_prev:
            problems.append(ChainProblem(seq, "PREV_HASH_MISMATCH"))
        try:
            body = lightjson.loads(payload)
        except (ValueError, TypeError):  # TypeError: a column edited into a blob
            problems.append(ChainProblem(seq, "PAYLOAD_UNREADABLE"))
        else:
            try:
                event = stored_event(seq, at, actor, kind, subject, body)
                fits = chain_hash(str(prev_hash), event) == stored_hash
            except (InvalidInput, TypeError, UnicodeError):
                fits = False  # a value canonical JSON cannot hold was edited in
            if not fits:
                problems.append(ChainProblem(seq, "HASH_MISMATCH"))
        expected_prev = stored_hash
        expected_seq = seq + 1
    if until is not None:
        if expected_seq <= until:  # the range's last rows are missing
            problems.append(ChainProblem(expected_seq, "SEQ_GAP"))
        successor = conn.execute(
            "SELECT seq, prev_hash FROM journal WHERE seq > ? ORDER BY seq LIMIT 1", (until,)
        ).fetchone()
        if successor is not None and expected_seq > until and successor[1] != expected_prev:
            problems.append(ChainProblem(successor[0], "PREV_HASH_MISMATCH"))
    return problems


def start_before(conn: sqlite3.Connection, seq: int) -> tuple[int, str] | None:
    """Where re-deriving from row ``seq`` starts: the row before it, as stored. When that
    row is gone (a gap reported on its own), row ``seq``'s own ``prev_hash`` stands in, so
    one missing row is not reported twice."""
    if seq <= 1:
        return None
    row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (seq - 1,)).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT prev_hash FROM journal WHERE seq >= ? ORDER BY seq LIMIT 1", (seq,)
        ).fetchone()
    return (seq - 1, str(row[0]) if row is not None else GENESIS)


class Seal(namedtuple("Seal", "first_seq last_seq leaves overflow digest mac")):
    """One sealed chunk: rows ``first_seq..last_seq`` lie in the leaf pages ``leaves``
    (and the overflow pages ``overflow``; both packed, ``journal_pages.pack``), whose
    bytes hash to ``digest``; ``mac`` is the
    digest's seal under the user's key (``keyid:mac``, ``kernel.anchor``), or None when it
    was sealed without one."""

    __slots__ = ()


class Checked:
    """What a check found (``problems``, and how many rows it read each way), and what
    ``seal`` needs to seal afterwards; ``close()`` stops the page reader."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self.problems: list[ChainProblem] = []
        self.rows_by_pages = 0  # rows whose sealed pages matched
        self.rows_derived = 0  # rows whose chain was re-derived
        self.pages_unreadable: str | None = None
        self.pages: Reader | None = None
        self.leaves = b""  # the journal's leaf pages, walked in key order (packed)
        self.prefix: list[Seal] = []  # the seals that hold, up to the first that did not
        self.root = 0  # the journal table's root page
        self.through = 0  # the last seq this check verified

    @property
    def ok(self) -> bool:
        return not self.problems

    def close(self) -> None:
        if self.pages is not None:
            self.pages.close()
            self.pages = None


def check(
    conn: sqlite3.Connection, db_path: str, *, full: bool = False, key: bytes | None = None
) -> Checked:
    """Every journal row checked: the sealed chunks by their pages (a chunk is re-derived
    when its pages no longer match), the rows after the last seal by re-deriving their
    chain; with ``full``, every row re-derived. With the user's seal ``key``, a seal whose
    MAC is not the key's is reported (``SEAL_FORGED``) and its rows re-derived."""
    checked = Checked(db_path)
    readable = _open(checked, conn)
    if full or not readable:
        checked.problems = verify(conn)
        checked.through = _head_seq(conn)
        checked.rows_derived = checked.through
        return checked
    matched, broken = _match(checked, _seals(conn), key)
    for seal, why in broken:
        found = verify(conn, after=start_before(conn, seal.first_seq), until=seal.last_seq)
        if why == "SEAL_FORGED" and not found:
            found = [ChainProblem(seal.first_seq, "SEAL_FORGED")]
        checked.problems += found
        checked.rows_derived += seal.last_seq - seal.first_seq + 1
    sealed_until = max((seal.last_seq for seal in (*matched, *(s for s, _ in broken))), default=0)
    checked.through = _head_seq(conn)
    checked.problems += verify(conn, after=start_before(conn, sealed_until + 1))
    checked.rows_derived += max(checked.through - sealed_until, 0)
    checked.problems.sort()
    return checked


def seal(conn: sqlite3.Connection, checked: Checked, key: bytes | None = None) -> int:
    """After a check that found nothing wrong anywhere: seal again the chunks after the
    first that did not hold, and seal the full leaves appended since, up to the last row
    the check verified. Returns how many chunks it wrote; nothing where the database
    cannot be written (a read-only mount, a busy writer): the next check tries again."""
    from ithaca.kernel.connection import write_transaction
    from ithaca.kernel.errors import IthacaError

    if not checked.ok or checked.pages is None:
        return 0
    try:
        last = checked.prefix[-1].last_seq if checked.prefix else 0
        answer = checked.pages.ask(
            {"op": "seal", "db": checked.db_path, "root": checked.root,
             "after": _page_at(checked.prefix[-1].leaves, -1) if checked.prefix else 0,
             "expected": last + 1, "through": checked.through, "chunk": CHUNK_LEAVES}
        )  # fmt: skip
        made = [
            Seal(
                first,
                high,
                bytes.fromhex(leaves),
                bytes.fromhex(overflow),
                digest,
                anchor.seal(key, _seal_message(digest)) if key else None,
            )
            for first, high, leaves, overflow, digest in answer["seals"]
        ]
        if (
            not made
            and not conn.execute(
                "SELECT 1 FROM journal_seals WHERE first_seq > ? LIMIT 1", (last,)
            ).fetchone()
        ):
            return 0
        with write_transaction(conn):
            conn.execute("DELETE FROM journal_seals WHERE first_seq > ?", (last,))
            conn.executemany(
                f"INSERT INTO journal_seals ({SEAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (s.first_seq, s.last_seq, s.leaves, s.overflow, s.digest, s.mac) for s in made
                ],  # fmt: skip
            )
    except (PageError, sqlite3.Error, IthacaError, ValueError, TypeError):
        return 0
    return len(made)


# --- matching the seals against the pages --------------------------------------------------


def _match(
    checked: Checked, seals: list[Seal], key: bytes | None
) -> tuple[list[Seal], list[tuple[Seal, str]]]:
    """The seals that hold (their leaves in the journal's b-tree, in order, their bytes
    hashing to their digest, their MAC the key's), and the others with why: MOVED,
    CHANGED, SEAL_FORGED, or UNKEYED (sealed without this home's key). Seals must follow
    each other from seq 1; from the first that does not, the rest count as unsealed."""
    leaves = checked.leaves
    position: dict[int, int] | None = None
    broken: list[tuple[Seal, str]] = []
    placed: list[tuple[Seal, int]] = []
    at = 0  # in pages (4 bytes each)
    expected_first = 1
    for seal in seals:
        if seal.first_seq != expected_first or seal.last_seq < seal.first_seq:
            break
        expected_first = seal.last_seq + 1
        count = len(seal.leaves) // 4
        if count and leaves[4 * at : 4 * (at + count)] == seal.leaves:
            placed.append((seal, at))
            at += count
            continue
        if position is None:
            listed = journal_pages.unpack(leaves)
            position = {number: index for index, number in enumerate(listed)}
        found = position.get(_page_at(seal.leaves, 0), -1) if count else -1
        if found < at or leaves[4 * found : 4 * (found + count)] != seal.leaves:
            broken.append((seal, "MOVED"))
            continue
        placed.append((seal, found))
        at = found + count
    assert checked.pages is not None
    try:
        digests = checked.pages.ask(
            {"op": "digests",
             "seals": [[s.first_seq, s.last_seq, s.leaves.hex(), s.overflow.hex()]
                       for s, _ in placed]}
        )["digests"]  # fmt: skip
    except PageError:
        digests = [""] * len(placed)
    matched: list[Seal] = []
    for (seal, _), digest in zip(placed, digests, strict=True):
        why = None
        if digest != seal.digest:
            why = "CHANGED"
        elif key is not None:
            ours = anchor.sealed_by(key, seal.mac or "", _seal_message(seal.digest))
            if ours is False and seal.mac:
                why = "SEAL_FORGED"
            elif not ours:  # sealed without a key, or by another home's: re-derived
                why = "UNKEYED"
        if why is not None:
            broken.append((seal, why))
            continue
        matched.append(seal)
        checked.rows_by_pages += seal.last_seq - seal.first_seq + 1
    broken.sort(key=lambda item: item[0].first_seq)
    first_broken = broken[0][0].first_seq if broken else None
    for seal in matched:  # the prefix that holds, up to the first seal that did not
        if first_broken is not None and seal.first_seq > first_broken:
            break
        checked.prefix.append(seal)
    return matched, broken


def _seal_message(digest: str) -> bytes:
    return b"journal seal\n" + digest.encode("ascii")


# --- reading -------------------------------------------------------------------------------


def _open(checked: Checked, conn: sqlite3.Connection) -> bool:
    """Start the page reader and walk the journal's leaves; False (with the reason in
    ``pages_unreadable``) where the file cannot be read so, and every row is re-derived."""
    row = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'journal'").fetchone()
    if row is None:
        checked.pages_unreadable = "the database has no journal table"
        return False
    checked.root = int(row[0])
    try:
        checked.pages = Reader()
        checked.leaves = bytes.fromhex(
            checked.pages.ask({"op": "open", "db": checked.db_path, "root": checked.root})["leaves"]
        )
    except PageError as exc:
        checked.close()
        checked.pages_unreadable = str(exc)
        return False
    return True


class Reader:
    """The page reader (``kernel.journal_pages``) in a process of its own: this one keeps
    SQLite connections open, and a descriptor of the database file opened and closed
    beside them would drop their locks."""

    def __init__(self) -> None:
        try:
            self.process: subprocess.Popen[str] | None = subprocess.Popen(
                # By path, isolated and without site: the reader needs the standard
                # library only, and nothing from the project's folder or environment.
                [sys.executable, "-I", "-S", journal_pages.__file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError as exc:
            raise PageError(f"the page reader would not start ({exc})") from exc

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        process = self.process
        if process is None or process.stdin is None or process.stdout is None:
            raise PageError("the page reader has stopped")
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            answer = json.loads(process.stdout.readline() or "null")
        except (OSError, ValueError) as exc:
            raise PageError(f"the page reader stopped ({exc})") from exc
        if not isinstance(answer, dict):
            raise PageError("the page reader stopped")
        if "error" in answer:
            raise PageError(str(answer["error"]))
        return answer

    def close(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        finally:
            if process.stdout is not None:
                process.stdout.close()


def _seals(conn: sqlite3.Connection) -> list[Seal]:
    try:
        rows = conn.execute(f"SELECT {SEAL_COLUMNS} FROM journal_seals ORDER BY first_seq")
        found = [Seal(*row) for row in rows]
        for seal in found:  # page lists of whole 4-byte numbers, or no seal at all
            journal_pages.unpack(seal.leaves)
            journal_pages.unpack(seal.overflow)
        return found
    except (sqlite3.Error, PageError, TypeError):
        return []  # no table (an older schema) or a damaged one: every row is re-derived


def _page_at(packed: bytes, index: int) -> int:
    """The ``index``-th page number (negative from the end) of a packed page list."""
    start = 4 * index if index >= 0 else len(packed) + 4 * index
    return int.from_bytes(packed[start : start + 4], "big")


def _head_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
