"""Reading a validator's verdict file and deciding what the run proved.

Only a well-formed verdict counts, and a pass counts only from a process that also ended
cleanly: a validator that wrote ``pass`` and then crashed, timed out or was killed proved
nothing. Every other ending is ``pass=false, reason="malformed_verdict"`` with a ``cause``
saying which, decided by the first matching row of the classification table
(docs/ulysses.md, "Validators"), so a reader can tell a slow validator from a broken one
without parsing its output.

The verdict file is opened without following symlinks and only when it is a regular
file, so a validator cannot make the runner read some other file (or block on a FIFO).
"""

from __future__ import annotations

import json
import math
import os
import signal
import stat
from dataclasses import dataclass
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput

MAX_REASON_CHARS = 4096
MALFORMED = "malformed_verdict"
# Words a runtime prints when it runs out of memory (Python, V8, the C library).
OOM_MARKERS = ("MemoryError", "heap out of memory", "Cannot allocate memory")


@dataclass(frozen=True)
class Verdict:
    """A well-formed verdict: pass or fail, the reason (cut to 4096 characters), evidence."""

    passed: bool
    reason: str
    evidence: Any


@dataclass(frozen=True)
class Classification:
    """What one run proved: the ValidationResult's pass, reason, cause and evidence."""

    passed: bool
    reason: str
    cause: str | None
    evidence: Any


def read(path: str, max_bytes: int) -> Verdict | str:
    """The verdict at ``path``, or why there is none: ``no_verdict``, ``too_large`` or
    ``bad_json``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return "no_verdict"
    except OSError:  # a symlink (ELOOP) or a file made unreadable
        return "bad_json"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "bad_json"
        if info.st_size > max_bytes:
            return "too_large"
        data = os.read(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return "too_large"
    return parse(data)


def parse(data: bytes) -> Verdict | str:
    """A verdict from the file's bytes, or ``bad_json``."""
    try:
        value = json.loads(
            data.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "bad_json"
    if not isinstance(value, dict):
        return "bad_json"
    outcome, reason, evidence = value.get("verdict"), value.get("reason"), value.get("evidence")
    if outcome not in ("pass", "fail") or not isinstance(reason, str):
        return "bad_json"
    try:
        # Reason and evidence go into the evidence digest, so they need a canonical form.
        canon.canonical([reason, evidence])
    except (InvalidInput, RecursionError):
        return "bad_json"
    return Verdict(outcome == "pass", reason[:MAX_REASON_CHARS], evidence)


def classify(
    found: Verdict | str,
    *,
    exit_code: int | None,
    signal_number: int | None,
    timed_out: bool,
    cpu_exhausted: bool,
    stderr: str,
) -> Classification:
    """The first matching row of the classification table (docs/ulysses.md, "Validators").

    ``found`` is the verdict or why there is none; ``timed_out`` means the runner's wall
    clock ran out (the runner's own SIGKILL comes only after that); ``cpu_exhausted``
    means the process used its whole CPU allowance, so a SIGKILL was the CPU limit's."""
    if isinstance(found, Verdict) and not found.passed:
        return Classification(False, found.reason, None, found.evidence)
    if (
        timed_out
        or signal_number == signal.SIGXCPU
        or (signal_number == signal.SIGKILL and cpu_exhausted)
    ):
        return _malformed("timeout")
    abnormal = signal_number is not None or exit_code != 0
    if signal_number == signal.SIGKILL or (
        abnormal and any(marker in stderr for marker in OOM_MARKERS)
    ):
        return _malformed("oom")
    if signal_number is not None:
        return _malformed("signal")
    if exit_code != 0:
        return _malformed("crash")
    if isinstance(found, str):
        return _malformed(found)
    return Classification(True, found.reason, None, found.evidence)


def _malformed(cause: str) -> Classification:
    return Classification(False, MALFORMED, cause, None)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range")
    return number
