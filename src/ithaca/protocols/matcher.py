"""Which protocols apply to an event, in bundle order, with the bundle's digest.

A selector key maps to one event field; a record matches when every key it sets holds a
non-null event value equal to the string or a member of the list (exact and
case-sensitive). An omitted key matches anything. Bundles are ordered by priority
descending, then id ascending, everywhere.

The PreToolUse hook asks for a bundle on every tool call, so ``BundleIndex`` does the
work once, when it is built. Each enabled record gets a bit in bundle order; per selector
key there is a bitset of records that do not set the key and a value → bitset map. A
match is then one AND per key, and the set bits read from the lowest upwards are the
bundle. Each record's canonical JSON is serialised up front, so the digest of a bundle
is one SHA-256 over the joined parts (valid RFC 8785, equal to ``canon.digest``); the
result is memoised by match mask. ``naive_match`` is the plain definition the index must
equal.
"""

from __future__ import annotations

from ithaca.kernel import canon
from ithaca.protocols.validate import HASHED_FIELDS, SELECTOR_KEYS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

BUNDLE_FIELDS = (*HASHED_FIELDS, "source")

# Distinct masks are bounded by what the records can tell apart, but events can carry
# many distinct user or task values; the memo starts over rather than grow without end.
MEMO_LIMIT = 4096


def selector_values(event: dict[str, Any]) -> dict[str, str | None]:
    """The seven selector keys' values for an event API object."""
    actor = event.get("actor") or {}
    context = event.get("context") or {}
    return {
        "connector": event.get("connector"),
        "messageKind": event.get("kind"),
        "userId": actor.get("id"),
        "clientId": context.get("clientId"),
        "projectId": context.get("projectId"),
        "workflow": context.get("workflow"),
        "task": context.get("task"),
    }


def matches(selector: dict[str, Any], values: dict[str, Any]) -> bool:
    """Whether an event with these selector values is covered by ``selector``."""
    return all(_key_matches(expected, values.get(key)) for key, expected in selector.items())


def mismatches(selector: dict[str, Any], values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every selector key that fails, as ``{key, expected, actual}``, in selector-key order."""
    return [
        {"key": key, "expected": selector[key], "actual": values.get(key)}
        for key in SELECTOR_KEYS
        if key in selector and not _key_matches(selector[key], values.get(key))
    ]


def naive_match(
    records: Iterable[dict[str, Any]], values: dict[str, Any]
) -> tuple[list[dict[str, Any]], str]:
    """The bundle by definition: enabled matching records in order, and their digest."""
    matched = [
        _bundle_record(record)
        for record in records
        if record["enabled"] and matches(record["selector"], values)
    ]
    matched.sort(key=_bundle_order)
    return matched, canon.digest(matched)


class BundleIndex:
    """Precompiled bundle lookup over a fixed set of effective records."""

    def __init__(self, records: Iterable[dict[str, Any]]):
        ordered = sorted(
            (_bundle_record(record) for record in records if record["enabled"]),
            key=_bundle_order,
        )
        self._records = tuple(ordered)
        self._parts = tuple(canon.canonical_text(record) for record in ordered)
        self._all = (1 << len(ordered)) - 1
        tables: dict[str, tuple[int, dict[str, int]]] = {}
        for key in SELECTOR_KEYS:
            wildcard = 0
            by_value: dict[str, int] = {}
            for position, record in enumerate(ordered):
                bit = 1 << position
                expected = record["selector"].get(key)
                if expected is None:
                    wildcard |= bit
                    continue
                for value in [expected] if isinstance(expected, str) else expected:
                    by_value[value] = by_value.get(value, 0) | bit
            if by_value:
                tables[key] = (wildcard, by_value)
        # Keys no record sets cannot narrow a match; they are left out of the AND.
        self._keys = tuple((key, wild, by_value) for key, (wild, by_value) in tables.items())
        self._memo: dict[int, tuple[tuple[dict[str, Any], ...], str]] = {}

    def __len__(self) -> int:
        return len(self._records)

    def match(self, values: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The bundle for these selector values, in order, and its digest."""
        mask = self._all
        for key, wildcard, by_value in self._keys:
            mask &= wildcard | by_value.get(values.get(key) or "", 0)
        found = self._memo.get(mask)
        if found is None:
            found = self._assemble(mask)
        return list(found[0]), found[1]

    def _assemble(self, mask: int) -> tuple[tuple[dict[str, Any], ...], str]:
        positions = []
        rest = mask
        while rest:
            lowest = rest & -rest
            positions.append(lowest.bit_length() - 1)
            rest ^= lowest
        body = ",".join(self._parts[position] for position in positions)
        digest = canon.sha256(f"[{body}]".encode()).hexdigest()
        found = (tuple(self._records[position] for position in positions), digest)
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
        self._memo[mask] = found
        return found


def _key_matches(expected: str | list[str], actual: object) -> bool:
    if actual is None:
        return False
    if isinstance(expected, str):
        return actual == expected
    return actual in expected


def _bundle_record(record: dict[str, Any]) -> dict[str, Any]:
    return {field: record[field] for field in BUNDLE_FIELDS}


def _bundle_order(record: dict[str, Any]) -> tuple[int, str]:
    return (-record["priority"], record["id"])
