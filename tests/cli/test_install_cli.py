"""`ithaca install` and `ithaca uninstall` for both hosts, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ithaca.cli.entry import cli
from ithaca.hosts.codex.installer import DEGRADED

CODEX_FIXTURES = Path(__file__).parents[1] / "hosts" / "fixtures" / "codex"


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--project", str(root), *args])


@pytest.fixture
def codex_files(project_dir: Path) -> Path:
    (project_dir / ".codex").mkdir()
    for name, target in (("config-user.toml", "config.toml"), ("hooks-user.json", "hooks.json")):
        (project_dir / ".codex" / target).write_bytes((CODEX_FIXTURES / name).read_bytes())
    return project_dir


def codex_bytes(root: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in (root / ".codex").iterdir()}


def test_install_codex_reports_the_wiring_and_the_degraded_surfaces(codex_files: Path) -> None:
    done = run(codex_files, "install", "codex")

    assert done.exit_code == 0, done.output
    assert "+ mcp server ithaca" in done.output
    assert "+ hook PreToolUse" in done.output
    assert "Degraded on this host:" in done.output
    assert f"~ {DEGRADED[0]}" in done.output


def test_install_codex_as_json_lists_degraded_and_uninstall_takes_it_back(
    codex_files: Path,
) -> None:
    before = codex_bytes(codex_files)

    installed = run(codex_files, "install", "codex", "--json")
    report = json.loads(installed.output)
    removed = run(codex_files, "uninstall", "codex", "--json")

    assert report["degraded"] == list(DEGRADED)
    assert str(codex_files / ".codex" / "config.toml") in report["files"]
    assert removed.exit_code == 0, removed.output
    assert "mcp server ithaca" in json.loads(removed.output)["removed"]
    assert codex_bytes(codex_files) == before


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_install_uninstall_flag_is_the_uninstall_command(project_dir: Path, host: str) -> None:
    assert run(project_dir, "install", host).exit_code == 0

    done = run(project_dir, "install", "--uninstall", host, "--json")

    assert done.exit_code == 0, done.output
    assert "hook Stop" in json.loads(done.output)["removed"]
    assert not (project_dir / ".ithaca" / ".runtime" / "installs" / f"{host}.json").exists()


def test_the_stop_hook_block_cap_is_a_usage_error_for_codex(codex_files: Path) -> None:
    before = codex_bytes(codex_files)

    done = run(codex_files, "install", "codex", "--stop-hook-block-cap", "20")

    assert done.exit_code == 2
    assert "--stop-hook-block-cap" in done.output and "ithaca install claude" in done.output
    assert codex_bytes(codex_files) == before


@pytest.mark.parametrize(
    "args",
    [
        ["install"],
        ["install", "--uninstall"],
        ["install", "--doctor", "--uninstall", "claude"],
        ["install", "--doctor", "--stop-hook-block-cap", "3"],
        ["uninstall", "vim"],
    ],
)
def test_incomplete_or_contradictory_words_are_usage_errors(
    project_dir: Path, args: list[str]
) -> None:
    done = run(project_dir, *args)

    assert done.exit_code == 2
    assert not (project_dir / ".ithaca" / ".runtime" / "installs").exists()


def test_the_doctor_after_a_cli_install_is_clean(project_dir: Path) -> None:
    run(project_dir, "install", "claude")

    done = run(project_dir, "install", "--doctor", "claude")

    assert done.exit_code == 0, done.output
    assert "claude: 15 entries as installed" in done.output
