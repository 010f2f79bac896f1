"""How an Ithaca tool call refuses its input or fails, as the agent sees it over MCP.

The agent must read a stable code and the next step, never prose it has to guess at. Two
things in the ``mcp`` SDK stand in the way, so this module works around both:

- The SDK validates arguments with pydantic, which drops unknown fields silently and
  words its refusals in its own prose. Ithaca's tools therefore take the raw arguments,
  which each part checks itself (a flat tool against the very JSON Schema it publishes,
  ``ithaca.kernel.arguments``), so the published
  schema and the check cannot drift apart, and every refusal is ``INVALID_INPUT`` with
  ``details{pointer, problem}`` (DESIGN, Kernel contracts 9).
- A raised ``ToolError`` reaches the client as ``Error executing tool <name>: …``, which
  no longer parses as JSON. An error is therefore returned as an ``isError`` result whose
  text is exactly the JSON of ``{code, message, details}`` and whose structured content
  is the same object.

A storage fault (SQLite's or the system's: a full disk, a read-only file system, a
permission refused, a locked store) is answered the same way, under its own code
(``ithaca.kernel.storage_faults``). Any other exception is a bug, left to the SDK: it logs
it with its traceback and tells the client only that the tool failed.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import CallToolResult, TextContent

from ithaca.kernel import IthacaError, escape_pointer, invalid_field, storage_fault


def check_text(value: Any) -> None:
    """Refuse strings, keys included, that are not Unicode text (lone surrogates).

    JSON can carry them as escapes, but they cannot be stored or echoed back as UTF-8.
    """
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        pointer, item = pending.pop()
        if isinstance(item, str):
            _require_text(item, pointer)
        elif isinstance(item, dict):
            for key, child in item.items():
                child_pointer = f"{pointer}/{escape_pointer(key)}"
                _require_text(key, child_pointer)
                pending.append((child_pointer, child))
        elif isinstance(item, list):
            pending.extend((f"{pointer}/{index}", child) for index, child in enumerate(item))


def error_result(error: IthacaError) -> CallToolResult:
    """The tool answer for a coded error: its JSON as text and as structured content."""
    body = error.to_dict()
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )


def fault_result(exc: BaseException, database: str | None) -> CallToolResult | None:
    """The tool answer for a coded error, or for the storage fault an exception is (named
    with ``database``, the state database the call used); None for a bug."""
    fault = storage_fault(exc, database)
    if fault is not None:
        return error_result(fault)
    return error_result(exc) if isinstance(exc, IthacaError) else None


def _require_text(text: str, pointer: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        printable = pointer.encode("utf-8", "backslashreplace").decode("utf-8")
        raise invalid_field(
            printable, "INVALID_TEXT", f"{printable or 'the input'} holds a lone surrogate"
        ) from None
