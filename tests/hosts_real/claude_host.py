"""The real Claude Code binary, run headless in a scratch home against the scripted model.

Each test gets a home of its own (user settings, credentials-free) and a Git repository
with ``ithaca init`` and ``ithaca install claude`` applied, exactly as a user would set
them up. As root, Claude Code refuses ``--dangerously-skip-permissions``, so runs use
``--permission-mode acceptEdits`` and the user-level allow rules of the test home
(project allow rules are ignored while a workspace is untrusted, project hooks and
``enableAllProjectMcpServers`` are honoured).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.hosts_real.binaries import host_binary, run_ithaca
from tests.hosts_real.messages_api import MessagesWire, tool_results, tool_uses
from tests.hosts_real.scripted import Call, Reply, Request, Script, ScriptedModel

# The user's own permission rules in the test home: what a user who lets the agent work
# on its own would allow. Ithaca's MCP tools are allowed one by one, so a test can leave
# one out and see the user's rule still apply.
DEFAULT_ALLOW = (
    "Bash",
    "Edit",
    "Write",
    "Read",
    "Agent",
    "Task",
    "mcp__ithaca",
)


@dataclass
class ClaudeRun:
    """What one ``claude -p`` run printed and what its model was asked."""

    exit_code: int
    events: list[dict[str, Any]]
    stderr: str
    model: ScriptedModel
    debug_log: Path

    @property
    def session_id(self) -> str:
        return next(event["session_id"] for event in self.events if "session_id" in event)

    def hook_responses(self, event: str | None = None) -> list[dict[str, Any]]:
        return [
            item
            for item in self.events
            if item.get("subtype") == "hook_response"
            and (event is None or item.get("hook_event") == event)
        ]

    def results(self) -> list[tuple[str, bool, str]]:
        """Each tool call the main agent made, in order: (tool name, is_error, result text)
        as the model was shown them in the last request of the run."""
        last = self.model.lane("main")[-1].body
        uses, results = tool_uses(last), tool_results(last)
        return [
            (use["name"], *results.get(use_id, (True, "<no result>")))
            for use_id, use in uses.items()
        ]

    def result_of(self, name: str, nth: int = 0) -> tuple[bool, str]:
        """``(is_error, text)`` of the ``nth`` call to tool ``name``."""
        matching = [(error, text) for tool, error, text in self.results() if tool == name]
        assert len(matching) > nth, f"no call {nth} of {name}: {self.results()}"
        return matching[nth]

    def final(self) -> dict[str, Any]:
        return next(item for item in reversed(self.events) if item.get("type") == "result")


class ClaudeHost:
    """A scratch home and repository wired to the real Claude Code and a scripted model."""

    def __init__(self, root: Path, model: ScriptedModel, ithaca: Path):
        self.binary = host_binary("claude")
        self.home = root / "home"
        self.repo = root / "repo"
        self.model = model
        self.ithaca = ithaca
        self.home.mkdir()
        self.repo.mkdir()
        self.user_settings(allow=DEFAULT_ALLOW)
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.repo)], check=True)
        subprocess.run(
            ["git", "-C", str(self.repo), "commit", "-q", "--allow-empty", "-m", "start"],
            check=True,
            env=self.env(),
        )

    def user_settings(self, *, allow: tuple[str, ...], **extra: Any) -> None:
        """The test user's ``~/.claude/settings.json``."""
        folder = self.home / ".claude"
        folder.mkdir(exist_ok=True)
        settings = {"permissions": {"allow": list(allow)}, "enableAllProjectMcpServers": True}
        settings.update(extra)
        (folder / "settings.json").write_text(json.dumps(settings, indent=2))

    def env(self) -> dict[str, str]:
        keep = {name: os.environ[name] for name in ("PATH", "LANG", "TMPDIR") if name in os.environ}
        return {
            **keep,
            "HOME": str(self.home),
            "ITHACA_HOME": str(self.home / ".ithaca"),
            "ANTHROPIC_BASE_URL": self.model.url,
            "ANTHROPIC_API_KEY": "scripted-model-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "GIT_AUTHOR_NAME": "Test",
            "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test",
            "GIT_COMMITTER_EMAIL": "test@example.com",
        }

    def ithaca_cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_ithaca(self.ithaca, self.repo, self.env(), *args, check=check)

    def state(self) -> sqlite3.Connection:
        """A read-only look at the project's state database."""
        path = self.repo / ".ithaca" / ".runtime" / "state.db"
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def install(self) -> None:
        self.ithaca_cli("init")
        self.ithaca_cli("install", "claude")

    def run(self, prompt: str, script: Script, *extra: str, timeout: float = 120) -> ClaudeRun:
        """``claude -p PROMPT`` in the repository, its model playing ``script``."""
        self.model.wire.main_prompt = prompt
        self.model.play(script)
        debug_log = self.home / f"debug-{len(list(self.home.glob('debug-*')))}.log"
        command = [
            str(self.binary),
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-hook-events",
            "--permission-mode",
            "acceptEdits",
            "--debug-file",
            str(debug_log),
            *extra,
        ]
        done = subprocess.run(
            command,
            cwd=self.repo,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert not self.model.errors, self.model.errors
        return ClaudeRun(done.returncode, events, done.stderr, self.model, debug_log)


def make_claude_host(root: Path, ithaca: Path) -> tuple[ClaudeHost, ScriptedModel]:
    model = ScriptedModel(MessagesWire())
    return ClaudeHost(root, model, ithaca), model


ITHACA_TOOLS = (
    "load_protocols",
    "protocols",
    "ultragoal",
    "context",
    "record",
    "checkpoint",
    "archive",
    "sync",
    "session",
    "doctor",
    "notebook",
    "ulysses",
    "knowledge",
)


def bash(command: str) -> Reply:
    return [Call("Bash", {"command": command, "description": "scripted"})]


def load_ithaca_tools() -> Reply:
    """What a model does first under tool search: load the schemas of Ithaca's tools."""
    names = ",".join(f"mcp__ithaca__{name}" for name in ITHACA_TOOLS)
    return [Call("ToolSearch", {"query": f"select:{names}", "max_results": 20})]


def ithaca(tool: str, arguments: dict[str, Any]) -> Reply:
    return [Call(f"mcp__ithaca__{tool}", arguments)]


def load_protocols(request: Request) -> Reply:
    """``load_protocols`` with the event id the admission showed the model."""
    return ithaca("load_protocols", {"eventId": request.event_id()})
