"""Finding the pinned host binaries, and failing loudly when one cannot be had.

The versions are pinned in ``tools/package.json``, which ``npm ci --prefix tools`` (the
README's test command, and ``.ci/run``) installs; a developer may point
``ITHACA_CLAUDE_BIN`` / ``ITHACA_CODEX_BIN`` at another copy. A missing binary or another
version fails the test (never a skip): the real-host suite is the bench the other tests
are judged on.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
NPM_BIN = TOOLS / "node_modules" / ".bin"
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}


def pinned_version(name: str) -> str:
    """The version of host ``name`` that ``tools/package.json`` pins."""
    pins = json.loads((TOOLS / "package.json").read_text())["devDependencies"]
    return str(pins[PACKAGES[name]])


def host_binary(name: str) -> Path:
    """The ``name`` binary at its pinned version, or a failed test saying how to get it."""
    version = pinned_version(name)
    chosen = os.environ.get(f"ITHACA_{name.upper()}_BIN")
    candidate = Path(chosen) if chosen else NPM_BIN / name
    if not candidate.exists():
        pytest.fail(
            f"the {name} binary is missing: install the pinned tools with"
            f" `npm ci --prefix tools` (or set ITHACA_{name.upper()}_BIN)",
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
