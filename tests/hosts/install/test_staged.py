"""Staged installs: a failed write puts every file back, a failed preflight writes nothing,
and an uninstall gives the user's files back byte for byte."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ithaca.hosts.claude import installer as install_claude
from ithaca.hosts.codex import installer as install_codex
from ithaca.hosts.install import staged as install_staged
from ithaca.hosts.install.doctor import check
from ithaca.kernel.errors import Refused

CLAUDE_FIXTURES = Path(__file__).parents[1] / "fixtures" / "claude"
CODEX_FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex"
# Laid out by hand (Prettier style), as a user's file often is: not as Ithaca writes JSON.
USER_MCP = """{
  "mcpServers": {
    "github": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"] }
  }
}
"""


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and folder below ``root``: a file's bytes, None for a folder."""
    return {
        str(path.relative_to(root)): (path.read_bytes() if path.is_file() else None)
        for path in sorted(root.rglob("*"))
    }


@pytest.fixture
def scratch_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temporary folder, moved where a test can see what is left in it."""
    folder = tmp_path / "system-temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def claude_project(tmp_path: Path) -> Path:
    root = tmp_path / "claude-project"
    (root / ".claude" / "skills" / "mine").mkdir(parents=True)
    (root / ".claude" / "agents").mkdir()
    shutil.copy(CLAUDE_FIXTURES / "settings-user-hooks.json", root / ".claude" / "settings.json")
    (root / ".claude" / "settings.local.json").write_text('{"model": "opus"}\n')
    (root / ".claude" / "skills" / "mine" / "SKILL.md").write_text("---\nname: mine\n---\n")
    (root / ".claude" / "agents" / "mine.md").write_text("---\nname: mine\n---\nMy agent.\n")
    (root / ".mcp.json").write_text(USER_MCP)
    return root


@pytest.fixture
def codex_project(tmp_path: Path) -> Path:
    root = tmp_path / "codex-project"
    (root / ".codex").mkdir(parents=True)
    shutil.copy(CODEX_FIXTURES / "config-user.toml", root / ".codex" / "config.toml")
    shutil.copy(CODEX_FIXTURES / "hooks-user.json", root / ".codex" / "hooks.json")
    (root / ".codex" / "notes.md").write_text("our own notes\n")
    return root


def fail_on_write(monkeypatch: pytest.MonkeyPatch, failing: int) -> list[str]:
    """Make the swap's ``failing``-th file write raise; returns the paths it was asked for."""
    real = install_staged.write_atomic
    asked: list[str] = []

    def writer(root: Path, relpath: str, data: bytes, **options: Any) -> Path:
        asked.append(relpath)
        if len(asked) == failing:
            raise OSError(28, "No space left on device")
        return real(root, relpath, data, **options)

    monkeypatch.setattr(install_staged, "write_atomic", writer)
    return asked


def fake_hook(monkeypatch: pytest.MonkeyPatch, folder: Path, script: str) -> None:
    """Put first on PATH an ``ithaca-hook`` that does what ``script`` says, so hooks (and
    the preflight) run it."""
    folder.mkdir(parents=True)
    hook = folder / "ithaca-hook"
    hook.write_text(f"#!/bin/sh\n{script}\n")
    hook.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("failing", [1, 2, 4, 6])
def test_a_write_failing_mid_install_puts_every_file_back(
    claude_project: Path, scratch_temp: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    before = snapshot(claude_project)
    asked = fail_on_write(monkeypatch, failing)

    with pytest.raises(Refused) as refused:
        install_claude.install(claude_project)

    assert refused.value.code == "INSTALL_WRITE_FAILED"
    assert refused.value.details["path"].endswith(asked[failing - 1])
    assert snapshot(claude_project) == before
    assert list(scratch_temp.iterdir()) == []


@pytest.mark.parametrize(
    ("failure", "code"),
    [("write", "INSTALL_WRITE_FAILED"), ("preflight", "INSTALL_PREFLIGHT_FAILED")],
)
def test_a_failed_reinstall_leaves_the_first_install_as_it_was(
    claude_project: Path, monkeypatch: pytest.MonkeyPatch, failure: str, code: str
) -> None:
    install_claude.install(claude_project)
    first = snapshot(claude_project)
    if failure == "write":  # the user took the server out: the reinstall puts it back
        (claude_project / ".mcp.json").write_text('{"mcpServers": {}}\n')
        first = snapshot(claude_project)
        fail_on_write(monkeypatch, 1)
    else:
        (claude_project / ".mcp.json").write_text('{"mcpServers": {}}\n')
        first = snapshot(claude_project)
        fake_hook(monkeypatch, claude_project.parent / "broken" / "bin", "exit 1")

    with pytest.raises(Refused) as refused:
        install_claude.install(claude_project)

    assert refused.value.code == code
    assert snapshot(claude_project) == first


def test_a_write_failing_mid_codex_install_puts_every_file_back(
    codex_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(codex_project)
    fail_on_write(monkeypatch, 2)

    with pytest.raises(Refused) as refused:
        install_codex.install(codex_project)

    assert refused.value.details["path"] == str(codex_project / ".codex" / "hooks.json")
    assert snapshot(codex_project) == before


def test_a_write_failing_mid_uninstall_keeps_the_install(
    claude_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_claude.install(claude_project)
    installed = snapshot(claude_project)
    fail_on_write(monkeypatch, 2)

    with pytest.raises(Refused):
        install_claude.uninstall(claude_project)

    assert snapshot(claude_project) == installed
    assert check(claude_project, "claude")["findings"] == []


@pytest.mark.parametrize(
    ("script", "problem"),
    [
        ("exit 1", "the SessionStart hook exited with 1"),
        ("echo '{}'", "did not reach Ithaca"),
        ("echo 'not json'", "other than a JSON object"),
    ],
)
@pytest.mark.parametrize("host", [install_claude, install_codex])
def test_a_failed_preflight_leaves_the_project_untouched(
    claude_project: Path,
    codex_project: Path,
    scratch_temp: Path,
    monkeypatch: pytest.MonkeyPatch,
    host: Any,
    script: str,
    problem: str,
) -> None:
    root = claude_project if host is install_claude else codex_project
    before = snapshot(root)
    fake_hook(monkeypatch, root.parent / "broken" / "bin", script)

    with pytest.raises(Refused) as refused:
        host.install(root)

    assert refused.value.code == "INSTALL_PREFLIGHT_FAILED"
    assert any(problem in item for item in refused.value.details["problems"])
    assert snapshot(root) == before
    assert not (root / ".ithaca").exists()
    assert list(scratch_temp.iterdir()) == []


def test_a_staged_file_that_does_not_parse_is_never_swapped_in(
    claude_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(claude_project)
    monkeypatch.setattr(install_claude, "pretty", lambda document: '{"hooks": ')

    with pytest.raises(Refused) as refused:
        install_claude.install(claude_project)

    assert "does not parse" in refused.value.details["problems"][0]
    assert snapshot(claude_project) == before


@pytest.mark.parametrize(
    ("host", "project"),
    [(install_claude, "claude_project"), (install_codex, "codex_project")],
)
def test_uninstall_gives_the_users_files_back_byte_for_byte(
    host: Any, project: str, request: pytest.FixtureRequest
) -> None:
    root: Path = request.getfixturevalue(project)
    before = snapshot(root)

    host.install(root)
    assert snapshot(root) != before
    host.uninstall(root)

    after = snapshot(root)
    assert {path: data for path, data in after.items() if not path.startswith(".ithaca")} == before


def test_a_file_the_user_edited_after_install_keeps_the_edit(claude_project: Path) -> None:
    install_claude.install(claude_project)
    settings = claude_project / ".claude" / "settings.json"
    settings.write_text(settings.read_text().replace('"model": "', '"model": "edited-'))

    install_claude.uninstall(claude_project)

    assert '"model": "edited-' in settings.read_text()
    assert "ithaca-hook" not in settings.read_text()


def test_a_swap_keeps_the_permissions_of_the_file_it_replaces(claude_project: Path) -> None:
    settings = claude_project / ".claude" / "settings.json"
    settings.chmod(0o600)

    install_claude.install(claude_project)

    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
