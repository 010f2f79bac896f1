"""Identifiers: a prefix, an underscore and a ULID (48-bit milliseconds + 80 random bits).

The ULID layout makes ids sort by creation time while staying unguessable, which an
event id that authorises a bundle needs. The random part comes from ``os.urandom``, the
source ``secrets`` uses, without that module's import cost on the hook path. Ids are
checked with string methods rather than ``re``, which hooks do not import.
"""

from __future__ import annotations

import os
import time

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID_CHARS = frozenset(CROCKFORD)
_SESSION_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def ulid(epoch_ms: int | None = None) -> str:
    """26 Crockford base32 characters: 10 for the time, 16 for the randomness."""
    ms = time.time_ns() // 1_000_000 if epoch_ms is None else epoch_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    return _encode(value, 26)


def new(prefix: str) -> str:
    """A new id such as ``evt_01J9Z3V6Q2X8M4K7T1R5B0C9DE``."""
    return f"{prefix}_{ulid()}"


def is_session_id(value: object) -> bool:
    """Whether ``value`` can name a host session (DESIGN, Kernel contracts 4)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 200
        and all(char in _SESSION_ID_CHARS for char in value)
    )


def derived(prefix: str, seed: str, length: int = 8) -> str:
    """A short id computed from ``seed``: callers that share the seed agree on the id."""
    from ithaca.kernel.canon import sha256

    value = int.from_bytes(sha256(seed.encode("utf-8")).digest(), "big") >> (256 - 5 * length)
    return f"{prefix}_{_encode(value, length)}"


def matches(prefix: str, value: object) -> bool:
    """Whether ``value`` is a well-formed id with this prefix."""
    head = f"{prefix}_"
    return (
        isinstance(value, str)
        and len(value) == len(head) + 26
        and value.startswith(head)
        and all(char in _ULID_CHARS for char in value[len(head) :])
    )


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, index = divmod(value, 32)
        chars.append(CROCKFORD[index])
    return "".join(reversed(chars))
