"""Hook faults in the real hosts (issue 25): what a hook cannot read, and a store another
process holds, are refused, never waved through.

A host runs the call when its hook fails (exit 1, a traceback) or outlasts its timeout.
So here the scripted model (a) calls Ithaca's ``record`` with a ``data`` object nested far
deeper than the hook's JSON decoder goes, and (b) calls for a new file while a helper
process holds the store's write lock; each call is refused, with the code, and has no
effect.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from tests.hosts_real.claude_host import ClaudeHost
from tests.hosts_real.host import Host
from tests.hosts_real.scripted import Reply, Request, Say, Script

# Deeper than CPython's JSON decoder goes in the hook (about a thousand levels), and well
# within what the host parses and forwards.
DEPTH = 1500
# Holds the store's write lock until told to let go (a line on its stdin).
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@pytest.fixture
def deep_json() -> Iterator[None]:
    """Room in this process (the scripted model encodes and reads the deep argument) for
    nesting that the hook's decoder, at its default limit, cannot follow."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, 20 * DEPTH))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth - 1):
        value = {"n": value}
    return value


def deep_decision(depth: int) -> dict[str, Any]:
    return {
        "kind": "decision",
        "action": "accept",
        "idempotency_key": "dec-deep",
        "data": {
            "scope": {"baseline": True},
            "question": "Which database?",
            "recommendation": "SQLite: one file, no server.",
            "selection": {"choice": "sqlite", "rationale": "single-user tool"},
            "owner": "team",
            "notes": nested(depth),
        },
    }


def test_a_tool_call_the_hook_cannot_read_is_refused(claude: ClaudeHost, deep_json: None):
    run = claude.run(
        "Record a decision",
        Script(
            main=[
                *claude.protocols_loaded(),
                claude.tool("record", {"entries": [deep_decision(DEPTH)]}),
            ]
        ),
    )
    assert run.exit_code == 0, run.stderr
    refused = run.call("ithaca:record")
    print("\nSHOWN-A:", repr(refused.text), refused.is_error)
    assert refused.is_error, refused.text
    assert "HOOK_INPUT_UNREADABLE" in refused.text, refused.text
    assert "RecursionError" in refused.text  # nesting too deep, said so
    log = [event["kind"] for event in claude.log()]
    assert "delivery.decision_accepted" not in log
    assert not list((claude.repo / ".ithaca" / "decisions").rglob("*.json"))
    tickets = claude.state().execute("SELECT tool FROM mcp_call_tickets").fetchall()
    assert [tool for (tool,) in tickets] == ["load_protocols"]  # record never reached it
    shown = "\n".join(request.shown for request in claude.model.requests)
    debug = run.debug_log.read_text() if run.debug_log.exists() else ""
    for text in (refused.text, shown, run.stderr, debug):
        assert "Traceback" not in text


class LockHolder:
    """A process holding the store's write lock from the model's call until the model is
    shown that call's outcome."""

    def __init__(self, host: Host):
        self.db = host.repo / ".ithaca" / ".runtime" / "state.db"
        self.process: subprocess.Popen[str] | None = None
        self.held_when_answered: bool | None = None

    def take(self, reply: Reply) -> Any:
        def step(request: Request) -> Reply:
            self.process = subprocess.Popen(
                [sys.executable, "-c", HOLDER, str(self.db)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert self.process.stdout is not None
            assert self.process.stdout.readline() == "held\n"
            return reply

        return step

    def release_after_answer(self, request: Request) -> Reply:
        self.held_when_answered = self.process is not None and self.process.poll() is None
        self.release()
        return [Say("Finished.")]

    def release(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write("\n")
            self.process.stdin.close()
            self.process.wait(timeout=30)


def test_a_write_is_denied_while_another_process_holds_the_store(host: Host):
    holder = LockHolder(host)
    try:
        run = host.run(
            "Write hello into notes.txt",
            Script(
                main=[
                    *host.protocols_loaded(),
                    holder.take(host.write("notes.txt", "hello\n")),
                    holder.release_after_answer,
                ]
            ),
        )
    finally:
        holder.release()
    assert run.exit_code == 0, run.stderr
    assert holder.held_when_answered is True  # the answer came while the lock was held
    assert holder.process is not None and holder.process.returncode == 0
    refused = run.call("write")
    print("\nSHOWN-B:", type(host).__name__, repr(refused.text), refused.is_error)
    assert "STORE_LOCKED" in refused.text, refused.text
    assert "locked by another process" in refused.text
    assert not (host.repo / "notes.txt").exists()
