"""Keeping a Context Envelope within its byte budget, and the cursors that page past cuts.

An envelope must fit an agent's context whatever the project holds: at most 16,384
canonical bytes for ``summary`` and 65,536 for ``full`` (docs/delivery.md, "context").
Compaction runs passes of growing severity until the envelope fits: (1) limit nesting
depth, string length and array length; (2) cap the three paged lists (evidence, decisions,
checkpoints) and hand out cursors for the rest; (3) cut strings and arrays harder;
(4) replace the paged lists by their counts, cursors starting at zero, and every other
list inside a section (contract criteria, declared files, refs) by its count too; only
the diagnostics keep their items, cut as in the summary's pass 3. A cut string ends
``…[+N]`` (N characters left out), a cut array ends with an ``…[+N]`` item, a container
below the depth limit becomes ``…[+N]`` (N members). String limits are counted in bytes
of canonical JSON, so a string of escapes or wide characters cannot outgrow its cut.

A cursor is ``base64url(canonical({section, offset, digest}))``: the envelope digest pins
the authority it was cut from, so a cursor used after that authority moved is
``CURSOR_STALE`` rather than a page of some other list.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from ithaca.delivery.contract import validation_error
from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict
from ithaca.kernel.lightjson import encode_basestring

PAGED = ("evidence", "decisions", "checkpoints")
MAX_CURSOR_CHARS = 512


@dataclass(frozen=True)
class Pass:
    depth: int
    chars: int
    items: int
    caps: dict[str, int] | None = None
    counts: bool = False


@dataclass(frozen=True)
class Budget:
    limit: int
    passes: tuple[Pass, ...]


_SUMMARY_CAPS = {"evidence": 6, "decisions": 8, "checkpoints": 8}
_FULL_CAPS = {"evidence": 30, "decisions": 30, "checkpoints": 20}
# The last pass keeps diagnostics as items, cut as hard as the summary's pass 3.
DIAGNOSTICS_LAST = Pass(4, 240, 6)
BUDGETS = {
    "summary": Budget(
        16_384,
        (
            Pass(4, 500, 12),
            Pass(4, 500, 12, _SUMMARY_CAPS),
            Pass(4, 240, 6, _SUMMARY_CAPS),
            Pass(4, 240, 6, _SUMMARY_CAPS, counts=True),
        ),
    ),
    "full": Budget(
        65_536,
        (
            Pass(7, 4000, 100),
            Pass(7, 4000, 100, _FULL_CAPS),
            Pass(7, 1000, 20, _FULL_CAPS),
            Pass(7, 1000, 20, _FULL_CAPS, counts=True),
        ),
    ),
}


def compact(envelope: dict[str, Any], detail: str) -> tuple[dict[str, Any], int] | None:
    """``(fitted envelope, pass number)`` — pass 0 when it fits uncut — or None when even
    the last pass does not fit."""
    budget = BUDGETS[detail]
    if size(envelope) <= budget.limit:
        return envelope, 0
    for number, rule in enumerate(budget.passes, start=1):
        fitted = _apply(envelope, rule)
        if size(fitted) <= budget.limit:
            return fitted, number
    return None


def page(items: list[Any], offset: int, detail: str, limit: int) -> tuple[list[Any], int]:
    """Items from ``offset`` cut like the last pass, as many as fit in ``limit`` bytes (at
    most the pass-2 cap): ``(items, next offset)``."""
    rule = BUDGETS[detail].passes[-1]
    taken: list[Any] = []
    used = 0
    cap = max(rule.caps.values()) if rule.caps else rule.items
    for item in items[offset : offset + cap]:
        cut = _cut(item, 2, rule)
        used += len(canon.canonical(cut)) + 1
        if taken and used > limit:
            break
        taken.append(cut)
    return taken, offset + len(taken)


def size(value: Any) -> int:
    return len(canon.canonical(value))


def encode_cursor(section: str, offset: int, digest: str) -> str:
    raw = canon.canonical({"section": section, "offset": offset, "digest": digest})
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, int, str]:
    """``(section, offset, digest)`` of a cursor; ``VALIDATION_ERROR`` when malformed."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, binascii.Error) as exc:
        raise validation_error("/cursor", "WRONG_FORMAT", "is not a context cursor") from exc
    if (
        not isinstance(value, dict)
        or set(value) != {"section", "offset", "digest"}
        or value["section"] not in PAGED
        or not isinstance(value["offset"], int)
        or isinstance(value["offset"], bool)
        or value["offset"] < 0
        or not isinstance(value["digest"], str)
    ):
        raise validation_error("/cursor", "WRONG_FORMAT", "is not a context cursor")
    return value["section"], value["offset"], value["digest"]


def require_current(cursor_digest: str, digest: str) -> None:
    if cursor_digest != digest:
        raise Conflict(
            "CURSOR_STALE",
            "the context changed since this cursor was issued; ask for the context again",
            {"cursor_digest": cursor_digest, "digest": digest},
        )


def _apply(envelope: dict[str, Any], rule: Pass) -> dict[str, Any]:
    digest = envelope["digest"]
    cursors: dict[str, str] = {}
    fitted: dict[str, Any] = {}
    for name, value in envelope.items():
        if name in PAGED and isinstance(value, list):
            fitted[name] = _paged(name, value, rule, digest, cursors)
        elif name in ("id", "digest"):
            fitted[name] = value
        elif name == "diagnostics":
            fitted[name] = _cut(value, 1, DIAGNOSTICS_LAST if rule.counts else rule)
        else:
            fitted[name] = _cut(value, 1, rule)
    if cursors:
        fitted["cursors"] = cursors
    return fitted


def _paged(name: str, items: list[Any], rule: Pass, digest: str, cursors: dict[str, str]) -> Any:
    if rule.counts:
        if items:
            cursors[name] = encode_cursor(name, 0, digest)
        return {"count": len(items)}
    shown = min(rule.items, (rule.caps or {}).get(name, rule.items))
    if len(items) > shown:
        cursors[name] = encode_cursor(name, shown, digest)
    return [_cut(item, 2, rule) for item in items[:shown]]


def _cut(value: Any, level: int, rule: Pass) -> Any:
    """``value`` with containers nested past ``rule.depth``, long strings and long arrays
    cut; ``level`` is the nesting level ``value`` would occupy if it is a container."""
    if isinstance(value, str):
        return cut_string(value, rule.chars)
    if isinstance(value, dict):
        if level > rule.depth:
            return f"…[+{len(value)}]"
        return {key: _cut(item, level + 1, rule) for key, item in value.items()}
    if isinstance(value, list):
        if level > rule.depth or (rule.counts and level > 1):
            return f"…[+{len(value)}]"
        kept = [_cut(item, level + 1, rule) for item in value[: rule.items]]
        if len(value) > rule.items:
            kept.append(f"…[+{len(value) - rule.items}]")
        return kept
    return value


def cut_string(text: str, limit: int) -> str:
    """``text`` kept whole if its canonical form (quotes aside) has at most ``limit``
    bytes, else its longest prefix within ``limit`` bytes followed by ``…[+N]``."""
    if len(text) * 6 <= limit or _encoded_size(text) <= limit:
        return text
    used = 0
    for index, char in enumerate(text):
        used += _encoded_size(char)
        if used > limit:
            return f"{text[:index]}…[+{len(text) - index}]"
    return text


def _encoded_size(text: str) -> int:
    return len(encode_basestring(text).encode("utf-8", "surrogatepass")) - 2
