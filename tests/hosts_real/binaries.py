"""Finding the pinned host binaries, and failing loudly when one cannot be had.

``.ci/run`` installs the pinned versions with npm under ``.venv/tools``; a developer may
point ``ITHACA_CLAUDE_BIN`` / ``ITHACA_CODEX_BIN`` at another copy. A missing binary or
another version fails the test (never a skip): the real-host suite is the bench the
other tests are judged on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NPM_BIN = REPO / ".venv" / "tools" / "node_modules" / ".bin"


def host_binary(name: str, version: str) -> Path:
    """The ``name`` binary at the pinned ``version``, or a failed test saying how to get it."""
    chosen = os.environ.get(f"ITHACA_{name.upper()}_BIN")
    candidate = Path(chosen) if chosen else NPM_BIN / name
    if not candidate.exists():
        found = shutil.which(name)
        candidate = Path(found) if found else candidate
    if not candidate.exists():
        pytest.fail(
            f"the {name} binary is missing: install it with `npm install --prefix .venv/tools"
            f" {_package(name)}@{version}` (or set ITHACA_{name.upper()}_BIN)",
            pytrace=False,
        )
    shown = subprocess.run(
        [str(candidate), "--version"], capture_output=True, text=True, timeout=60
    ).stdout
    if version not in shown:
        pytest.fail(
            f"{candidate} is {shown.strip()!r}; the real-host suite is pinned to {version}",
            pytrace=False,
        )
    return candidate


def run_ithaca(
    ithaca: Path, repo: Path, env: dict[str, str], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``ithaca ARGS`` in ``repo``, as the user in their terminal."""
    done = subprocess.run(
        [str(ithaca), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def _package(name: str) -> str:
    return {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}[name]
