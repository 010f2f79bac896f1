"""``ithaca demo``: Ithaca's main job, played end to end in a throwaway repository.

Each scene drives the real entry points — the ``ithaca-hook`` process with the host's
JSON, the MCP server over stdio, the CLI — and checks what a user would see. A scene
that does not get the answer it expects stops the demo with exit code 1, so the demo is
also the quickest way to see that an installation works. Later parts add scenes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DemoFailure(Exception):
    """A scene saw something other than what Ithaca promises."""


@dataclass
class Stage:
    """The throwaway project and the helpers scenes use to act in it."""

    root: Path
    home: Path
    say: Callable[[str], None]
    session_id: str = "demo-session-1"
    notes: dict[str, Any] = field(default_factory=dict)
    # Added to the environment of every process the stage starts.
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if key
            not in (
                "CLAUDECODE",
                "CLAUDE_CODE_ENTRYPOINT",
                "CODEX_THREAD_ID",
                "CODEX_SANDBOX",
                "ITHACA_DIR",
            )
        }
        env["ITHACA_HOME"] = str(self.home)
        env.update(self.extra_env)
        return env

    def hook(self, event: str, **fields: Any) -> dict[str, Any]:
        """Run the real hook process with Claude Code's JSON; returns its parsed answer."""
        payload = {
            "session_id": self.session_id,
            "transcript_path": str(self.home / "transcript.jsonl"),
            "cwd": str(self.root),
            "hook_event_name": event,
            **fields,
        }
        done = subprocess.run(
            [script("ithaca-hook"), "claude", event],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=30,
        )
        if done.returncode not in (0, 2):
            raise DemoFailure(f"hook {event} exited {done.returncode}: {done.stderr}")
        return json.loads(done.stdout) if done.stdout.strip() else {}

    def ithaca(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script("ithaca"), "--project", str(self.root), *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=60,
        )

    def as_user(self, part: str, operation: str, **fields: Any) -> dict[str, Any]:
        """What the user's own ``ithaca PART OPERATION`` does once they have typed its
        confirmation at their terminal. The demo performs it in-process: it plays the
        coding host too, and Ithaca refuses any terminal that descends from a host."""
        from ithaca.app import open_project

        saved = os.environ.get("ITHACA_HOME")
        os.environ["ITHACA_HOME"] = str(self.home)
        project = open_project(self.root)
        try:
            service = getattr(project, part)
            arguments = {"operation": operation, "session": self.session_id, **fields}
            return dict(service.perform(arguments, actor="user"))
        finally:
            project.close()
            if saved is None:
                del os.environ["ITHACA_HOME"]
            else:
                os.environ["ITHACA_HOME"] = saved


def script(name: str) -> str:
    """A console script of this installation (next to the running interpreter)."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise DemoFailure(f"cannot find the {name} console script; is Ithaca installed?")
    return found


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise DemoFailure(message)


def run(say: Callable[[str], None], keep: bool = False) -> int:
    """Play every scene; returns the process exit code."""
    from ithaca.demo import (
        debugging_session,
        delivery_run,
        protocols_turn,
        team_step,
        ultragoal_pursuit,
    )

    scenes = [
        protocols_turn.play,
        debugging_session.play,
        delivery_run.play,
        ultragoal_pursuit.play,
        team_step.play,
    ]
    workdir = Path(tempfile.mkdtemp(prefix="ithaca-demo-"))
    stage = Stage(root=workdir / "repo", home=workdir / "home", say=say)
    stage.root.mkdir()
    stage.home.mkdir()
    try:
        for scene in scenes:
            scene(stage)
    except (DemoFailure, BaseExceptionGroup) as exc:
        failure = _failure(exc)
        if failure is None:
            raise
        say(f"\nDEMO FAILED: {failure}")
        return 1
    finally:
        if keep:
            say(f"\n(kept {workdir})")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    say("\nDemo complete: every step behaved as Ithaca promises.")
    return 0


def _failure(exc: BaseException) -> DemoFailure | None:
    """The scene's failure, also when a task group (an MCP client's) wrapped it."""
    if isinstance(exc, DemoFailure):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _failure(inner)
            if found is not None:
                return found
    return None
