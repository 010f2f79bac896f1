"""Anthropic's Messages API with SSE, as Claude Code speaks it to ``ANTHROPIC_BASE_URL``.

Requests without tools are side calls (titles, summaries). A request is the main agent's
when its first user message carries the prompt the test started the host with; any other
conversation with tools is a subagent's, since Claude Code starts each one with the
delegated prompt as its first message.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.hosts_real.scripted import Call, Reply, Say

_ids = itertools.count(1)


class MessagesWire:
    """The encoder a ``ScriptedModel`` uses for Claude Code."""

    def __init__(self) -> None:
        self.main_prompt = ""

    def lane(self, body: dict[str, Any]) -> str:
        if not body.get("tools"):
            return "side"
        messages = body.get("messages") or []
        first = _text_of(messages[0].get("content")) if messages else ""
        return "main" if self.main_prompt and self.main_prompt in first else "subagent"

    def shown_text(self, body: dict[str, Any]) -> str:
        """Everything the model reads as text: system prompt, messages, tool results."""
        parts = [_text_of(body.get("system"))]
        parts += [_text_of(message.get("content")) for message in body.get("messages") or []]
        return "\n".join(parts)

    def get(self, path: str) -> tuple[int, Any]:
        return 404, {"type": "error", "error": {"type": "not_found_error", "message": path}}

    def side_answer(self, path: str, body: dict[str, Any]) -> Any:
        if "count_tokens" in path:
            return {"input_tokens": 100}
        return None

    def events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        model = body.get("model", "scripted")
        usage = {"input_tokens": 10, "output_tokens": 1}
        out: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": f"msg_{next(_ids):06d}",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "usage": usage,
                    },
                },
            )
        ]
        for index, block in enumerate(reply):
            out += _block_events(index, block)
        stop = "tool_use" if any(isinstance(block, Call) for block in reply) else "end_turn"
        out.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
            )
        )
        out.append(("message_stop", {"type": "message_stop"}))
        return out


def tool_results(body: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    """``{tool_use_id: (is_error, text)}`` of every tool result in a request."""
    found: dict[str, tuple[bool, str]] = {}
    for message in body.get("messages") or []:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for item in content:
            if isinstance(item, dict) and item.get("type") == "tool_result":
                found[item["tool_use_id"]] = (
                    bool(item.get("is_error")),
                    _text_of(item.get("content")),
                )
    return found


def tool_uses(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{id: tool_use block}`` of every call the model made in a request's history."""
    found: dict[str, dict[str, Any]] = {}
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            for item in content:
                if isinstance(item, dict) and item.get("type") == "tool_use":
                    found[item["id"]] = item
    return found


def _block_events(index: int, block: Call | Say) -> list[tuple[str, dict[str, Any]]]:
    start: dict[str, Any]
    if isinstance(block, Say):
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block.text}
    else:
        start = {
            "type": "tool_use",
            "id": f"toolu_{next(_ids):06d}",
            "name": block.name,
            "input": {},
        }
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block.input)}
    return [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(item) for item in content)
    if isinstance(content, dict):
        if "text" in content:
            return str(content["text"])
        if "content" in content:
            return _text_of(content["content"])
    return ""
