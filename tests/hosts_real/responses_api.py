"""OpenAI's Responses API with SSE, as Codex speaks it to a custom provider's base URL.

Codex sends one ``POST /v1/responses`` per model turn, with the conversation as ``input``
items; a shell call is a ``function_call`` named ``exec_command``, ``apply_patch`` a
``custom_tool_call``, and an MCP tool a ``function_call`` with the server's ``namespace``.
A subagent (``spawn_agent`` under ``multi_agent_v2``) is told its task by an
``agent_message`` addressed to its own task path (``/root/<task_name>``), while the parent
only receives messages addressed to ``/root``: that is how a request's lane is told.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.hosts_real.scripted import Call, Reply, Say

_ids = itertools.count(1)


class ResponsesWire:
    """The encoder a ``ScriptedModel`` uses for Codex."""

    main_prompt = ""

    def lane(self, body: dict[str, Any]) -> str:
        for item in body.get("input") or []:
            if item.get("type") == "agent_message" and item.get("recipient") != "/root":
                return "subagent"
        return "main"

    def shown_text(self, body: dict[str, Any]) -> str:
        parts = [str(body.get("instructions") or "")]
        for item in body.get("input") or []:
            parts.append(_text_of(item.get("content")) if "content" in item else "")
            if "output" in item:
                parts.append(_text_of(item["output"]))
        return "\n".join(parts)

    def get(self, path: str) -> tuple[int, Any]:
        return 404, {"error": {"message": f"not found: {path}"}}

    def side_answer(self, path: str, body: dict[str, Any]) -> Any:
        if not path.split("?")[0].endswith("/responses"):
            return {"error": {"message": "not found"}}
        return None

    def events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        response_id = f"resp_{next(_ids):06d}"
        items = [_item(block) for block in reply]
        out: list[tuple[str, dict[str, Any]]] = []
        for index, item in enumerate(items):
            out.append(("response.output_item.added", _event("added", index, item)))
            out.append(("response.output_item.done", _event("done", index, item)))
        completed = {
            "type": "response.completed",
            "response": {
                "id": response_id,
                "object": "response",
                "status": "completed",
                "output": items,
                "usage": {
                    "input_tokens": 10,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 5,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 15,
                },
            },
        }
        created = {"type": "response.created", "response": {"id": response_id, "output": []}}
        return [("response.created", created), *out, ("response.completed", completed)]


def call_outputs(body: dict[str, Any]) -> dict[str, str]:
    """``{call_id: output text}`` of every tool result in a request."""
    return {
        item["call_id"]: _text_of(item.get("output"))
        for item in body.get("input") or []
        if item.get("type", "").endswith("_output") and "call_id" in item
    }


def _event(kind: str, index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": f"response.output_item.{kind}", "output_index": index, "item": item}


def _item(block: Call | Say) -> dict[str, Any]:
    number = next(_ids)
    if isinstance(block, Say):
        return {
            "type": "message",
            "id": f"msg_{number:06d}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": block.text, "annotations": []}],
        }
    item: dict[str, Any] = {"id": f"fc_{number:06d}", "call_id": f"call_{number:06d}"}
    if block.name == "tool_search":  # Codex runs the search itself, as a client tool
        item.update(type="tool_search_call", execution="client", arguments=block.input)
    elif isinstance(block.input, str):
        item.update(type="custom_tool_call", name=block.name, input=block.input)
    else:
        item.update(type="function_call", name=block.name, arguments=json.dumps(block.input))
    if block.namespace:
        item["namespace"] = block.namespace
    item["status"] = "completed"
    return item


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        return str(content.get("text") or content.get("output") or "")
    return ""
