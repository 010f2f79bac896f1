"""How a part publishes an MCP tool: one record per tool, which the MCP server reads.

A part lists its tool records in its manifest (``MCP_TOOLS``). Every tool is called the
same way: the server finds the part's service on the open project (``service``, an
attribute of ``ithaca.app.IthacaProject``), hands its method (``method``) the tool's
argument object, which the part checks itself, and turns the JSON object it answers, or
the ``IthacaError`` it raises, into the tool's result. The published ``schema`` describes
the arguments for clients; the part stays the one judge of what it accepts.

``output`` describes the structured result. It is an open object schema (no ``required``,
no ``additionalProperties: false``) that types the top-level fields the tool's answers
carry, because an operation-style tool answers each operation in its own shape, and
because the same schema must also hold for a refusal's ``{code, message, details}``:
clients built on the TypeScript SDK 1.x validate a tool error's structured content
against the output schema too. ``tests/mcp/test_surface.py`` validates real answers of
every tool against it, refusals included.

The hints are the MCP tool annotations (spec defaults: not read-only, destructive, not
idempotent, open world); the server publishes those that differ from them. ``destructive``
means a call may delete or overwrite something so that it cannot be taken back;
``idempotent`` that repeating a call with the same arguments changes nothing more (no
new row, file or journal event). Every Ithaca tool works on the project's own state, so
none is open-world.

tools/list is read into the agent's context on every request, so the records stay lean
(all thirteen tools within 12 KiB, ``tests/mcp/test_surface.py``): descriptions say what
a tool is for and leave each operation's method to the part's skill; a part whose
service checks requests against a deeper schema publishes its ``outline``; and the
``session`` the server fills in from the hook's ticket (``takes_session``) is not
published, since an agent never sets it.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class ToolSpec(NamedTuple):
    """One MCP tool a part brings."""

    name: str
    title: str
    description: str
    schema: dict[str, Any]
    output: dict[str, Any]
    read_only: bool
    destructive: bool
    idempotent: bool
    service: str
    method: str
    takes_session: bool = False


# Any JSON value, spelt so that clients see a type (a bare {} is flagged as untyped).
ANY_JSON: dict[str, Any] = {
    "anyOf": [
        {"type": "object"},
        {"type": "array"},
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
    ]
}
STRING: dict[str, Any] = {"type": "string"}
INTEGER: dict[str, Any] = {"type": "integer"}
BOOLEAN: dict[str, Any] = {"type": "boolean"}
OBJECT: dict[str, Any] = {"type": "object"}
ARRAY: dict[str, Any] = {"type": "array"}


def with_session(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as its service accepts it: with the ``session`` the server fills in."""
    return {**schema, "properties": {**schema["properties"], "session": STRING}}


# The keywords an outline keeps of each top-level property: what the value is, not the
# limits the service checks.
_OUTLINE_KEYWORDS = ("type", "enum", "const", "anyOf")


def outline(schema: dict[str, Any]) -> dict[str, Any]:
    """The top level of an object schema, each property typed but not constrained (no
    patterns, lengths or nested fields): what tools/list carries of a request that the
    service checks against ``schema`` in full (docs/architecture.md, "The MCP surface")."""
    published: dict[str, Any] = {
        "type": "object",
        "properties": {
            name: _outlined(rule)
            for name, rule in schema["properties"].items()
            if name != "session"
        },
    }
    if schema.get("required"):
        published["required"] = schema["required"]
    published["additionalProperties"] = False
    return published


def _outlined(rule: dict[str, Any]) -> dict[str, Any]:
    kept = {key: rule[key] for key in _OUTLINE_KEYWORDS if key in rule}
    if "anyOf" in kept:
        kept["anyOf"] = [_outlined(branch) for branch in kept["anyOf"]]
    if rule.get("type") == "array" and "items" in rule:
        kept["items"] = _outlined(rule["items"])
    return kept


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null."""
    return {"anyOf": [schema, {"type": "null"}]}


def result_schema(**fields: dict[str, Any]) -> dict[str, Any]:
    """The output schema of a tool whose answers carry ``fields`` (an open object)."""
    return {"type": "object", "properties": fields}
