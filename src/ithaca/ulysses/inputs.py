"""Strict input for the Ulysses operations (docs/ulysses.md, "The session").

Every operation's arguments are checked before anything else is read, so a malformed
call is refused the same way whatever state the session is in: unknown fields, wrong
types, blank required strings and oversize values are ``INVALID_INPUT`` with a JSON
pointer; ``observed`` and the fields ``complete`` needs have codes of their own. The
result is the validated command the state machine takes (defaults filled in, the host
``session`` field dropped: the hook fills it on every Ithaca tool call, and Ulysses state
is the project's, not a host session's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ithaca.kernel import canon, ids
from ithaca.kernel.errors import InvalidInput, invalid_field
from ithaca.ulysses.session import TERMINAL_STATES

OBSERVED_MAX_BYTES = 1024 * 1024
NOTE_DATA_MAX_BYTES = 64 * 1024
NOTE_KINDS = ("context", "observation", "evidence", "decision", "question")
ID_MAX_CHARS = 200

Checker = Callable[[Any, str], Any]
_ABSENT = object()


def _text(limit: int, *, blank_ok: bool = False) -> Checker:
    """A string of at most ``limit`` characters; blank only where ``blank_ok`` (a blank
    ``details`` or ``summary`` says nothing, a blank ``problem`` is no problem)."""

    def check(value: Any, pointer: str) -> str:
        if not isinstance(value, str):
            raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be a string")
        if not blank_ok and not value.strip():
            raise invalid_field(pointer, "EMPTY", f"{pointer[1:]} must not be blank")
        if len(value) > limit:
            raise invalid_field(
                pointer, "TOO_LONG", f"{pointer[1:]} is longer than {limit} characters"
            )
        return value

    return check


def _text_list(items: int, limit: int) -> Checker:
    item_check = _text(limit)

    def check(value: Any, pointer: str) -> list[str]:
        if not isinstance(value, list):
            raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be a list of strings")
        if len(value) > items:
            raise invalid_field(pointer, "TOO_MANY", f"{pointer[1:]} holds more than {items}")
        return [item_check(item, f"{pointer}/{index}") for index, item in enumerate(value)]

    return check


def _flag(value: Any, pointer: str) -> bool:
    if not isinstance(value, bool):
        raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be true or false")
    return value


def _choice(values: tuple[str, ...]) -> Checker:
    def check(value: Any, pointer: str) -> str:
        if value not in values:
            raise invalid_field(
                pointer, "NOT_ALLOWED", f"{pointer[1:]} must be one of {', '.join(values)}"
            )
        return str(value)

    return check


def _cell_ref(value: Any, pointer: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise invalid_field(
            pointer, "WRONG_TYPE", f"{pointer[1:]} must be an object {{notebookId, cellId}}"
        )
    return _fields(value, pointer, {"notebookId": _ID, "cellId": _ID})


def _observed(value: Any, pointer: str) -> Any:
    size = len(canon.canonical(value))
    if size > OBSERVED_MAX_BYTES:
        raise InvalidInput(
            "OBSERVED_TOO_LARGE",
            f"observed is {size} bytes as canonical JSON; the limit is {OBSERVED_MAX_BYTES}",
            {"pointer": pointer, "problem": "TOO_LARGE", "size": size, "limit": OBSERVED_MAX_BYTES},
        )
    return value


def _note_data(value: Any, pointer: str) -> Any:
    size = len(canon.canonical(value))
    if size > NOTE_DATA_MAX_BYTES:
        raise invalid_field(
            pointer, "TOO_LARGE", f"data is {size} bytes; the limit is {NOTE_DATA_MAX_BYTES}"
        )
    return value


_ID = _text(ID_MAX_CHARS)

_FINAL_BINDING: dict[str, tuple[Checker, Any]] = {
    "notebookId": (_ID, _ABSENT),
    "cellId": (_ID, _ABSENT),
    "observed": (_observed, None),  # the problem as it stands, for a judge cell
}
# Per operation: field -> (checker, default). ``_ABSENT`` marks a required field;
# ``None`` an optional one left out of the command when not given.
OPERATIONS: dict[str, dict[str, tuple[Checker, Any]]] = {
    "init": {
        "problem": (_text(4000), _ABSENT),
        "constraints": (_text_list(50, 1000), []),
        "supersede": (_flag, False),
    },
    "plan": {
        "primary": (_text(2000), _ABSENT),
        "recovery": (_text(2000), _ABSENT),
        "irreversible": (_flag, False),
        "primaryValidator": (_cell_ref, _ABSENT),
        "recoveryValidator": (_cell_ref, _ABSENT),
    },
    "outcome": {
        "observed": (_observed, _ABSENT),
        "details": (_text(8000, blank_ok=True), None),
    },
    "bind_final_validator": _FINAL_BINDING,
    "replace_final_validator": _FINAL_BINDING,
    "reflect": {
        "hypothesis": (_text(4000), _ABSENT),
        "falsification": (_text(4000), _ABSENT),
    },
    "note": {
        "thought": (_text(8000), _ABSENT),
        "kind": (_choice(NOTE_KINDS), "observation"),
        "data": (_note_data, None),
    },
    "status": {},
    "resume": {"session_id": (_ID, None)},
    "complete": {
        "terminalState": (_choice(TERMINAL_STATES), _ABSENT),
        "summary": (_text(8000, blank_ok=True), None),
        "observed": (_observed, None),
        "missing": (_text_list(50, 1000), None),
    },
    "rollback": {"label": (_ID, _ABSENT), "session_id": (_ID, None)},
}
COMMON_FIELDS = ("operation", "session")


def parse(arguments: Any) -> dict[str, Any]:
    """The validated command for ``{"operation": ..., ...}``; raises on any bad input."""
    if not isinstance(arguments, dict):
        raise invalid_field("", "WRONG_TYPE", "the arguments must be a JSON object")
    canon.canonical(arguments)  # values with no JSON form (NaN, huge integers, surrogates)
    operation = arguments.get("operation", _ABSENT)
    if operation is _ABSENT:
        raise invalid_field("/operation", "REQUIRED", "operation is required")
    if operation not in OPERATIONS:
        raise invalid_field(
            "/operation", "NOT_ALLOWED", f"operation must be one of {', '.join(OPERATIONS)}"
        )
    session = arguments.get("session")
    if session is not None and not ids.is_session_id(session):
        raise invalid_field(
            "/session", "WRONG_TYPE", "session is the host session id (letters, digits, _ and -)"
        )
    body = {key: value for key, value in arguments.items() if key not in COMMON_FIELDS}
    command = {"operation": operation, **_fields(body, "", OPERATIONS[operation])}
    if operation == "complete":
        _check_complete(command, body)
    return command


def _fields(value: dict[str, Any], pointer: str, rules: dict[str, Any]) -> dict[str, Any]:
    """Check an object against ``rules`` (field -> checker, or (checker, default))."""
    for name in value:
        if name not in rules:
            problem = "NOT_FOR_OPERATION" if _any_operation_has(name) else "UNKNOWN_FIELD"
            field_pointer = f"{pointer}/{name.replace('~', '~0').replace('/', '~1')}"
            raise invalid_field(field_pointer, problem, f"{name!r} is not a field here")
    checked: dict[str, Any] = {}
    for name, rule in rules.items():
        checker, default = rule if isinstance(rule, tuple) else (rule, _ABSENT)
        field_pointer = f"{pointer}/{name}"
        if name in value:
            checked[name] = checker(value[name], field_pointer)
        elif default is _ABSENT:
            raise invalid_field(field_pointer, "REQUIRED", f"{name} is required")
        elif default is not None:
            checked[name] = default
    return checked


def _any_operation_has(name: str) -> bool:
    return any(name in fields for fields in OPERATIONS.values())


def _check_complete(command: dict[str, Any], body: dict[str, Any]) -> None:
    terminal = command["terminalState"]
    if terminal != "resolved" and "observed" in body:
        raise invalid_field("/observed", "NOT_FOR_OPERATION", "observed is for resolved only")
    if terminal != "insufficient_information" and "missing" in body:
        raise invalid_field(
            "/missing", "NOT_FOR_OPERATION", "missing is for insufficient_information only"
        )
    if terminal == "resolved":
        if not (command.get("summary") or "").strip():
            raise InvalidInput(
                "SUMMARY_REQUIRED",
                "resolved needs a summary: the transferable lesson of this session",
                {"pointer": "/summary", "problem": "REQUIRED"},
            )
        if "observed" not in body:
            raise InvalidInput(
                "OBSERVED_REQUIRED",
                "resolved needs observed: the data the final validator judges",
                {"pointer": "/observed", "problem": "REQUIRED"},
            )
    if terminal == "insufficient_information" and not command.get("missing"):
        raise InvalidInput(
            "MISSING_LIST_REQUIRED",
            "insufficient_information needs missing: what information would settle it",
            {"pointer": "/missing", "problem": "REQUIRED"},
        )
