"""Shared fixtures: a hermetic environment for every test, an initialised project, and a
machine without bubblewrap."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ithaca.kernel.authority import AGENT_ENVIRONMENT


def pytest_configure(config: pytest.Config) -> None:
    """Every test's folders under ``/var/tmp``, not ``/tmp``: while Codex runs a sandboxed
    command it stands read-only placeholders for ``.git`` and ``.codex`` in ``/tmp`` (a
    writable root of its workspace sandbox), and a project under ``/tmp`` would meanwhile
    sit in a Git repository at ``/tmp``. The real-host suite gives Codex a ``TMPDIR`` of
    its own for the same reason."""
    if os.environ.get("TMPDIR", "/tmp").startswith("/tmp"):
        os.environ["TMPDIR"] = "/var/tmp"
        tempfile.tempdir = None


@pytest.fixture(autouse=True)
def hermetic_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """User settings in temporary homes (Ithaca's, Codex's, Claude Code's), no coding-agent
    or state-root variables, and this Ithaca's commands on ``PATH``, as on a machine where
    the user installed it (the wiring the hosts run names ``ithaca-hook`` and ``ithaca``,
    not paths), with the tools ``npm ci --prefix tools`` installed (tsx, the pinned hosts)."""
    monkeypatch.setenv("ITHACA_HOME", str(tmp_path_factory.mktemp("ithaca-home")))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path_factory.mktemp("codex-home")))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path_factory.mktemp("claude-config")))
    commands = (Path(sys.executable).parent, Path(__file__).parents[1] / "tools/node_modules/.bin")
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, commands), os.environ["PATH"]]))
    for name in (*AGENT_ENVIRONMENT, "ITHACA_DIR", "ITHACA_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A fresh Git repository with ``ithaca init`` applied."""
    from ithaca import init_project

    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    project, _ = init_project(root)
    project.close()
    return root


TerminalRun = Callable[..., tuple[int, str]]


@pytest.fixture
def type_ahead() -> TerminalRun:
    """Run the installed ``ithaca`` with a pseudo-terminal as its terminal and a line typed
    ahead (the terminal holds it until the prompt reads it): ``run(args, typed, **env)``
    returns the exit code and everything the terminal showed, prompt included."""

    def run(args: list[str], typed: str, **env: str) -> tuple[int, str]:
        master, slave = pty.openpty()
        environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb", **env}
        command = [str(Path(sys.executable).parent / "ithaca"), *args]
        process = subprocess.Popen(
            command, stdin=slave, stdout=slave, stderr=slave, env=environment
        )
        os.close(slave)
        os.write(master, f"{typed}\n".encode())
        shown = b""
        deadline = time.monotonic() + 60
        while select.select([master], [], [], max(deadline - time.monotonic(), 0))[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed its side of the terminal
                chunk = b""
            if not chunk:
                break
            shown += chunk
        else:
            process.kill()  # the deadline passed; the exit code below says so
        os.close(master)
        return process.wait(timeout=60), shown.decode(errors="replace")

    return run


@pytest.fixture
def no_bubblewrap(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A machine without a working bubblewrap, as the validators' probe finds it: none on
    the machine, or (``indirect`` parameter ``"failing"``) one that cannot make the view."""
    from ithaca.validators import confine, sandbox

    found = sandbox.system_tool("false") if getattr(request, "param", "") == "failing" else None

    def lookup(name: str) -> str | None:
        return found if name == "bwrap" else sandbox.system_tool(name)

    monkeypatch.setattr(confine, "system_tool", lookup)
    confine.bubblewrap.cache_clear()
    yield
    confine.bubblewrap.cache_clear()
