"""Ithaca as a user and a host run it, each in a process of its own: the command in a
terminal at the project, its output as a script reads it (no colour, wide lines), and
Claude Code's hook with its JSON on stdin; never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ITHACA = str(Path(sys.executable).parent / "ithaca")
HOOK = str(Path(sys.executable).parent / "ithaca-hook")


def ithaca(
    root: Path,
    *args: str,
    timeout: float = 120,
    env_extra: dict[str, str] | None = None,
    **run: Any,
) -> subprocess.CompletedProcess[str]:
    """``ithaca ARGS`` at ``root``, with ``env_extra`` added to the environment; ``run``
    goes to ``subprocess.run`` (``preexec_fn``)."""
    done = subprocess.run(
        [ITHACA, *args],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "400", **(env_extra or {})},
        timeout=timeout,
        **run,
    )
    shown = done.stdout + done.stderr
    assert "Traceback" not in shown, shown
    return done


def doctor_codes(root: Path) -> set[str]:
    """The codes ``ithaca doctor --json`` reports for the project at ``root``."""
    report = json.loads(ithaca(root, "doctor", "--json").stdout)
    return {finding["code"] for finding in report["findings"]}


def claude_hook(
    root: Path, event: str, tool: str, tool_input: dict[str, Any], session: str
) -> dict[str, str]:
    """Claude Code's hook for ``event`` on a ``tool`` call, run as Claude Code runs it
    (``ithaca-hook`` with the JSON on stdin, a minute at most: a hook that waits on a FIFO
    fails here): ``effect`` (allow where it said nothing, else deny, ask or block) and
    ``text`` (the reason, or the whole answer)."""
    payload = {"session_id": session, "cwd": str(root), "hook_event_name": event,
               "tool_name": tool, "tool_input": tool_input}  # fmt: skip
    done = subprocess.run(
        [HOOK, "claude", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(root)},
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = json.loads(done.stdout) if done.stdout else {}
    specific = said.get("hookSpecificOutput", {})
    if "permissionDecision" in specific:
        return {
            "effect": specific["permissionDecision"],
            "text": specific["permissionDecisionReason"],
        }
    if said.get("decision") == "block":
        return {"effect": "block", "text": said["reason"]}
    return {"effect": "allow", "text": json.dumps(said)}
