"""The end-of-turn critic reads the working tree through Git without running anything the
agent planted: a repository it made inside the project (added as a submodule that asks to
be looked into), a filter and a monitor in the repository's settings, a hooks folder.

Played through the real ``ithaca-hook`` process, as Claude Code and Codex start it: the
turn's change is still seen (its Stop is held until a verification) and no planted program
ever ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from tests.protocols.conftest import HOOK_SCRIPT, Hook

from ithaca.app import open_project

VERIFY = "python3 -m pytest"


def sh(cwd: Path, *args: str) -> None:
    subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=True)


def plant(root: Path, marker: Path) -> None:
    """What an agent that wants out writes: each would run ``touch marker`` as the user."""
    ran = f"touch {marker}"
    inner = root / "vendor" / "inner"
    inner.mkdir(parents=True)
    sh(inner, "git", "init", "-q")
    (inner / "x.txt").write_text("x\n")
    (inner / ".gitattributes").write_text("* filter=inner\n")
    sh(inner, "git", "add", "-A")
    sh(inner, "git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "inner")
    sh(inner, "git", "config", "core.fsmonitor", f"{ran}; echo")
    sh(inner, "git", "config", "filter.inner.clean", f"{ran}; cat")
    sh(root, "git", "-c", "advice.addEmbeddedRepo=false", "add", "vendor/inner")
    (root / ".gitmodules").write_text(
        '[submodule "inner"]\n\tpath = vendor/inner\n\turl = ./vendor/inner\n\tignore = none\n'
    )
    (root / ".gitattributes").write_text("*.py filter=outer\n")
    sh(root, "git", "config", "filter.outer.clean", f"{ran}; cat")
    sh(root, "git", "config", "core.fsmonitor", f"{ran}; echo")
    hooks = root / "agent-hooks"
    hooks.mkdir()
    for name in ("post-index-change", "reference-transaction"):
        (hooks / name).write_text(f"#!/bin/sh\n{ran}\n")
        (hooks / name).chmod(0o755)
    sh(root, "git", "config", "core.hooksPath", str(hooks))
    later = time.time() + 5
    os.utime(inner / "x.txt", (later, later))


def call(root: Path, host: str, event: str, **fields: Any) -> dict[str, Any]:
    payload = {"session_id": "s1", "cwd": str(root), "hook_event_name": event, **fields}
    if host == "codex":
        payload["turn_id"] = "t-1"
    done = subprocess.run(
        [str(HOOK_SCRIPT), host, event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=root,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_the_critic_sees_the_change_and_runs_nothing_the_agent_planted(
    governed_dir: Path, hook: Hook, tmp_path: Path, host: str
) -> None:
    root, marker = governed_dir, tmp_path / "RAN"
    hook.configure(f'[verification]\ncommands = ["{VERIFY}"]\n')
    admitted = call(root, host, "UserPromptSubmit", prompt="::workflow coding\nFix the parser.")
    project = open_project(root)
    project.protocols.load_protocols({"eventId": Hook.event_id_of(admitted)})
    project.close()
    call(root, host, "PreToolUse", tool_name="Bash", tool_input={"command": "ls"})
    plant(root, marker)

    written = {"file_path": str(root / "parser.py"), "content": "def parse(): ...\n"}
    call(root, host, "PreToolUse", tool_name="Write", tool_input=written)
    (root / "parser.py").write_text(written["content"])
    call(root, host, "PostToolUse", tool_name="Write", tool_input=written, tool_response={})
    stopped = call(root, host, "Stop", stop_hook_active=False, last_assistant_message="Done.")

    assert stopped.get("decision") == "block" and "VERIFICATION_REQUIRED" in stopped["reason"]
    assert not marker.exists(), "a program the agent planted ran from Ithaca's hook"
