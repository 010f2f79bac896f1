"""JSON for hook processes, on CPython's ``_json`` accelerator alone.

``import json`` also imports ``re`` (with ``enum`` and the regular-expression compiler)
for its pure-Python fallbacks; on a slow machine that is a third of a bare interpreter
start, paid on every hook call. The C scanner and encoder ``json`` itself runs are in
``_json``, so this module drives them directly with ``json``'s default settings: the same
values in, the same text out. Anything the fast path does not accept (bad input, a value
with no JSON form, bytes) is handed to ``json`` itself, imported only then, so errors are
exactly ``json``'s (``json.JSONDecodeError`` is a ``ValueError``). Without ``_json`` (another
Python implementation) ``json`` does all the work.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# What ``json`` skips around a document, and the constants it reads as floats.
WHITESPACE = " \t\n\r"
CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}

try:
    from _json import encode_basestring, encode_basestring_ascii, make_encoder, make_scanner

    ACCELERATED = True
except ImportError:  # pragma: no cover - CPython always builds it
    from json.encoder import encode_basestring, encode_basestring_ascii

    ACCELERATED = False


class _DecoderSettings:
    """The attributes ``_json.make_scanner`` reads from a ``json.JSONDecoder``, at the
    values ``json.loads`` uses by default."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = CONSTANTS.__getitem__
    memo: dict[str, str] = {}


# The stub types the context as a scanner; the C code only reads the attributes above.
_scan = make_scanner(_DecoderSettings()) if ACCELERATED else None  # type: ignore[arg-type]


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``."""
    if _scan is not None and isinstance(text, str):
        start = len(text) - len(text.lstrip(WHITESPACE))
        try:
            value, end = _scan(text, start)
        except Exception:  # not a JSON document: json raises the error it would raise
            pass
        else:
            if not text[end:].lstrip(WHITESPACE):
                return value
    import json

    return json.loads(text)


def dumps(
    value: Any,
    *,
    ensure_ascii: bool = True,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """``json.dumps(value, ensure_ascii=…, separators=…, sort_keys=…)``."""
    if ACCELERATED:
        item_separator, key_separator = separators or (", ", ": ")
        encode = make_encoder(
            {},  # markers: circular references are refused, as json does by default
            _no_json_form,
            encode_basestring_ascii if ensure_ascii else encode_basestring,
            None,  # indent
            key_separator,
            item_separator,
            sort_keys,
            False,  # skipkeys
            True,  # allow_nan
        )
        try:
            return "".join(encode(value, 0))
        except Exception:  # json raises the error it would raise
            pass
    import json

    return json.dumps(value, ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys)


def _no_json_form(value: object) -> object:
    raise TypeError(type(value).__name__)
