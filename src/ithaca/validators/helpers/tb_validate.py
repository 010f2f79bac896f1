"""Verdict helper for Ithaca validator cells written in Python (standard library only).

    from tb_validate import observed, pass_, fail
    data = observed()
    pass_("clean run") if data["errors"] == 0 else fail(f"{data['errors']} errors", data)

A run has one verdict: a second call, a reason that is not a string or evidence that is
not JSON raises, and the helper never exits the process. The verdict file appears whole
(written aside, then linked into place) and is never overwritten.
"""

import json
import os

__all__ = ["observed", "pass_", "passed", "fail"]

_written = False


def observed():
    """The observed data this run was given, as parsed JSON."""
    path = os.environ.get("ITHACA_OBSERVED_PATH") or os.environ["TB_OBSERVED_PATH"]
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


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
    text = json.dumps(record, ensure_ascii=False, allow_nan=False)
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
