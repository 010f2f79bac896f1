"""Verdict helper for Ithaca validator cells written in Python (standard library only).

    from tb_validate import observed, pass_, fail
    data = observed()
    pass_("clean run") if data["errors"] == 0 else fail(f"{data['errors']} errors", data)

A run has one verdict: a second call, a reason that is not a string or evidence that is
not JSON raises, and the helper never exits the process. The verdict file appears whole
(written aside, then linked into place) and is never overwritten.

The helper reads and writes JSON through CPython's ``_json`` accelerator directly:
``import json`` also loads the regular-expression machinery, which would more than double
the start-up of a small validator. Whatever the fast path does not take is handed to
``json`` itself, so results and errors are ``json``'s.
"""

import os

try:
    import _json
except ImportError:  # another Python: json does all the work
    _json = None  # type: ignore[assignment]

__all__ = ["observed", "pass_", "passed", "fail"]

_written = False


def observed():
    """The observed data this run was given, as parsed JSON."""
    path = os.environ.get("ITHACA_OBSERVED_PATH") or os.environ["TB_OBSERVED_PATH"]
    with open(path, encoding="utf-8") as handle:
        return _loads(handle.read())


def pass_(reason, evidence=None):
    """Record a pass verdict with its reason and optional JSON evidence."""
    _write("pass", reason, evidence)


passed = pass_


def fail(reason, evidence=None):
    """Record a fail verdict with its reason and optional JSON evidence."""
    _write("fail", reason, evidence)


def _write(verdict, reason, evidence):
    global _written
    if _written:
        raise RuntimeError("tb_validate: a verdict was already written in this run")
    if not isinstance(reason, str):
        raise TypeError(f"tb_validate: reason must be a string, not {type(reason).__name__}")
    record = {"verdict": verdict, "reason": reason}
    if evidence is not None:
        record["evidence"] = evidence
    text = _dumps(record)
    path = os.environ.get("ITHACA_VERDICT_PATH") or os.environ["TB_VERDICT_PATH"]
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "x", encoding="utf-8") as handle:
        handle.write(text)
    try:
        os.link(temp, path)  # unlike a rename, never replaces a verdict already there
    except FileExistsError:
        raise RuntimeError("tb_validate: a verdict was already written in this run") from None
    finally:
        os.unlink(temp)
    _written = True


_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Decoding:
    """The settings ``_json.make_scanner`` reads, at ``json.loads``' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: "dict[str, str]" = {}  # quoted: a validator may run an older Python


def _loads(text):
    if _json is not None:
        start = len(text) - len(text.lstrip(" \t\n\r"))
        try:
            value, end = _json.make_scanner(_Decoding())(text, start)
        except Exception:  # not a JSON document: json raises its own error
            pass
        else:
            if not text[end:].strip(" \t\n\r"):
                return value
    import json

    return json.loads(text)


def _dumps(value):
    if _json is not None:
        encode = _json.make_encoder(
            {}, _refuse, _json.encode_basestring, None, ": ", ", ", False, False, False
        )
        try:
            return "".join(encode(value, 0))
        except Exception:  # no JSON form: json raises its own error
            pass
    import json

    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _refuse(value):
    raise TypeError(type(value).__name__)
