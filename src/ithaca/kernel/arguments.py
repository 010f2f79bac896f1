"""Checking a tool's arguments against the flat JSON Schema it publishes.

A part whose tool takes a flat object checks the raw arguments against the very schema
it publishes, so the published schema and the check cannot drift apart, and every refusal
is ``INVALID_INPUT`` with ``details{pointer, problem}`` (DESIGN, Kernel contracts 9).
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.canon import escape_pointer
from ithaca.kernel.errors import invalid_field

# The JSON Schema types Ithaca's tool schemas use, and the Python values that satisfy them.
_SCHEMA_TYPES: dict[str, type] = {"string": str, "boolean": bool}


def check_arguments(arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    """Refuse ``arguments`` that the flat object ``schema`` does not allow.

    The schema uses ``properties`` (each with an optional ``type`` and ``enum``),
    ``required`` and ``additionalProperties: false``; that is all Ithaca publishes.
    """
    properties = schema["properties"]
    for name, value in arguments.items():
        pointer = "/" + escape_pointer(name)
        rule = properties.get(name)
        if rule is None:
            raise invalid_field(pointer, "UNKNOWN_FIELD", f"{name!r} is not a field of this tool")
        expected = rule.get("type")
        if expected is not None and not isinstance(value, _SCHEMA_TYPES[expected]):
            raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be a {expected}")
        allowed = rule.get("enum")
        if allowed is not None and value not in allowed:
            raise invalid_field(
                pointer, "NOT_ALLOWED", f"{pointer[1:]} must be one of {', '.join(allowed)}"
            )
    for name in schema.get("required", ()):
        if name not in arguments:
            raise invalid_field("/" + escape_pointer(name), "REQUIRED", f"{name} is required")
