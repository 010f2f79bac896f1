"""A scripted model on loopback, for driving a real host binary with no network.

A host sends every model request to the endpoint its configuration names; this server
answers each one with the next step of a script, so a test decides exactly which tool
calls the real host makes, and keeps every request so the test can assert what the
model was shown (hook contexts, tool results, denials).

A script is a list of steps per *lane*: the main agent, its subagents (a conversation
that begins with a delegated prompt), and side calls (requests without tools, such as
titles), which are always answered with a short text. A step is a reply (a list of
blocks) or a function of the request that returns one, so ids the host hands out
(``evt_…``, session ids, nonces) can be templated into later calls.

The wire format of each API lives in its own module (``messages_api``,
``responses_api``); this one holds what they share.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EVENT_ID = re.compile(r"evt_[0-9A-HJKMNP-TV-Z]{26}")


@dataclass(frozen=True)
class Say:
    """A text block."""

    text: str


@dataclass(frozen=True)
class Call:
    """A tool call: ``name`` and its ``input`` (an object, or raw text for custom tools)."""

    name: str
    input: dict[str, Any] | str
    namespace: str | None = None


Block = Say | Call
Reply = list[Block]


@dataclass(frozen=True)
class WaitUntilShown:
    """A step that holds its place, answering ``meanwhile``, until the model has been shown
    ``text`` (a host that announces tools once its MCP server is up), at most ``tries``
    requests."""

    text: str
    meanwhile: Reply
    tries: int = 40


Step = Reply | Callable[["Request"], Reply] | WaitUntilShown


@dataclass
class Request:
    """One model request as the host sent it, with what the model was shown as text."""

    lane: str
    body: dict[str, Any]
    shown: str

    def event_id(self) -> str:
        """The newest ``evt_…`` id the model has been shown."""
        found: list[str] = EVENT_ID.findall(self.shown)
        assert found, "the model was never shown an admitted event id"
        return found[-1]

    def tool_names(self) -> list[str]:
        return [tool.get("name", "") for tool in self.body.get("tools") or []]


@dataclass
class Script:
    """The steps of each lane, consumed in order; a lane that runs out ends its turn."""

    main: list[Step]
    subagent: list[Step] = field(default_factory=list)
    final_text: str = "Finished."

    def next_reply(self, request: Request) -> Reply:
        queue = self.subagent if request.lane == "subagent" else self.main
        if not queue:
            return [Say(self.final_text)]
        step = queue[0]
        if isinstance(step, WaitUntilShown):
            if step.text not in request.shown and step.tries > 0:
                queue[0] = WaitUntilShown(step.text, step.meanwhile, step.tries - 1)
                return step.meanwhile
            queue.pop(0)
            return self.next_reply(request)
        queue.pop(0)
        return step(request) if callable(step) else step


class ScriptedModel:
    """The loopback server: a thread serving ``wire`` (one API's encoder) from a script."""

    def __init__(self, wire: Any):
        self.wire = wire
        self.requests: list[Request] = []
        self.script = Script(main=[])
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def play(self, script: Script) -> None:
        """Answer from ``script`` from now on, with a fresh record of requests."""
        with self._lock:
            self.script = script
            self.requests = []
            self.errors = []

    def lane(self, name: str) -> list[Request]:
        return [request for request in self.requests if request.lane == name]

    def answer(self, body: dict[str, Any]) -> Reply:
        """The reply to one request (serialised: a script is a sequence)."""
        with self._lock:
            request = Request(self.wire.lane(body), body, self.wire.shown_text(body))
            self.requests.append(request)
            if request.lane == "side":
                return [Say("Scripted title")]
            try:
                return self.script.next_reply(request)
            except Exception as exc:  # a broken step must fail the test, not hang the host
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return [Say(f"script error: {exc}")]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                status, payload = model.wire.get(self.path)
                self._send_json(status, payload)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send_json(400, {"error": "not JSON"})
                    return
                side = model.wire.side_answer(self.path, body)
                if side is not None:
                    self._send_json(200, side)
                    return
                events = model.wire.events(body, model.answer(body))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

            def _send_json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
