"""Fixtures for the protocols hook and service tests.

``governed_dir`` is a hermetic project: a fresh Git repository with ``ithaca init`` run,
its own ``ITHACA_HOME``, and no coding-agent environment. ``hook`` drives the Claude Code
hook the way the host does, in process through ``dispatch.run`` (fast) or through the
real ``ithaca-hook`` console script with the JSON on stdin (end to end).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import namedtuple
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.accepted import accept
from tests.refusals import gate_reason

from ithaca.app import IthacaProject, init_project, open_project
from ithaca.hosts import dispatch
from ithaca.kernel import journal

AGENT_ENVIRONMENT = (
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CODEX_THREAD_ID",
    "CODEX_SANDBOX",
    "ITHACA_SESSION_ID",
    "ITHACA_DELIVERY_SESSION",
)
HOOK_SCRIPT = Path(sys.executable).parent / "ithaca-hook"
EVENT_ID = re.compile(r"evt_[0-9A-HJKMNP-TV-Z]{26}")


class Answer(namedtuple("Answer", "decision reason raw")):
    """What Claude Code would make of a PreToolUse answer.

    ``decision`` is ``allow`` for an empty answer (Ithaca abstains so the host's own
    permission rules apply), else the ``permissionDecision``.
    """

    __slots__ = ()


class Hook:
    """The Claude Code hook of one project, called as the host calls it."""

    script = HOOK_SCRIPT

    def __init__(self, root: Path):
        self.root = root

    def configure(self, text: str) -> None:
        """Write the team's ``.ithaca/config.toml``."""
        (self.root / ".ithaca" / "config.toml").write_text(text, encoding="utf-8")
        accept(self.root)

    @staticmethod
    def event_id_of(answer: dict[str, Any]) -> str:
        """The event id named in an admission's additionalContext."""
        context = answer["hookSpecificOutput"]["additionalContext"]
        found = EVENT_ID.search(context)
        assert found is not None, context
        return found.group()

    def prompt_payload(self, text: str, session: str | None = "s1") -> dict[str, Any]:
        payload: dict[str, Any] = {
            "session_id": session,
            "transcript_path": str(self.root / "transcript.jsonl"),
            "cwd": str(self.root),
            "hook_event_name": "UserPromptSubmit",
            "prompt": text,
        }
        if session is None:
            del payload["session_id"]
        return payload

    def tool_payload(
        self, tool: str, tool_input: dict[str, Any], session: str = "s1", cwd: Path | None = None
    ) -> dict[str, Any]:
        return {
            "session_id": session,
            "cwd": str(cwd or self.root),
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
        }

    def run(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The parsed stdout of an in-process hook call (``{}`` for silence)."""
        out, code = dispatch.run("claude", event, json.dumps(payload))
        assert code == 0
        return json.loads(out) if out else {}

    def prompt(self, text: str, session: str | None = "s1") -> dict[str, Any]:
        return self.run("UserPromptSubmit", self.prompt_payload(text, session))

    def admit(self, text: str = "Please tidy the README.", session: str = "s1") -> str:
        """Submit a prompt that must be admitted; returns its event id."""
        answer = self.prompt(text, session)
        assert "decision" not in answer, answer
        return self.event_id_of(answer)

    def tool(
        self, tool: str, tool_input: dict[str, Any], session: str = "s1", cwd: Path | None = None
    ) -> Answer:
        payload = self.tool_payload(tool, tool_input, session, cwd)
        return answer_of(self.run("PreToolUse", payload))

    def bash(self, command: str, session: str = "s1", cwd: Path | None = None) -> Answer:
        return self.tool("Bash", {"command": command}, session, cwd)

    def write(self, path: str, session: str = "s1") -> Answer:
        return self.tool("Write", {"file_path": path, "content": "text\n"}, session)

    def process(self, event: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        """Run the real console script with the payload on stdin."""
        return subprocess.run(
            [str(HOOK_SCRIPT), "claude", event],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            cwd=self.root,
            env=dict(os.environ),
            timeout=60,
            check=False,
        )


def answer_of(raw: dict[str, Any]) -> Answer:
    if not raw:
        return Answer("allow", None, raw)
    output = raw["hookSpecificOutput"]
    assert output["hookEventName"] == "PreToolUse"
    reason = output.get("permissionDecisionReason")
    return Answer(output["permissionDecision"], reason and gate_reason(reason), raw)


@pytest.fixture(scope="session")
def initialised_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Git repository with ``ithaca init`` run, copied by every test (init is slow)."""
    base = tmp_path_factory.mktemp("template")
    root = base / "repo"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ITHACA_HOME", str(base / "home"))
        patch.delenv("ITHACA_DIR", raising=False)
        subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
        created, _ = init_project(root)
        created.close()
    return root


@pytest.fixture
def governed_dir(
    initialised_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A fresh initialised project in its own Git repository, hermetic from the outside."""
    monkeypatch.setenv("ITHACA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ITHACA_DIR", raising=False)
    for name in AGENT_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "repo"
    shutil.copytree(initialised_template, root, symlinks=True)
    return root


@pytest.fixture
def governed(governed_dir: Path) -> Iterator[IthacaProject]:
    """The test's own open handle on the project (the Python API)."""
    opened = open_project(governed_dir)
    yield opened
    opened.close()


@pytest.fixture
def hook(governed_dir: Path) -> Hook:
    return Hook(governed_dir)


@pytest.fixture
def journaled(governed: IthacaProject) -> Callable[[str], list[dict[str, Any]]]:
    """The journal events of one kind, in order."""

    def events(kind: str) -> list[dict[str, Any]]:
        return journal.query(governed.store.connection(), kind=kind)

    return events


@pytest.fixture
def make_record() -> Callable[..., dict[str, Any]]:
    """A valid user protocol record; keyword arguments replace its fields."""

    def record(protocol_id: str = "team.rule", **fields: Any) -> dict[str, Any]:
        made: dict[str, Any] = {
            "id": protocol_id,
            "name": "Team rule",
            "description": "A rule the team keeps.",
            "priority": 100,
            "selector": {},
            "rules": ["Follow the team rule."],
        }
        made.update(fields)
        return made

    return record
