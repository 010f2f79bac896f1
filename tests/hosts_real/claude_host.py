"""The real Claude Code binary, run headless in a scratch home against the scripted model.

Each test gets a home of its own (user settings, credentials-free) and a Git repository
with ``ithaca init`` and ``ithaca install claude`` applied, exactly as a user would set
them up. As root, Claude Code refuses ``--dangerously-skip-permissions``, so runs use
``--permission-mode acceptEdits`` and the user-level allow rules of the test home
(project allow rules are ignored while a workspace is untrusted, project hooks and
``enableAllProjectMcpServers`` are honoured). Ithaca's MCP tools are deferred behind
``ToolSearch``, which the model calls first to load their schemas.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.hosts_real.binaries import REPO, host_binary
from tests.hosts_real.host import ITHACA_TOOLS, Host, HostRun, Shown, json_lines, label
from tests.hosts_real.messages_api import tool_results, tool_uses
from tests.hosts_real.scripted import Call, Reply, Script, ScriptedModel, Step

# The user's own permission rules in the test home: what a user who lets the agent work
# on its own would allow. Ithaca's MCP tools are allowed as a server, so a test can allow
# only some of them and see the user's rule still apply.
DEFAULT_ALLOW = ("Bash", "Edit", "Write", "Read", "Agent", "Task", "mcp__ithaca")


class ClaudeRun(HostRun):
    """A ``claude -p`` run, with its debug log (each hook's measured duration)."""

    debug_log: Path

    @property
    def session_id(self) -> str:
        found: str = next(event["session_id"] for event in self.events if "session_id" in event)
        return found

    def hook_responses(self, event: str | None = None) -> list[dict[str, Any]]:
        return [
            item
            for item in self.events
            if item.get("subtype") == "hook_response"
            and (event is None or item.get("hook_event") == event)
        ]


class ClaudeHost(Host):
    name = "claude"

    def __init__(self, root: Path, model: ScriptedModel, ithaca: Path):
        self.binary = host_binary("claude")
        self.home = root / "home"
        self.home.mkdir()
        super().__init__(root, model, ithaca)
        self.user_settings(allow=DEFAULT_ALLOW)

    def user_settings(self, *, allow: tuple[str, ...], **extra: Any) -> None:
        """The test user's ``~/.claude/settings.json``."""
        folder = self.home / ".claude"
        folder.mkdir(exist_ok=True)
        settings = {"permissions": {"allow": list(allow)}, "enableAllProjectMcpServers": True}
        settings.update(extra)
        (folder / "settings.json").write_text(json.dumps(settings, indent=2))

    def env(self) -> dict[str, str]:
        return {
            **super().env(),
            "HOME": str(self.home),
            "ITHACA_HOME": str(self.home / ".ithaca"),
            "ANTHROPIC_BASE_URL": self.model.url,
            "ANTHROPIC_API_KEY": "scripted-model-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }

    def shell(self, command: str) -> Reply:
        return [Call("Bash", {"command": command, "description": "scripted"})]

    def write(self, relpath: str, text: str) -> Reply:
        return [Call("Write", {"file_path": str(self.repo / relpath), "content": text})]

    def tool(self, name: str, arguments: dict[str, Any]) -> Reply:
        return [Call(f"{self.namespace}__{name}", arguments)]

    def load_tools(self) -> list[Step]:
        names = ",".join(f"{self.namespace}__{name}" for name in ITHACA_TOOLS)
        return [[Call("ToolSearch", {"query": f"select:{names}", "max_results": 20})]]

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
        done = self.launch(command, timeout)
        events = json_lines(done.stdout)
        run = ClaudeRun(done.returncode, events, done.stderr, self.model, _shown(self.model))
        run.debug_log = debug_log
        return run


class ClaudePluginHost(ClaudeHost):
    """Claude Code with Ithaca as its plugin, installed from this repository's marketplace
    (``claude plugin marketplace add``, ``claude plugin install``), as a user adds it;
    the repository has ``ithaca init`` and no ``ithaca install claude``."""

    namespace = "mcp__plugin_ithaca_ithaca"  # Claude Code names a plugin's tools so
    reviewer_agent = "ithaca:code-reviewer"  # and its agents

    def __init__(self, root: Path, model: ScriptedModel, ithaca: Path):
        super().__init__(root, model, ithaca)
        self.user_settings(allow=(*DEFAULT_ALLOW, self.namespace))

    def install(self) -> None:
        self.ithaca_cli("init")
        self.plugin("marketplace", "add", str(REPO))
        self.plugin("install", "ithaca@ithaca")

    def plugin(self, *args: str) -> None:
        """``claude plugin ARGS`` in the repository, as the user runs it; it must succeed."""
        done = subprocess.run(
            [str(self.binary), "plugin", *args],
            cwd=self.repo,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def _shown(model: ScriptedModel) -> list[Shown]:
    """Each call the main agent made, in order, as its last request showed the outcome."""
    requests = model.lane("main")
    if not requests:
        return []
    last = requests[-1].body
    uses, results = tool_uses(last), tool_results(last)
    return [
        Shown(
            label(use["name"]),
            json.dumps(use.get("input")),
            *results.get(use_id, (True, "<no result>")),
        )
        for use_id, use in uses.items()
    ]
