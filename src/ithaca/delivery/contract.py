"""The common tool contract every delivery tool shares (docs/delivery.md, "Advisory or refused").

Semantic gaps are answers, not failures: a tool reports them as diagnostics
``{code, severity, message, subject?}`` and still does its work. Errors are kept for the
hard cases (malformed input, corrupt authority, unsafe paths, real conflicts, forbidden
transitions) and always leave the state as it was. Schema violations name the offending
field by JSON pointer from the root of the request, so an agent can fix exactly that.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict, InvalidInput, IthacaError

SEVERITIES = ("info", "warning", "needs_attention", "hard_conflict")
MAX_REQUEST_BYTES = 1024 * 1024
MAX_ENTRIES = 50

Diagnostic = dict[str, Any]


def diagnostic(code: str, severity: str, message: str, subject: str | None = None) -> Diagnostic:
    """One diagnostic in the shared shape."""
    if severity not in SEVERITIES:
        raise ValueError(f"unknown severity {severity!r}")
    found: Diagnostic = {"code": code, "severity": severity, "message": message}
    if subject is not None:
        found["subject"] = subject
    return found


def validation_error(pointer: str, problem: str, message: str) -> InvalidInput:
    """``InvalidInput`` ``VALIDATION_ERROR`` naming the field by JSON pointer."""
    return InvalidInput(
        "VALIDATION_ERROR",
        f"{pointer or '/'}: {message}",
        {"pointer": pointer, "problem": problem},
    )


def check_request_size(arguments: Any) -> None:
    """Refuse a request over 1 MiB of canonical JSON (also refuses unencodable numbers)."""
    size = len(canon.canonical(arguments))
    if size > MAX_REQUEST_BYTES:
        raise validation_error(
            "", "TOO_LARGE", f"the request is {size} bytes; at most {MAX_REQUEST_BYTES} are taken"
        )


def under(prefix: str, error: IthacaError) -> IthacaError:
    """The same error with its pointer placed under ``prefix`` (an entry's ``data``)."""
    pointer = error.details.get("pointer")
    if not isinstance(pointer, str):
        return error
    full = prefix + pointer
    message = error.message
    if pointer and message.startswith(pointer + ":"):
        message = full + message[len(pointer) :]
    elif not pointer and message.startswith("/:"):
        message = full + message[1:]
    return type(error)(error.code, message, {**error.details, "pointer": full})


def check_expected_revision(expected: int | None, actual: int, subject: str) -> None:
    """``REVISION_CONFLICT`` when the caller's ``expected_revision`` is not the current one."""
    if expected is not None and expected != actual:
        raise Conflict(
            "REVISION_CONFLICT",
            f"{subject} is at revision {actual}, not {expected}; read it again and retry",
            {"subject": subject, "expected": expected, "actual": actual},
        )
