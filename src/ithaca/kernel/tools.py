"""How a part publishes an MCP tool: one record per tool, which the MCP server reads.

A part lists its tool records in its manifest (``MCP_TOOLS``). Every tool is called the
same way: the server finds the part's service on the open project (``service``, an
attribute of ``ithaca.app.IthacaProject``), hands its method (``method``) the tool's
argument object, which the part checks itself, and turns the JSON object it answers, or
the ``IthacaError`` it raises, into the tool's result. The published ``schema`` describes
the arguments for clients; the part stays the one judge of what it accepts.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class ToolSpec(NamedTuple):
    """One MCP tool a part brings."""

    name: str
    title: str | None  # None keeps tools/list small where a budget asks for it
    description: str
    schema: dict[str, Any]
    read_only: bool
    service: str
    method: str


SESSION_PROPERTY: dict[str, Any] = {
    "type": "string",
    "description": "The host session id; Ithaca fills it in, so leave it out.",
}
ANY_JSON: dict[str, Any] = {"description": "Any JSON value."}
