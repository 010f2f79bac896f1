"""The real Codex binary, run headless (``codex exec --json``) against the scripted model.

Each test gets a ``CODEX_HOME`` of its own whose ``config.toml`` points a custom provider
at the loopback model (``gpt-5.5``: a slug with bundled metadata, so ``apply_patch`` and
``tool_search`` exist), and a Git repository with ``ithaca init`` and ``ithaca install
codex`` applied; the install records Codex's trust in that same user config, as it does
for a user.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.hosts_real.binaries import host_binary, run_ithaca
from tests.hosts_real.responses_api import ResponsesWire, call_outputs
from tests.hosts_real.scripted import Call, Reply, Script, ScriptedModel


@dataclass
class CodexRun:
    exit_code: int
    events: list[dict[str, Any]]
    stderr: str
    model: ScriptedModel

    def outputs(self) -> list[str]:
        """Each tool call's output as the model was shown it, in order."""
        last = self.model.lane("main")[-1].body
        return list(call_outputs(last).values())


class CodexHost:
    def __init__(self, root: Path, model: ScriptedModel, ithaca: Path):
        self.binary = host_binary("codex")
        self.home = root / "codex-home"
        self.repo = root / "repo"
        self.model = model
        self.ithaca = ithaca
        self.home.mkdir()
        self.repo.mkdir()
        (self.home / "config.toml").write_text(
            'model_provider = "scripted"\nmodel = "gpt-5.5"\napproval_policy = "never"\n\n'
            "[model_providers.scripted]\n"
            'name = "Scripted"\n'
            f'base_url = "{model.url}/v1"\n'
            'env_key = "SCRIPTED_MODEL_KEY"\n'
            'wire_api = "responses"\n'
        )
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.repo)], check=True)

    def env(self) -> dict[str, str]:
        keep = {name: os.environ[name] for name in ("PATH", "LANG", "TMPDIR") if name in os.environ}
        return {
            **keep,
            "HOME": str(self.home.parent),
            "CODEX_HOME": str(self.home),
            "ITHACA_HOME": str(self.home.parent / "ithaca-home"),
            "SCRIPTED_MODEL_KEY": "scripted-model-key",
            "RUST_LOG": "warn",
        }

    def ithaca_cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_ithaca(self.ithaca, self.repo, self.env(), *args, check=check)

    def install(self) -> None:
        self.ithaca_cli("init")
        self.ithaca_cli("install", "codex")

    def run(self, prompt: str, script: Script, timeout: float = 120) -> CodexRun:
        self.model.play(script)
        command = [str(self.binary), "exec", "--json", "-C", str(self.repo), prompt]
        done = subprocess.run(
            command,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert not self.model.errors, self.model.errors
        return CodexRun(done.returncode, events, done.stderr, self.model)


def make_codex_host(root: Path, ithaca: Path) -> tuple[CodexHost, ScriptedModel]:
    model = ScriptedModel(ResponsesWire())
    return CodexHost(root, model, ithaca), model


def shell(command: str) -> Reply:
    return [Call("exec_command", {"cmd": command})]
