"""`ithaca install --doctor`: an install as recorded passes, an edited one is reported."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ithaca.cli.entry import cli
from ithaca.hosts.claude import installer as install_claude
from ithaca.hosts.codex import installer as install_codex
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.hosts.install.doctor import check
from ithaca.kernel.canon import canonical

SETTINGS = ".claude/settings.json"
SKILL = ".claude/skills/ulysses/SKILL.md"
MANIFEST = ".ithaca/.runtime/installs/claude.json"


def doctor(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--project", str(root), "install", "--doctor", *args])


def findings(root: Path, host: str) -> list[tuple[str, str]]:
    return [(item["code"], item["label"]) for item in check(root, host)["findings"]]


def edit_json(path: Path, change: object) -> None:
    document = json.loads(path.read_text())
    change(document)  # type: ignore[operator]
    path.write_text(json.dumps(document, indent=2))


def test_a_fresh_install_passes_and_the_cli_exits_zero(tmp_path: Path) -> None:
    install_claude.install(tmp_path)

    result = check(tmp_path, "claude")
    done = doctor(tmp_path, "claude", "--json")

    assert result["installed"] and result["findings"] == []
    # the server, 3 files, the Stop cap and the sandbox profile
    assert result["checked"] == len(install_claude.CLAUDE_EVENTS) + 6
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["ok"] is True


def test_an_edited_hook_is_drift_and_the_cli_exits_non_zero(tmp_path: Path) -> None:
    install_claude.install(tmp_path)
    edit_json(
        tmp_path / SETTINGS,
        lambda document: document["hooks"]["PreToolUse"][0]["hooks"][0].update(timeout=60),
    )

    done = doctor(tmp_path, "claude", "--json")

    assert done.exit_code == 1
    reported = json.loads(done.output)["hosts"][0]["findings"]
    assert [(item["code"], item["label"]) for item in reported] == [
        ("INSTALL_DRIFT", "hook PreToolUse")
    ]
    assert reported[0]["path"] == SETTINGS


def test_the_users_own_edits_beside_ithacas_entries_are_not_drift(tmp_path: Path) -> None:
    install_claude.install(tmp_path)
    edit_json(tmp_path / SETTINGS, lambda document: document.update(model="opus"))
    edit_json(
        tmp_path / ".mcp.json",
        lambda document: document["mcpServers"].update(docs={"command": "npx"}),
    )

    assert findings(tmp_path, "claude") == []


def test_an_edited_skill_is_drift_and_a_removed_one_is_missing(tmp_path: Path) -> None:
    install_claude.install(tmp_path)
    (tmp_path / SKILL).write_text("my own notes\n")
    (tmp_path / ".claude/agents/code-reviewer.md").unlink()

    assert findings(tmp_path, "claude") == [
        ("INSTALL_DRIFT", "skill ulysses"),
        ("INSTALL_MISSING", "agent code-reviewer"),
    ]
    assert doctor(tmp_path, "claude").exit_code == 1


def test_a_removed_server_and_a_changed_cap_are_reported(tmp_path: Path) -> None:
    install_claude.install(tmp_path)
    edit_json(tmp_path / ".mcp.json", lambda document: document["mcpServers"].clear())
    edit_json(
        tmp_path / SETTINGS,
        lambda document: document["env"].update(CLAUDE_CODE_STOP_HOOK_BLOCK_CAP="3"),
    )

    assert findings(tmp_path, "claude") == [
        ("INSTALL_MISSING", "mcp server ithaca"),
        ("INSTALL_DRIFT", "env CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"),
    ]


def test_a_settings_file_that_no_longer_parses_is_drift(tmp_path: Path) -> None:
    install_claude.install(tmp_path)
    (tmp_path / SETTINGS).write_text("{oops")

    reported = findings(tmp_path, "claude")

    assert {code for code, _ in reported} == {"INSTALL_DRIFT"}
    assert ("INSTALL_DRIFT", "hook Stop") in reported


def test_an_edited_manifest_is_drift(tmp_path: Path) -> None:
    install_claude.install(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    manifest["provenance"]["entries"].pop()
    (tmp_path / MANIFEST).write_bytes(canonical(manifest) + b"\n")

    assert findings(tmp_path, "claude") == [("INSTALL_DRIFT", "install manifest")]


def test_ithaca_gone_from_path_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "project"
    root.mkdir()
    install_claude.install(root)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    assert ("INSTALL_MISSING", "command ithaca-hook") in findings(root, "claude")


def test_codex_hooks_the_users_config_no_longer_trusts_are_reported(tmp_path: Path) -> None:
    install_codex.install(tmp_path)
    config = Path(os.environ["CODEX_HOME"]) / "config.toml"
    assert "trusted_hash" in config.read_text()
    config.write_text("")

    found = findings(tmp_path, "codex")
    assert ("HOOKS_UNTRUSTED", "codex trust") in found


def test_codex_drift_in_the_config_table_and_the_hooks_file(tmp_path: Path) -> None:
    install_codex.install(tmp_path)
    assert findings(tmp_path, "codex") == []
    config = tmp_path / ".codex" / "config.toml"
    table = "[mcp_servers.ithaca]\n"
    config.write_text(config.read_text().replace(table, table + "startup_timeout_sec = 20\n"))
    (tmp_path / ".codex" / "hooks.json").write_text("{}")

    reported = findings(tmp_path, "codex")

    assert ("INSTALL_DRIFT", "mcp server ithaca") in reported
    assert ("INSTALL_MISSING", "hook Stop") in reported
    assert ("INSTALL_MISSING", "hook SessionStart") in reported


def test_a_host_never_installed_is_missing(tmp_path: Path) -> None:
    done = doctor(tmp_path, "codex")

    assert done.exit_code == 1
    assert "INSTALL_MISSING" in done.output
    assert "ithaca install codex" in done.output


def test_without_a_host_the_doctor_checks_every_installed_host(tmp_path: Path) -> None:
    project, empty = tmp_path / "project", tmp_path / "empty"
    project.mkdir()
    empty.mkdir()
    install_codex.install(project)

    done = doctor(project, "--json")

    assert done.exit_code == 0, done.output
    assert [item["host"] for item in json.loads(done.output)["hosts"]] == ["codex"]
    assert doctor(empty).exit_code == 1  # nothing installed at all


def test_the_doctor_writes_nothing(tmp_path: Path) -> None:
    install_claude.install(tmp_path)
    (tmp_path / SKILL).write_text("my own notes\n")
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}

    doctor(tmp_path, "claude")

    assert {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()} == before


def test_a_manifest_without_provenance_asks_for_a_reinstall_that_records_it(
    tmp_path: Path,
) -> None:
    install_claude.install(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    del manifest["provenance"]  # as an Ithaca before provenance wrote it
    (tmp_path / MANIFEST).write_bytes(canonical(manifest) + b"\n")
    assert findings(tmp_path, "claude") == [("INSTALL_DRIFT", "install manifest")]

    install_claude.install(tmp_path)

    assert findings(tmp_path, "claude") == []


def test_a_sandbox_that_can_no_longer_start_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_claude.install(tmp_path)
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # Ithaca's, no bubblewrap
    monkeypatch.setattr(install_sandbox, "SYSTEM_PATH", str(tmp_path / "no-tools"))

    result = check(tmp_path, "claude")

    assert result["profile"] == "sandboxed"
    assert [code for code, _ in findings(tmp_path, "claude")] == ["SANDBOX_UNAVAILABLE"]
