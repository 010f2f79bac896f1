"""What the real-host scenarios ask of either host, so one scenario plays through both.

A scenario speaks of a model's moves in the host's own terms only where it must: ``shell``,
``write`` and ``tool`` give each host's spelling of a shell command, a new file and a call
of one of Ithaca's MCP tools, and ``load_tools`` what a model does first under tool search.
A run's ``calls`` list what the model was shown for each call, labelled the same way on
both hosts (``shell``, ``write``, ``ithaca:<tool>``, else the host's tool name).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.accepted import accept
from tests.hosts_real.binaries import run_ithaca
from tests.hosts_real.scripted import Reply, Request, Script, ScriptedModel, Step

ITHACA_TOOLS = (
    "load_protocols",
    "protocols",
    "ultragoal",
    "context",
    "record",
    "checkpoint",
    "archive",
    "sync",
    "session",
    "doctor",
    "notebook",
    "verify",
    "ulysses",
    "knowledge",
)

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


@dataclass(frozen=True)
class Shown:
    """One tool call (its input as JSON text) as the model was shown its outcome."""

    label: str
    input: str
    is_error: bool
    text: str

    def answer(self) -> dict[str, Any]:
        """The JSON object an MCP tool answered (a host may wrap it in text of its own)."""
        value, _ = json.JSONDecoder().raw_decode(self.text[self.text.index("{") :])
        assert isinstance(value, dict), self.text
        return value


@dataclass
class HostRun:
    """What one headless run printed, and what its model was asked."""

    exit_code: int
    events: list[dict[str, Any]]
    stderr: str
    model: ScriptedModel
    shown: list[Shown] = field(default_factory=list)

    def calls(self, label: str | None = None) -> list[Shown]:
        return [item for item in self.shown if label is None or item.label == label]

    def call(self, label: str, nth: int = 0, *, given: str = "") -> Shown:
        """The ``nth`` call labelled ``label`` whose input holds ``given``."""
        matching = [item for item in self.calls(label) if given in item.input]
        assert len(matching) > nth, f"no call {nth} of {label} with {given!r}: {self.shown}"
        return matching[nth]

    def first_request(self) -> Request:
        return self.model.lane("main")[0]


class Host(ABC):
    """A scratch home and Git repository wired to one real host and a scripted model."""

    name = ""
    namespace = "mcp__ithaca"
    reviewer_agent = "code-reviewer"  # the reviewer's agent type, as the host knows it

    def __init__(self, root: Path, model: ScriptedModel, ithaca: Path):
        self.root = root
        self.repo = root / "repo"
        self.model = model
        self.ithaca = ithaca
        self.outside: list[Path] = []  # folders to remove on close
        self.repo.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.repo)], check=True)
        subprocess.run(
            ["git", "-C", str(self.repo), "commit", "-q", "--allow-empty", "-m", "start"],
            check=True,
            env={**os.environ, **GIT_IDENTITY},
        )

    def env(self) -> dict[str, str]:
        keep = {name: os.environ[name] for name in ("PATH", "LANG", "TMPDIR") if name in os.environ}
        return {**keep, **GIT_IDENTITY}

    def ithaca_cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``ithaca ARGS`` in the repository, as the user in their terminal."""
        return run_ithaca(self.ithaca, self.repo, self.env(), *args, check=check)

    def configure(self, toml: str) -> None:
        """Add the team's settings to ``.ithaca/config.toml`` (before the host runs)."""
        config = self.repo / ".ithaca" / "config.toml"
        before = config.read_text() if config.exists() else ""
        config.write_text(f"{before}\n{toml}")

    def notebook_cell(self, source: str, filename: str = "check.py") -> dict[str, str]:
        """A validator cell in a notebook of its own, made by the user with ``ithaca
        notebook``: ``{notebookId, cellId}``."""
        made = self.ithaca_cli("notebook", "create", filename, "--json")
        notebook = json.loads(made.stdout)["notebookId"]
        added = self.ithaca_cli(
            "notebook", "add-cell", notebook, "--source", source, "--filename", filename, "--json"
        )
        return {"notebookId": notebook, "cellId": json.loads(added.stdout)["cellId"]}

    def log(self) -> list[dict[str, Any]]:
        """``ithaca log --json``: the journal as the user reads it."""
        entries: list[dict[str, Any]] = json.loads(self.ithaca_cli("log", "--json").stdout)
        return entries

    def close(self) -> None:
        """Remove what the host keeps outside the test's folder."""
        for folder in self.outside:
            shutil.rmtree(folder, ignore_errors=True)

    def install(self) -> None:
        self.ithaca_cli("init")
        self.ithaca_cli("install", self.name)

    def state(self) -> sqlite3.Connection:
        """A read-only look at the project's state database."""
        path = self.repo / ".ithaca" / ".runtime" / "state.db"
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    # -- the model's moves, in this host's spelling -----------------------------------

    @abstractmethod
    def shell(self, command: str) -> Reply: ...

    @abstractmethod
    def write(self, relpath: str, text: str) -> Reply: ...

    @abstractmethod
    def tool(self, name: str, arguments: dict[str, Any]) -> Reply: ...

    @abstractmethod
    def load_tools(self) -> list[Step]: ...

    @abstractmethod
    def run(self, prompt: str, script: Script, *extra: str, timeout: float = 120) -> HostRun:
        """The host headless on ``prompt`` in the repository, its model playing ``script``
        (``extra``: more of the host's own arguments)."""

    def launch(self, command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Run the host binary in the repository; the script must have played cleanly.
        What the test set up in the project beforehand is accepted first, as the user
        accepts their own edits (``tests.accepted``)."""
        accept(self.repo, self.env())
        done = subprocess.run(
            command,
            cwd=self.repo,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        assert not self.model.errors, self.model.errors
        return done

    def load_protocols(self, request: Request) -> Reply:
        """``load_protocols`` with the event id the admission showed the model."""
        return self.tool("load_protocols", {"eventId": request.event_id()})

    def protocols_loaded(self) -> list[Step]:
        """The steps that bring Ithaca's tools in and load this turn's protocols."""
        return [*self.load_tools(), self.load_protocols]


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON events a headless host printed, one per line."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def label(name: str, namespace: str | None = None) -> str:
    """The host-neutral label of a call of tool ``name``."""
    if namespace == "mcp__ithaca":
        return f"ithaca:{name}"
    for prefix in ("mcp__ithaca__", "mcp__plugin_ithaca_ithaca__"):  # installed; the plugin's
        if name.startswith(prefix):
            return f"ithaca:{name.removeprefix(prefix)}"
    return {"Bash": "shell", "exec_command": "shell", "Write": "write", "apply_patch": "write"}.get(
        name, name
    )
