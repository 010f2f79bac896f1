"""A small JSON Schema dialect, its constructors and its checker.

Delivery's input schemas are plain JSON Schema dictionaries (so the top level can be
published in ``tools/list`` as it is), written with the constructors below and checked by
``check``, which returns the value normalised: defaults filled and sets sorted. A fixed
normal form matters because the idempotency digest is taken over it: two requests that
mean the same thing must digest the same.

Supported keywords: ``type`` (one name or a list), ``enum``, ``const``,
``minLength``/``maxLength`` (characters), ``pattern`` (matched against the whole
string, so a trailing newline never slips past ``$``), ``minimum``/``maximum``, ``items``,
``minItems``/``maxItems``, ``properties``, ``required``, ``additionalProperties: false``,
``minProperties``, ``default`` and ``oneOf`` over object shapes, chosen by which
alternative's required fields are present. Two extensions: ``x-set`` (an array of
strings kept sorted and without duplicates) and ``x-exclusive`` (fields that may not be
given together). The project does not depend on ``jsonschema``, and this subset is all
delivery needs.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any

from ithaca.delivery.contract import validation_error
from ithaca.kernel.errors import InvalidInput

Schema = dict[str, Any]

_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


# --- constructors -----------------------------------------------------------------------


def obj(
    required: dict[str, Schema] | None = None,
    optional: dict[str, Schema] | None = None,
    **keywords: Any,
) -> Schema:
    """A strict object: unknown fields are refused."""
    properties = {**(required or {}), **(optional or {})}
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    schema.update(keywords)
    return schema


def text(max_length: int, min_length: int = 1, **keywords: Any) -> Schema:
    return {"type": "string", "minLength": min_length, "maxLength": max_length, **keywords}


def array(items: Schema, max_items: int, **keywords: Any) -> Schema:
    return {"type": "array", "items": items, "maxItems": max_items, **keywords}


def string_set(items: Schema, max_items: int) -> Schema:
    """An array of strings treated as a set: sorted and de-duplicated when checked."""
    return {"type": "array", "items": items, "maxItems": max_items, "x-set": True}


def nullable(schema: Schema) -> Schema:
    """The schema, also accepting ``null`` (a merge patch's "delete this field")."""
    found = {key: value for key, value in schema.items() if key != "default"}
    if "oneOf" in found:
        return {"oneOf": [*found["oneOf"], {"type": "null"}]}
    kinds = found.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        found["type"] = [*names, "null"]
    return found


def merge_patch_of(body: Schema) -> Schema:
    """The schema of an RFC 7396 merge patch over objects checked by ``body``: every field
    optional and nullable, nested objects patched field by field, unknown fields refused."""
    properties = {}
    for name, field in body["properties"].items():
        nested = merge_patch_of(field) if _is_strict_object(field) else field
        properties[name] = nullable(nested)
    return obj(optional=properties)


def _is_strict_object(schema: Schema) -> bool:
    return schema.get("type") == "object" and "properties" in schema


# --- checker ----------------------------------------------------------------------------

# The problems one check found, in the order the value was walked.
Found = list[InvalidInput]


def check(schema: Schema, value: Any, pointer: str = "") -> Any:
    """``value`` normalised, or ``InvalidInput`` ``VALIDATION_ERROR`` listing every problem
    (``details.problems``, each with its JSON pointer; the first is also ``details.pointer``
    and ``details.problem``), so a caller can fix them all at once."""
    found: Found = []
    checked = _check(schema, value, pointer, found)
    if not found:
        return checked
    if len(found) == 1:
        raise found[0]
    first = found[0]
    listed = [{**problem.details, "message": problem.message} for problem in found]
    raise InvalidInput(
        "VALIDATION_ERROR",
        f"{len(found)} problems: " + "; ".join(problem.message for problem in found),
        {
            "pointer": first.details["pointer"],
            "problem": first.details["problem"],
            "problems": listed,
        },
    )


def _check(schema: Schema, value: Any, pointer: str, found: Found) -> Any:
    if "oneOf" in schema:
        return _check_one_of(schema["oneOf"], value, pointer, found)
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is_type(value, name) for name in names):
            return _problem(found, value, pointer, "WRONG_TYPE", f"expected {' or '.join(names)}")
    if "const" in schema and not _same(value, schema["const"]):
        return _problem(found, value, pointer, "NOT_ALLOWED", f"must be {schema['const']!r}")
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        options = ", ".join(str(option) for option in schema["enum"])
        return _problem(found, value, pointer, "NOT_ALLOWED", f"must be one of {options}")
    if isinstance(value, str):
        _check_string(schema, value, pointer, found)
    elif _is_type(value, "number"):
        _check_number(schema, value, pointer, found)
    elif isinstance(value, list):
        return _check_array(schema, value, pointer, found)
    elif isinstance(value, dict):
        return _check_object(schema, value, pointer, found)
    return value


def _problem(found: Found, value: Any, pointer: str, problem: str, message: str) -> Any:
    """Note a problem at ``pointer``; the value is returned as it came (it is never used)."""
    found.append(validation_error(pointer, problem, message))
    return value


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _PYTHON_TYPES[name])


def _same(value: Any, expected: Any) -> bool:
    return type(value) is type(expected) and value == expected


def _check_string(schema: Schema, value: str, pointer: str, found: Found) -> None:
    if len(value) < schema.get("minLength", 0):
        if not value:
            _problem(found, value, pointer, "TOO_SHORT", "must not be empty")
        else:
            minimum = schema["minLength"]
            _problem(found, value, pointer, "TOO_SHORT", f"must be at least {minimum} characters")
    elif "maxLength" in schema and len(value) > schema["maxLength"]:
        maximum = schema["maxLength"]
        _problem(found, value, pointer, "TOO_LONG", f"must be at most {maximum} characters")
    elif "pattern" in schema and _pattern(schema["pattern"]).fullmatch(value) is None:
        _problem(found, value, pointer, "WRONG_FORMAT", f"must match {schema['pattern']}")


def _check_number(schema: Schema, value: float, pointer: str, found: Found) -> None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        _problem(found, value, pointer, "OUT_OF_RANGE", f"must lie within [{low}, {high}]")


def _check_array(schema: Schema, value: list[Any], pointer: str, found: Found) -> list[Any]:
    if len(value) < schema.get("minItems", 0):
        minimum = schema["minItems"]
        _problem(found, value, pointer, "TOO_FEW_ITEMS", f"needs at least {minimum} items")
        return value
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        maximum = schema["maxItems"]
        _problem(found, value, pointer, "TOO_MANY_ITEMS", f"takes at most {maximum} items")
        return value
    items = schema.get("items")
    checked = [
        item if items is None else _check(items, item, f"{pointer}/{index}", found)
        for index, item in enumerate(value)
    ]
    if schema.get("x-set") and all(isinstance(item, str) for item in checked):
        return sorted(set(checked))
    return checked


def _check_object(
    schema: Schema, value: dict[str, Any], pointer: str, found: Found
) -> dict[str, Any]:
    properties: dict[str, Schema] | None = schema.get("properties")
    if properties is None:
        return value
    if schema.get("additionalProperties") is False:
        for name in sorted(value):
            if name not in properties:
                here = _child(pointer, name)
                _problem(found, value, here, "UNKNOWN_FIELD", f"{name!r} is not a field here")
    for name in schema.get("required", ()):
        if name not in value:
            _problem(found, value, _child(pointer, name), "MISSING_FIELD", "is required")
    if len(value) < schema.get("minProperties", 0):
        fields = ", ".join(sorted(properties))
        _problem(found, value, pointer, "TOO_FEW_FIELDS", f"give at least one of {fields}")
    for group in schema.get("x-exclusive", ()):
        given = [name for name in group if name in value]
        if len(given) > 1:
            here = _child(pointer, given[1])
            _problem(
                found, value, here, "CONFLICTING_FIELDS", f"give {' or '.join(group)}, not both"
            )
    checked: dict[str, Any] = {}
    for name, field in properties.items():
        if name in value:
            checked[name] = _check(field, value[name], _child(pointer, name), found)
        elif "default" in field:
            checked[name] = copy.deepcopy(field["default"])
    return checked


def _check_one_of(options: list[Schema], value: Any, pointer: str, found: Found) -> Any:
    """Choose the object shape whose required fields are present, then check against it;
    the problems reported are those of the first candidate shape."""
    if value is None and any(option.get("type") == "null" for option in options):
        return None
    if not isinstance(value, dict):
        return _problem(found, value, pointer, "WRONG_TYPE", "expected object")
    shapes = [option for option in options if option.get("type") == "object"]
    candidates = [s for s in shapes if all(name in value for name in s.get("required", ()))]
    if not candidates:
        described = " | ".join("{" + ", ".join(s.get("required", ())) + "}" for s in shapes)
        return _problem(found, value, pointer, "NO_MATCHING_SHAPE", f"expected one of {described}")
    first_problems: Found | None = None
    matches = []
    for shape in candidates:
        own: Found = []
        checked = _check(shape, value, pointer, own)
        if own:
            first_problems = own if first_problems is None else first_problems
        else:
            matches.append(checked)
    if len(matches) == 1:
        return matches[0]
    if first_problems is not None and not matches:
        found.extend(first_problems)
        return value
    return _problem(found, value, pointer, "AMBIGUOUS_SHAPE", "matches more than one shape")


def _child(pointer: str, name: str) -> str:
    return f"{pointer}/{name.replace('~', '~0').replace('/', '~1')}"


@lru_cache(maxsize=64)
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)
