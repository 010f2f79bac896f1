"""The notebook operations' arguments, checked strictly and alike for every caller.

Every ``NotebookService`` operation takes its raw arguments through ``checked``, so the MCP
tool, the CLI and the Python API refuse the same things with the same codes: an unknown
field is ``INVALID_INPUT`` (``UNKNOWN_FIELD``), a wrong type ``WRONG_TYPE``. Every
operation accepts ``session`` (the host session id Ithaca's hook fills in) and ignores it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput, invalid_field
from ithaca.validators import cells, runner
from ithaca.validators.runtimes import LANGUAGES

MAX_TITLE = 200
MAX_SOURCE_BYTES = 256 * 1024
MAX_OBSERVED_BYTES = 1024 * 1024
KINDS = ("code", "markdown")

_Check = Callable[[str, Any], None]


def _text(pointer: str, value: Any) -> None:
    if not isinstance(value, str):
        raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_field(
            pointer, "INVALID_TEXT", f"{pointer[1:]} holds a lone surrogate"
        ) from None


def one_of(*allowed: str) -> _Check:
    """A check that the value is one of the ``allowed`` strings."""

    def check(pointer: str, value: Any) -> None:
        _text(pointer, value)
        if value not in allowed:
            raise invalid_field(
                pointer, "NOT_ALLOWED", f"{pointer[1:]} must be one of {', '.join(allowed)}"
            )

    return check


def _language(pointer: str, value: Any) -> None:
    _text(pointer, value)
    if value not in LANGUAGES:
        raise InvalidInput(
            "LANGUAGE_UNSUPPORTED",
            f"{value!r} is not a validator language; use one of {', '.join(LANGUAGES)}",
            {"pointer": pointer, "language": value, "supported": list(LANGUAGES)},
        )


def _title(pointer: str, value: Any) -> None:
    _text(pointer, value)
    if not 1 <= len(value) <= MAX_TITLE:
        raise invalid_field(pointer, "OUT_OF_RANGE", f"title is 1 to {MAX_TITLE} characters")
    if not value.strip():
        raise invalid_field(pointer, "BLANK", "title needs more than whitespace")
    if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in value):
        raise invalid_field(pointer, "CONTROL_CHARACTER", "title is one line of text")


def _source(pointer: str, value: Any) -> None:
    _text(pointer, value)
    if len(value.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise invalid_field(pointer, "TOO_LONG", "source is at most 256 KiB of UTF-8")


def _version(pointer: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_field(pointer, "WRONG_TYPE", "version must be a whole number")
    if not 1 <= value <= canon.MAX_SAFE_INTEGER:
        raise invalid_field(pointer, "OUT_OF_RANGE", "versions start at 1")


def _timeout(pointer: str, value: Any) -> None:
    """A positive number of seconds, or null for the configured ``validators.timeout_s``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid_field(pointer, "WRONG_TYPE", "timeout_s must be a number of seconds")
    if not 0 < value <= 3600:
        raise invalid_field(pointer, "OUT_OF_RANGE", "timeout_s is above 0, at most 3600")


def _observed(pointer: str, value: Any) -> None:
    """Anything with a canonical JSON form of at most 1 MiB (``OBSERVED_TOO_LARGE``)."""
    size = len(runner.canonical_observed(value))
    if size > MAX_OBSERVED_BYTES:
        raise InvalidInput(
            "OBSERVED_TOO_LARGE",
            f"observed is {size} bytes of canonical JSON; the limit is {MAX_OBSERVED_BYTES}",
            {"pointer": pointer, "problem": "TOO_LARGE", "size": size, "limit": MAX_OBSERVED_BYTES},
        )


# operation -> field -> (check, required)
FIELDS: dict[str, dict[str, tuple[_Check, bool]]] = {
    "create": {"title": (_title, True), "language": (_language, False)},
    "add_cell": {
        "notebookId": (_text, True),
        "source": (_source, True),
        "language": (_language, False),
        "kind": (one_of(*KINDS), False),
        "filename": (_text, False),
        "mode": (one_of(*cells.MODES), False),
        "timeout_s": (_timeout, False),
    },
    "update_cell": {
        "notebookId": (_text, True),
        "cellId": (_text, True),
        "source": (_source, False),
        "language": (_language, False),
        "filename": (_text, False),
        "mode": (one_of(*cells.MODES), False),
        "timeout_s": (_timeout, False),
    },
    "get": {
        "notebookId": (_text, True),
        "cellId": (_text, False),
        "version": (_version, False),
    },
    "list": {},
    "run_cell": {
        "notebookId": (_text, True),
        "cellId": (_text, True),
        "observed": (_observed, True),
        "version": (_version, False),
    },
    "export": {"notebookId": (_text, True)},
}
OPERATIONS = tuple(FIELDS)


def checked(operation: str, arguments: Any) -> dict[str, Any]:
    """``arguments`` for ``operation`` once every field has its type; ``session`` is
    accepted (as a string) and dropped."""
    if not isinstance(arguments, dict):
        raise invalid_field("", "WRONG_TYPE", "the arguments must be an object")
    fields = FIELDS[operation]
    for name, value in arguments.items():
        pointer = "/" + str(name).replace("~", "~0").replace("/", "~1")
        if name == "session":
            _text(pointer, value)
        elif name not in fields:
            raise invalid_field(
                pointer, "UNKNOWN_FIELD", f"{name!r} is not a field of notebook {operation}"
            )
        else:
            fields[name][0](pointer, value)
    for name, (_, required) in fields.items():
        if required and name not in arguments:
            raise invalid_field(f"/{name}", "REQUIRED", f"notebook {operation} needs {name}")
    return {name: value for name, value in arguments.items() if name != "session"}
