"""Canonical JSON at C speed for the ledger's bulk paths (10,000 records in well under 1 s).

``kernel.canon`` is written in Python; encoding every record body with it costs most of
a second per 10,000 records. CPython's C encoder, with sorted keys, no spaces and raw
UTF-8, writes exactly the RFC 8785 form for most values: strings are escaped by the very
function ``canon`` uses, integers print the same, and code-point key order equals
UTF-16 order. It differs only for floats (ECMAScript number formatting), integers beyond
±(2^53−1) (which ``canon`` refuses) and keys holding characters beyond U+FFFF (where
the two orders part). ``Reader`` parses JSON noting whether any of those can occur in
what it read; only for such values does ``canonical_text`` fall back to ``canon``. The
tests check the two against each other over generated values.
"""

from __future__ import annotations

import json
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.lightjson import encode_basestring, make_encoder


# ``json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)``, its C
# encoder made once rather than on every call. No cycle check: parsed JSON has no cycles.
def _no_json_form(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} has no JSON form")


_ENCODER = make_encoder(None, _no_json_form, encode_basestring, None, ":", ",", True, False, False)


# Every byte that cannot start a four-byte UTF-8 sequence (one beyond U+FFFF).
_BELOW_FOUR_BYTE_LEADS = bytes(range(0xF0))


class Reader:
    """Parses JSON texts; ``exact`` stays true while the C encoder's output for what was
    read is canonical JSON (no float, no unsafe integer, nothing beyond U+FFFF)."""

    def __init__(self) -> None:
        self.exact = True
        self._decoder = json.JSONDecoder(parse_float=self._float, parse_int=self._int)

    def load(self, text: str) -> Any:
        # A character beyond U+FFFF, raw or escaped as a surrogate pair.
        if "\\ud" in text or "\\uD" in text or (not text.isascii() and max(text) > "\uffff"):
            self.exact = False
        return self._decoder.decode(text)

    def load_bytes(self, data: bytes) -> Any:
        """``load`` for a whole UTF-8 file: a raw character beyond U+FFFF is found by its
        lead byte (0xF0 and up), far faster than ``max`` over megabytes of text."""
        text = data.decode("utf-8")
        escaped = "\\u" in text and ("\\ud" in text or "\\uD" in text)  # one scan, mostly
        if escaped or data.translate(None, _BELOW_FOUR_BYTE_LEADS):
            self.exact = False
        return self._decoder.decode(text)

    def _float(self, text: str) -> float:
        self.exact = False
        return float(text)

    def _int(self, text: str) -> int:
        number = int(text)
        if not -canon.MAX_SAFE_INTEGER <= number <= canon.MAX_SAFE_INTEGER:
            self.exact = False
        return number


def canonical_text(value: Any, exact: bool) -> str:
    """``canon.canonical_text(value)``, through the C encoder when ``exact``."""
    return "".join(_ENCODER(value, 0)) if exact else canon.canonical_text(value)
