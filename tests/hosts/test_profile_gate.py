"""The SessionStart breadcrumb names an unsandboxed install profile, on both hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ithaca.hosts import dispatch
from ithaca.hosts.claude import installer as install_claude
from ithaca.hosts.codex import installer as install_codex
from ithaca.hosts.profile_gate import UNSANDBOXED_CONTEXT


def session_start(host: str, root: Path) -> str:
    payload = {"session_id": "s-1", "cwd": str(root), "hook_event_name": "SessionStart"}
    out, code = dispatch.run(host, "SessionStart", json.dumps(payload))
    assert code == 0
    return json.loads(out).get("hookSpecificOutput", {}).get("additionalContext", "") if out else ""


@pytest.mark.parametrize(
    ("host", "install"),
    [
        ("claude", lambda root: install_claude.install(root, profile="unsandboxed")),
        ("codex", lambda root: install_codex.install(root, profile="unsandboxed")),
    ],
)
def test_an_unsandboxed_install_is_named_at_session_start(project_dir, host, install):
    install(project_dir)
    assert UNSANDBOXED_CONTEXT in session_start(host, project_dir)


@pytest.mark.parametrize(
    ("host", "install"), [("claude", install_claude.install), ("codex", install_codex.install)]
)
def test_the_sandboxed_profile_adds_nothing_at_session_start(project_dir, host, install):
    install(project_dir)
    assert "[Ithaca profile]" not in session_start(host, project_dir)
