"""The Stop-hook block cap `ithaca install claude` sets, keeps, and gives back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ithaca.cli.entry import cli
from ithaca.hosts.claude.installer import install, uninstall
from ithaca.kernel.errors import InvalidInput
from ithaca.ultragoal.hostcap import stop_cap

CAP = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
LABEL = f"env {CAP}"


@pytest.fixture(autouse=True)
def no_outside_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ITHACA_DIR", raising=False)
    monkeypatch.delenv(CAP, raising=False)


def project(tmp_path: Path, settings: dict[str, Any] | None = None) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    if settings is not None:
        (root / ".claude").mkdir()
        (root / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    return root


def settings_of(root: Path) -> dict[str, Any]:
    settings: dict[str, Any] = json.loads((root / ".claude" / "settings.json").read_text())
    return settings


def cap_record(root: Path) -> dict[str, Any]:
    manifest = root / ".ithaca" / ".runtime" / "installs" / "claude.json"
    record: dict[str, Any] = json.loads(manifest.read_text())["stopHookBlockCap"]
    return record


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_install_sets_the_cap_to_the_default_budget_plus_two_and_the_gate_reads_it(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)

    report = install(root)

    assert settings_of(root)["env"] == {CAP: "12"}
    assert stop_cap(str(root), {}) == 12
    assert LABEL in report.added
    assert report.notes == []


def test_the_cap_follows_the_configured_iteration_budget(tmp_path: Path) -> None:
    root = project(tmp_path)

    install(root, max_iterations_default=20)

    assert settings_of(root)["env"][CAP] == "22"


@pytest.mark.parametrize(("existing", "meaning"), [("0", "no cap"), ("20", "at least")])
def test_a_project_value_of_zero_or_above_ours_is_kept_reported_and_left_by_uninstall(
    tmp_path: Path, existing: str, meaning: str
) -> None:
    original = {"env": {"NODE_ENV": "dev", CAP: existing}, "model": "opus"}
    root = project(tmp_path, original)

    report = install(root)

    assert settings_of(root)["env"] == original["env"]
    assert LABEL in report.unchanged and LABEL not in report.added
    assert len(report.notes) == 1
    assert f"kept {CAP}={existing}" in report.notes[0] and meaning in report.notes[0]
    assert cap_record(root)["set"] is False

    removal = uninstall(root)

    assert settings_of(root) == original
    assert LABEL not in removal.removed


@pytest.mark.parametrize("existing", ["8", "lots", 3])
def test_a_smaller_or_unreadable_value_is_replaced_and_uninstall_puts_it_back(
    tmp_path: Path, existing: object
) -> None:
    original = {"env": {CAP: existing, "NODE_ENV": "dev"}}
    root = project(tmp_path, original)

    report = install(root)

    assert list(settings_of(root)["env"].items()) == [(CAP, "12"), ("NODE_ENV", "dev")]
    assert LABEL in report.added
    assert [note for note in report.notes if "replaced" in note]

    uninstall(root)

    assert settings_of(root) == original


def test_the_override_replaces_even_a_sufficient_value_and_uninstall_restores_it(
    tmp_path: Path,
) -> None:
    original = {"env": {CAP: "20"}}
    root = project(tmp_path, original)

    install(root, stop_hook_block_cap=30)
    assert settings_of(root)["env"][CAP] == "30"
    assert stop_cap(str(root), {}) == 30

    uninstall(root)
    assert settings_of(root) == original


def test_an_override_of_zero_turns_the_cap_off(tmp_path: Path) -> None:
    root = project(tmp_path)

    install(root, stop_hook_block_cap=0)

    assert settings_of(root)["env"][CAP] == "0"
    assert stop_cap(str(root), {}) == 0


def test_a_negative_override_is_refused_and_nothing_written(tmp_path: Path) -> None:
    root = project(tmp_path)

    with pytest.raises(InvalidInput) as refusal:
        install(root, stop_hook_block_cap=-1)

    assert refusal.value.details["pointer"] == "/stopHookBlockCap"
    assert not any(root.iterdir())


def test_a_cap_the_user_changed_after_install_survives_uninstall(tmp_path: Path) -> None:
    root = project(tmp_path)
    install(root)
    edited = settings_of(root)
    edited["env"][CAP] = "16"
    (root / ".claude" / "settings.json").write_text(json.dumps(edited))

    report = uninstall(root)

    assert settings_of(root) == {"env": {CAP: "16"}}
    assert LABEL in report.unchanged


def test_uninstall_keeps_an_env_object_the_user_had_even_when_it_empties(
    tmp_path: Path,
) -> None:
    root = project(tmp_path, {"env": {}})
    install(root)

    uninstall(root)

    assert settings_of(root) == {"env": {}}


def test_uninstall_keeps_env_variables_the_user_added_beside_ours(tmp_path: Path) -> None:
    root = project(tmp_path)
    install(root)
    edited = settings_of(root)
    edited["env"]["DEBUG"] = "1"
    (root / ".claude" / "settings.json").write_text(json.dumps(edited))

    uninstall(root)

    assert settings_of(root) == {"env": {"DEBUG": "1"}}


@pytest.mark.parametrize("existing", [None, "0", "20", "8"])
def test_reinstall_writes_nothing(tmp_path: Path, existing: str | None) -> None:
    root = project(tmp_path, {"env": {CAP: existing}} if existing else None)
    install(root)
    settings_before = (root / ".claude" / "settings.json").read_bytes()

    report = install(root)

    assert report.added == [] and report.removed == [] and report.files == []
    assert LABEL in report.unchanged
    assert (root / ".claude" / "settings.json").read_bytes() == settings_before


def test_a_reinstall_with_a_larger_budget_still_restores_the_first_value(
    tmp_path: Path,
) -> None:
    original = {"env": {CAP: "8"}}
    root = project(tmp_path, original)
    install(root)

    install(root, max_iterations_default=30)
    assert settings_of(root)["env"][CAP] == "32"

    uninstall(root)
    assert settings_of(root) == original


def test_a_plain_reinstall_after_an_override_gives_the_project_its_value_back(
    tmp_path: Path,
) -> None:
    original = {"env": {CAP: "20"}}
    root = project(tmp_path, original)
    install(root, stop_hook_block_cap=30)

    report = install(root)

    assert settings_of(root)["env"][CAP] == "20"
    assert LABEL in report.removed
    assert cap_record(root)["set"] is False
    uninstall(root)
    assert settings_of(root) == original


def test_a_local_settings_cap_that_wins_over_ours_is_reported(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.local.json").write_text(json.dumps({"env": {CAP: "8"}}))

    report = install(root)

    assert settings_of(root)["env"][CAP] == "12"
    assert any("settings.local.json" in note and f"{CAP}=8" in note for note in report.notes)


def test_an_env_that_is_not_an_object_is_refused_and_nothing_written(tmp_path: Path) -> None:
    root = project(tmp_path, {"env": ["NODE_ENV=dev"]})
    before = (root / ".claude" / "settings.json").read_bytes()

    with pytest.raises(InvalidInput) as refusal:
        install(root)

    assert refusal.value.code == "INVALID_SETTINGS"
    assert (root / ".claude" / "settings.json").read_bytes() == before
    assert not (root / ".mcp.json").exists()


# --- through the CLI ---------------------------------------------------------------------


def test_the_cli_reads_the_budget_from_configuration(project_dir: Path) -> None:
    config = project_dir / ".ithaca" / "config.toml"
    config.write_text("[ultragoal]\nmax_iterations_default = 20\n")

    done = run("--project", str(project_dir), "install", "claude", "--json")

    assert done.exit_code == 0, done.output
    assert settings_of(project_dir)["env"][CAP] == "22"
    assert LABEL in json.loads(done.output)["added"]


def test_the_cli_override_flag_sets_the_cap(project_dir: Path) -> None:
    done = run("--project", str(project_dir), "install", "claude", "--stop-hook-block-cap", "25")

    assert done.exit_code == 0, done.output
    assert settings_of(project_dir)["env"][CAP] == "25"


@pytest.mark.parametrize("value", ["-1", "many", "2.5"])
def test_a_bad_cap_flag_is_a_usage_error_that_writes_nothing(project_dir: Path, value: str) -> None:
    done = run("--project", str(project_dir), "install", "claude", "--stop-hook-block-cap", value)

    assert done.exit_code == 2
    assert "--stop-hook-block-cap" in done.output
    assert not (project_dir / ".claude").exists()


def test_the_cli_shows_a_kept_value_to_the_user(project_dir: Path) -> None:
    (project_dir / ".claude").mkdir()
    (project_dir / ".claude" / "settings.json").write_text(json.dumps({"env": {CAP: "0"}}))

    done = run("--project", str(project_dir), "install", "claude")

    assert done.exit_code == 0, done.output
    assert f"! kept {CAP}=0" in done.output
