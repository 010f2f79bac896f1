"""The real Codex binary, run headless (``codex exec --json``) against the scripted model.

Each test gets a ``CODEX_HOME`` of its own whose ``config.toml`` points a custom provider
at the loopback model (``gpt-5.5``: a slug with bundled metadata, so ``apply_patch`` and
``tool_search`` exist), and a Git repository with ``ithaca init`` and ``ithaca install
codex`` applied; the install records Codex's trust in that same user config, as it does
for a user. Codex starts MCP servers in the background and announces their tools to the
model once they are up ("Added deferred tool namespaces"); they are then reached through
``tool_search``, and called as functions in the ``mcp__ithaca`` namespace.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tests.hosts_real.binaries import host_binary
from tests.hosts_real.host import ITHACA_TOOLS, Host, HostRun, Shown, json_lines, label
from tests.hosts_real.responses_api import call_outputs
from tests.hosts_real.scripted import Call, Reply, Script, ScriptedModel, Step, WaitUntilShown

USER_CONFIG = """\
model_provider = "scripted"
model = "gpt-5.5"
approval_policy = "never"

[model_providers.scripted]
name = "Scripted"
base_url = "{url}/v1"
env_key = "SCRIPTED_MODEL_KEY"
wire_api = "responses"
"""


class CodexHost(Host):
    name = "codex"

    def __init__(self, root: Path, model: ScriptedModel, ithaca: Path):
        self.binary = host_binary("codex")
        # Not under /tmp: Codex's sandbox mounts a fresh /tmp over it, which hides the
        # helper Codex links into CODEX_HOME and makes every sandboxed command fail.
        self.home = Path(tempfile.mkdtemp(prefix="ithaca-codex-home-", dir="/var/tmp"))
        (self.home / "config.toml").write_text(USER_CONFIG.format(url=model.url))
        self.scratch = Path(tempfile.mkdtemp(prefix="ithaca-codex-tmp-", dir="/var/tmp"))
        super().__init__(root, model, ithaca)
        self.outside += [self.home, self.scratch]

    def env(self) -> dict[str, str]:
        return {
            **super().env(),
            "HOME": str(self.root),
            "CODEX_HOME": str(self.home),
            "ITHACA_HOME": str(self.root / "ithaca-home"),
            "TMPDIR": str(self.scratch),  # where its sandbox stands placeholders too
            "SCRIPTED_MODEL_KEY": "scripted-model-key",
            "RUST_LOG": "warn",
        }

    def shell(self, command: str) -> Reply:
        return [Call("exec_command", {"cmd": command})]

    def write(self, relpath: str, text: str) -> Reply:
        lines = "".join(f"+{line}\n" for line in text.splitlines())
        patch = f"*** Begin Patch\n*** Add File: {relpath}\n{lines}*** End Patch\n"
        return [Call("apply_patch", patch)]

    def tool(self, name: str, arguments: dict[str, Any]) -> Reply:
        return [Call(name, arguments, namespace=self.namespace)]

    def load_tools(self) -> list[Step]:
        query = " ".join(["ithaca", *ITHACA_TOOLS])
        return [
            WaitUntilShown(f"- {self.namespace}:", self.shell("sleep 0.3")),
            [Call("tool_search", {"query": query, "limit": len(ITHACA_TOOLS) + 5})],
        ]

    def run(self, prompt: str, script: Script, *extra: str, timeout: float = 120) -> HostRun:
        """``codex exec [EXTRA] PROMPT`` in the repository, its model playing ``script``."""
        self.model.play(script)
        command = [str(self.binary), "exec", *extra, "--json", "-C", str(self.repo), prompt]
        done = self.launch(command, timeout)
        events = json_lines(done.stdout)
        return HostRun(done.returncode, events, done.stderr, self.model, _shown(self.model))


def _shown(model: ScriptedModel) -> list[Shown]:
    """Each call the model made, in order, with the output its last request showed (Codex
    marks no output as an error: a denial is known by its text)."""
    requests = model.lane("main")
    if not requests:
        return []
    items = requests[-1].body.get("input") or []
    outputs = call_outputs(requests[-1].body)
    return [
        Shown(
            label(item.get("name") or "tool_search", item.get("namespace")),
            str(item.get("arguments") or item.get("input") or ""),
            False,
            outputs.get(item["call_id"], "<no output>"),
        )
        for item in items
        if item.get("type") in ("function_call", "custom_tool_call", "tool_search_call")
    ]
