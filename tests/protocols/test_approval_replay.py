"""A one-time approval cannot be used twice by putting back an older copy of the database.

The approval is used up by a row of the database, so a copy taken between the grant and
the call shows it unused. Put back together with its anchor, that copy still falls short
of the journal head Ithaca keeps, sealed, in the user's home: the next call is refused,
and no approval counts until the user accepts the journal as it is, after which an
approval granted before that counts for nothing. Where the agent can write the user's
home too (the unsandboxed profile), it can put the older head record back as well: that
replay is not detected, as docs/hooks.md says. Hooks, grants and the doctor all run as
processes, as the host and the user run them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.accepted import accept
from tests.command_line import doctor_codes
from tests.conftest import TerminalRun

from ithaca.app import open_project
from ithaca.kernel import anchor

ITHACA = str(Path(sys.executable).parent / "ithaca")
HOOK = str(Path(sys.executable).parent / "ithaca-hook")
SESSION = "55555555-5555-4555-8555-555555555555"
APPROVAL = re.compile(r"ithaca protocols approve (apr_[0-9A-HJKMNP-TV-Z]+)")
RUNTIME = ".ithaca/.runtime"
DATABASE = ("state.db", "state.db-wal", "state.db-shm", anchor.ANCHOR)


def hook(root: Path, event: str, **fields: Any) -> dict[str, Any]:
    payload = {"session_id": SESSION, "cwd": str(root), "hook_event_name": event, **fields}
    done = subprocess.run(
        [HOOK, "claude", event], input=json.dumps(payload), capture_output=True, text=True,
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(root)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout else {}


def publish(root: Path) -> tuple[str, str]:
    """PreToolUse of ``npm publish`` (and its PostToolUse when let through): the decision
    and the reason."""
    tool = {"tool_name": "Bash", "tool_input": {"command": "npm publish"}}
    answer = hook(root, "PreToolUse", **tool).get("hookSpecificOutput", {})
    decision = answer.get("permissionDecision", "allow")
    if decision == "allow":
        hook(root, "PostToolUse", **tool, tool_response={"stdout": "", "exit_code": 0})
    return decision, answer.get("permissionDecisionReason", "")


@pytest.fixture(params=["sandboxed", "unsandboxed"])
def released(request: pytest.FixtureRequest, project_dir: Path) -> tuple[Path, str]:
    """A project whose team requires the user's approval for `npm publish`, with Claude
    Code installed in ``request.param``'s profile and a prompt admitted and loaded."""
    done = subprocess.run(
        [ITHACA, "install", "claude", "--profile", request.param],
        cwd=project_dir, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    project = open_project(project_dir)
    try:
        project.protocols.create_protocol(
            {"id": "team.release", "name": "Release", "description": "Releases need a yes.",
             "priority": 100, "selector": {}, "rules": ["Ask before publishing."],
             "constraints": [{"kind": "require_approval", "commands": ["npm publish*"]}]},
            actor="user",
        )  # fmt: skip
    finally:
        project.close()
    accept(project_dir)  # the user's own new team rule
    context = hook(project_dir, "UserPromptSubmit", prompt="Release the package.")
    event_id = re.search(r"evt_[0-9A-HJKMNP-TV-Z]{26}", json.dumps(context)).group()  # type: ignore[union-attr]
    project = open_project(project_dir)
    try:
        project.protocols.load_protocols({"eventId": event_id, "session": SESSION})
    finally:
        project.close()
    return project_dir, request.param


def granted(root: Path, type_ahead: TerminalRun) -> str:
    decision, reason = publish(root)
    assert decision == "deny" and "APPROVAL_REQUIRED" in reason, reason
    approval_id = APPROVAL.search(reason).group(1)  # type: ignore[union-attr]
    code, shown = type_ahead(
        ["--project", str(root), "protocols", "approve", approval_id], approval_id
    )
    assert code == 0 and "Granted" in shown, shown
    return approval_id


def test_an_older_database_put_back_cannot_replay_a_one_time_approval(
    released, type_ahead, tmp_path
):
    root, profile = released
    approval_id = granted(root, type_ahead)
    runtime = root / RUNTIME
    kept = tmp_path / "kept"
    kept.mkdir()
    head_record = Path(anchor.head_path(str(runtime)))
    for name in DATABASE:  # the agent's copy, taken between the grant and the call
        if (runtime / name).exists():
            shutil.copy2(runtime / name, kept / name)
    shutil.copy2(head_record, kept / "head")
    assert publish(root)[0] == "allow"  # the approval is used up
    assert publish(root)[0] == "deny"
    for name in DATABASE:
        if (kept / name).exists():
            shutil.copy2(kept / name, runtime / name)
    if profile == "unsandboxed":
        # An agent whose commands run as the user can put the older head record back
        # too: then the copy is the journal as Ithaca last saw it, and the approval is
        # used a second time. This is the limit docs/hooks.md states for this profile.
        shutil.copy2(kept / "head", head_record)
        assert publish(root)[0] == "allow"
        return
    decision, reason = publish(root)
    assert decision == "deny" and "[JOURNAL_ROLLED_BACK]" in reason, reason
    assert "JOURNAL_ROLLED_BACK" in doctor_codes(root)
    code, shown = type_ahead(["--project", str(root), "doctor", "lift-lockdown"], "lift")
    assert code == 0, shown
    decision, reason = publish(root)  # the journal accepted as it is: still no replay
    assert decision == "deny" and "APPROVAL_REQUIRED" in reason, reason
    assert APPROVAL.search(reason).group(1) != approval_id
    assert doctor_codes(root) == set()
