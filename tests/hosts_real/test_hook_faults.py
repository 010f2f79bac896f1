"""Hook faults in the real hosts (issue 25, docs/hooks.md "Host timeouts"), verified in
Claude Code 2.1.332 and Codex 0.169.0 (``tools/package.json``): input the hook cannot read,
and a store another process holds, are refused, never waved through.

A host runs the call when its hook fails (exit 1, a traceback) or outlasts its timeout.

- The model calls Ithaca's ``record`` with an ``event`` whose ``payload`` (a free JSON
  object, journalled as it is given) nests 1500 levels deep. Claude Code forwards it to the
  hook as it is, deeper than the hook's JSON decoder goes (about a thousand levels): the
  hook answers ``HOOK_INPUT_UNREADABLE`` (exit 2), Claude Code blocks the call. Codex parses
  a function call's arguments with a depth limit of its own (serde_json's 128: arguments
  nested 127 levels reach the hook as an object, 128 and deeper as their raw text, seen at
  depths 123/124 of this payload): so the hook's decoder is never reached through Codex,
  and the hook refuses the call because ``tool_input`` is a string, not an object.
- A helper process holds the store's write lock (``BEGIN IMMEDIATE``) from the model's
  ``Write`` (``apply_patch`` on Codex) until the model has been shown its outcome: the
  hook stops at its deadline and denies it with ``STORE_LOCKED``, naming the holder.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.hosts_real.claude_host import ClaudeHost, ClaudeRun
from tests.hosts_real.codex_host import CodexHost
from tests.hosts_real.host import Host
from tests.hosts_real.scripted import Reply, Request, Say, Script, Step

# Far deeper than CPython's JSON decoder goes in the hook (about a thousand levels).
DEPTH = 1500
# What each host's hook was fed, as the refusal says: the nesting itself (Claude Code), or
# the arguments as text, which Codex would not parse so deep.
UNREADABLE = {
    "claude": "HOOK_INPUT_UNREADABLE: it is not JSON (RecursionError: maximum recursion depth "
    "exceeded while decoding a JSON object",
    "codex": "HOOK_INPUT_UNREADABLE: tool_input is a JSON str, not an object",
}
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
    """Room in this process, whose scripted model encodes the deep argument and reads it
    back in the host's next request, for nesting the hook's decoder cannot follow."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, 20 * DEPTH))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def nested(depth: int) -> dict[str, Any]:
    """A JSON object ``depth`` levels deep."""
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth - 1):
        value = {"n": value}
    return value


def deep_note(depth: int) -> dict[str, Any]:
    """``record``'s arguments: an event whose free payload nests ``depth`` levels (at a
    shallow depth it is committed as ``observation.note``)."""
    data = {"type": "note", "payload": nested(depth)}
    entry = {"kind": "event", "action": "append", "idempotency_key": "deep-1", "data": data}
    return {"entries": [entry]}


def test_a_tool_call_the_hook_cannot_read_is_refused(host: Host, deep_json: None):
    run = host.run(
        "Record a note",
        Script(main=[*host.protocols_loaded(), host.tool("record", deep_note(DEPTH))]),
    )
    assert run.exit_code == 0, run.stderr
    refused = run.call("ithaca:record")
    assert UNREADABLE[host.name] in refused.text, refused.text
    assert "the call is refused so that it cannot run unchecked" in refused.text
    if isinstance(host, ClaudeHost):
        assert refused.is_error and "PreToolUse:mcp__ithaca__record hook error" in refused.text
    else:
        assert refused.text.startswith("Tool call blocked by PreToolUse hook: "), refused.text
    # Neither the hook nor the server did anything with it: the journal ends with the
    # loaded protocols, and only load_protocols left (and claimed) a ticket.
    kinds = [event["kind"] for event in host.log()]
    assert kinds[-1] == "protocols.bundle_loaded", kinds
    assert not any(kind.startswith("observation.") for kind in kinds)
    tickets = host.state().execute("SELECT tool FROM mcp_call_tickets").fetchall()
    assert [tool for (tool,) in tickets] == ["load_protocols"]
    seen = [refused.text, run.stderr, *(request.shown for request in host.model.requests)]
    if isinstance(run, ClaudeRun) and run.debug_log.exists():
        seen.append(run.debug_log.read_text())
    assert not [text for text in seen if "Traceback" in text]


class LockHolder:
    """A process holding the store's write lock from the model's call until the model has
    been shown that call's outcome."""

    def __init__(self, host: Host):
        self.db = host.repo / ".ithaca" / ".runtime" / "state.db"
        self.process: subprocess.Popen[str] | None = None
        self.held_when_answered: bool | None = None

    def then(self, reply: Reply) -> Step:
        """A step that takes the lock, then makes ``reply``'s call."""

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

    def release_once_shown(self, request: Request) -> Reply:
        """The step answering the request that shows the model the call's outcome."""
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
                    holder.then(host.write("notes.txt", "hello\n")),
                    holder.release_once_shown,
                ]
            ),
        )
    finally:
        holder.release()
    assert run.exit_code == 0, run.stderr
    assert holder.held_when_answered is True  # the host had its answer while it was held
    assert holder.process is not None and holder.process.returncode == 0  # then it committed
    refused = run.call("write")
    assert "Ithaca failed closed" in refused.text, refused.text
    assert "(STORE_LOCKED: the store is locked by another process" in refused.text
    if Path("/proc/locks").exists():  # where the system lists its locks: who holds it
        assert f"(pid {holder.process.pid})" in refused.text
    if isinstance(host, CodexHost):
        assert refused.text.startswith("Command blocked by PreToolUse hook: "), refused.text
    else:
        assert refused.is_error and refused.text.startswith("PreToolUse:Write hook error: ")
    assert not (host.repo / "notes.txt").exists()
