"""Canonical JSON (RFC 8785, the JSON Canonicalization Scheme) and SHA-256 digests.

Every digest Ithaca stores is SHA-256 over these bytes, so two processes, two machines
or two releases that hold the same value agree on its digest. The standard library has
no JCS encoder and the hook path may not import third-party code, so this is a small
one; the tests check it against the ``rfc8785`` package as an oracle.

Ithaca narrows the scheme in one way: integers beyond ±(2^53−1) and non-finite numbers
are refused with ``INVALID_INPUT`` (``NUMBER_OUT_OF_RANGE``), because a JavaScript
reader could not hold them exactly.
"""

from __future__ import annotations

from ithaca.kernel.errors import InvalidInput
from ithaca.kernel.lightjson import encode_basestring

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_SAFE_INTEGER = 2**53 - 1

_escape_string = encode_basestring

# CPython's own SHA-256 module, as ``hashlib`` falls back to it: loading OpenSSL through
# ``hashlib`` is one of the larger costs of a hook process, and digests here are small.
if TYPE_CHECKING:
    from hashlib import sha256  # the same interface; the private modules have no stubs
else:
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # Python 3.12+
        except ImportError:
            from hashlib import sha256


def canonical(value: Any) -> bytes:
    """The RFC 8785 encoding of ``value`` as UTF-8 bytes."""
    parts: list[str] = []
    try:
        _encode(value, parts)
        return "".join(parts).encode("utf-8")
    except _Unencodable as exc:
        pointer = "".join(f"/{step}" for step in reversed(exc.path))
        problem, message = exc.args
    except UnicodeEncodeError:
        pointer = _surrogate_pointer(value, "") or ""
        problem, message = "INVALID_STRING", "a string holds a lone surrogate (no UTF-8 form)"
    raise InvalidInput(
        "INVALID_INPUT", f"{pointer or '/'}: {message}", {"pointer": pointer, "problem": problem}
    )


def canonical_text(value: Any) -> str:
    return canonical(value).decode("utf-8")


def digest(value: Any) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of ``value``."""
    return sha256(canonical(value)).hexdigest()


LARGE_INPUT = 1 << 20


def digest_bytes(data: bytes) -> str:
    """Lowercase hex SHA-256 of raw bytes (files, blobs, prompts). Inputs of a megabyte or
    more go through ``hashlib`` (OpenSSL), several times faster on large data; it is
    imported only then, so hooks keep to the built-in module."""
    if len(data) >= LARGE_INPUT:
        import hashlib

        return hashlib.sha256(data).hexdigest()
    return sha256(data).hexdigest()


def digest_excluding(value: dict[str, Any], key: str) -> str:
    """The digest of an object that carries its own digest under ``key``."""
    return digest({k: v for k, v in value.items() if k != key})


class _Unencodable(Exception):
    """A value with no canonical form; ``path`` collects the JSON pointer on the way out."""

    def __init__(self, problem: str, message: str):
        super().__init__(problem, message)
        self.path: list[str] = []


def _encode(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_escape_string(value))
    elif isinstance(value, int):
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise _out_of_range()
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(_format_number(value))
    elif isinstance(value, dict):
        keys = list(value)
        if not all(isinstance(key, str) for key in keys):
            raise _Unencodable("INVALID_KEY", "object keys must be strings")
        # Code-point order equals UTF-16 order unless a key holds a character beyond U+FFFF.
        keys.sort(key=None if all(key.isascii() for key in keys) else _utf16_order)
        out.append("{")
        for index, key in enumerate(keys):
            if index:
                out.append(",")
            out.append(_escape_string(key))
            out.append(":")
            try:
                _encode(value[key], out)
            except _Unencodable as exc:
                exc.path.append(escape_pointer(key))
                raise
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            try:
                _encode(item, out)
            except _Unencodable as exc:
                exc.path.append(str(index))
                raise
        out.append("]")
    else:
        raise _Unencodable("INVALID_TYPE", f"{type(value).__name__} has no JSON form")


def _surrogate_pointer(value: Any, pointer: str) -> str | None:
    """Where the first string without a UTF-8 form sits (only walked after a failure)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return pointer
        return None
    if isinstance(value, dict):
        items = [(f"{pointer}/{escape_pointer(k)}", k, v) for k, v in value.items()]
        for child, key, item in items:
            found = _surrogate_pointer(key, child) or _surrogate_pointer(item, child)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _surrogate_pointer(item, f"{pointer}/{index}")
            if found is not None:
                return found
    return None


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def escape_pointer(key: str) -> str:
    """``key`` as one JSON Pointer reference token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _out_of_range() -> _Unencodable:
    return _Unencodable(
        "NUMBER_OUT_OF_RANGE", "number out of range (finite, integers within ±(2^53−1))"
    )


def _format_number(number: float) -> str:
    """ECMAScript ``Number.prototype.toString`` for a finite double."""
    import math  # floats are rare in what hooks encode

    if not math.isfinite(number):
        raise _out_of_range()
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    # Position of the decimal point relative to the start of ``digits``.
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = all_digits.lstrip("0")
    point -= len(all_digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * (-point) + digits
    else:
        power = point - 1
        sign_e = "+" if power >= 0 else "-"
        head = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{head}e{sign_e}{abs(power)}"
    return sign + text
