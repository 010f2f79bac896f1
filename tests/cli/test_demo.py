"""`ithaca demo`, the README's first command, plays every scene to its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_the_demo_plays_to_the_end():
    ithaca = Path(sys.executable).parent / "ithaca"
    done = subprocess.run([str(ithaca), "demo"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.rstrip().endswith("Demo complete: every step behaved as Ithaca promises.")


def test_a_scene_that_fails_inside_an_mcp_client_says_so_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ithaca import demo
    from ithaca.demo import protocols_turn

    def failing(stage: demo.Stage) -> None:
        raise ExceptionGroup("task group", [ExceptionGroup("inner", [demo.DemoFailure("no")])])

    monkeypatch.setattr(protocols_turn, "play", failing)
    said: list[str] = []
    assert demo.run(said.append) == 1
    assert said[-1] == "\nDEMO FAILED: no"
