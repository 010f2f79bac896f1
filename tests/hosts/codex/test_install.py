"""Installing Ithaca into a Codex project, and taking it back out byte for byte."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ithaca.hosts.codex.installer import CODEX_EVENTS, DEGRADED, hook_command, install, uninstall
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.hosts.install import server as install_server
from ithaca.kernel.errors import Conflict, InvalidInput

FIXTURES = Path(__file__).parents[1] / "fixtures" / "codex"
CONFIG = ".codex/config.toml"
HOOKS = ".codex/hooks.json"


def manifest(root: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((root / ".ithaca/.runtime/installs/codex.json").read_text())
    return found


def config(root: Path) -> dict[str, Any]:
    return tomllib.loads((root / CONFIG).read_text())


def commands(root: Path, event: str) -> list[str]:
    groups = json.loads((root / HOOKS).read_text())["hooks"].get(event, [])
    return [hook["command"] for group in groups for hook in group["hooks"]]


@pytest.fixture
def user_files(tmp_path: Path) -> Path:
    """A project whose ``.codex/`` already holds the user's own config and hooks."""
    root = tmp_path / "repo"
    (root / ".codex").mkdir(parents=True)
    for name, target in (("config-user.toml", CONFIG), ("hooks-user.json", HOOKS)):
        (root / target).write_bytes((FIXTURES / name).read_bytes())
    return root


def test_install_registers_the_server_and_the_hooks_and_leaves_the_features(user_files):
    install(user_files)
    table = config(user_files)
    assert table["mcp_servers"]["ithaca"] == {"command": "ithaca", "args": ["mcp"]}
    assert table["mcp_servers"]["docs"]["command"] == "npx"
    assert table["features"] == {"web_search_request": True}
    for spec in CODEX_EVENTS:
        assert hook_command(spec.event) in commands(user_files, spec.event)
    assert commands(user_files, "Stop")[0] == "python3 .codex/hooks/stop_notify.py"
    recorded = manifest(user_files)
    assert recorded["degraded"] == list(DEGRADED)
    assert recorded["serverName"] == "ithaca"


def test_the_installed_hook_command_answers_codex(project_dir):
    install(project_dir)
    stop = json.loads((FIXTURES / "stop.json").read_text().replace("__CWD__", str(project_dir)))
    done = subprocess.run(
        ["/bin/sh", "-c", hook_command("Stop")],
        input=json.dumps(stop),
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (0, "{}\n")
    assert hook_command("Stop").endswith("ithaca-hook codex Stop --timeout 90")


def test_uninstall_leaves_the_users_config_byte_identical(user_files):
    before = {path: (user_files / path).read_bytes() for path in (CONFIG, HOOKS)}
    install(user_files)
    assert (user_files / CONFIG).read_bytes() != before[CONFIG]
    report = uninstall(user_files)
    assert (user_files / CONFIG).read_bytes() == before[CONFIG]
    assert (user_files / HOOKS).read_bytes() == before[HOOKS]
    assert "mcp server ithaca" in report.removed and "codex trust: project" in report.removed
    assert not (user_files / ".ithaca/.runtime/installs/codex.json").exists()


def test_uninstall_removes_the_files_install_created(tmp_path):
    install(tmp_path)
    assert (tmp_path / CONFIG).is_file() and (tmp_path / HOOKS).is_file()
    uninstall(tmp_path)
    assert not (tmp_path / ".codex").exists()


def test_uninstall_removes_the_users_codex_config_only_when_install_created_it(
    tmp_path, monkeypatch
):
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    install(tmp_path)
    install(tmp_path)  # a second install keeps the record that the first created the file
    assert "trusted" in (home / "config.toml").read_text()
    uninstall(tmp_path)
    assert not (home / "config.toml").exists() and home.is_dir()

    (home / "config.toml").write_text('model = "gpt-5.5"\n')
    install(tmp_path)
    uninstall(tmp_path)
    assert (home / "config.toml").read_text() == 'model = "gpt-5.5"\n'


def test_a_second_install_changes_nothing(user_files):
    install(user_files)
    written = {path: (user_files / path).read_bytes() for path in (CONFIG, HOOKS)}
    report = install(user_files)
    assert report.added == [] and report.removed == [] and report.files == []
    assert {path: (user_files / path).read_bytes() for path in written} == written
    uninstall(user_files)
    assert (user_files / CONFIG).read_bytes() == (FIXTURES / "config-user.toml").read_bytes()


def test_a_moved_ithaca_replaces_its_own_table_and_hooks(user_files, tmp_path, monkeypatch):
    install(user_files)
    script = tmp_path / "opt" / "ithaca"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    moved = {"command": str(script), "args": ["mcp"]}
    monkeypatch.setattr(install_server, "mcp_entry", lambda: moved)
    install(user_files)
    assert config(user_files)["mcp_servers"]["ithaca"] == moved
    assert (user_files / CONFIG).read_text().count("[mcp_servers.ithaca]") == 1
    assert commands(user_files, "PreToolUse").count(hook_command("PreToolUse")) == 1
    uninstall(user_files)
    assert (user_files / CONFIG).read_bytes() == (FIXTURES / "config-user.toml").read_bytes()


def test_a_renamed_server_replaces_the_old_table(user_files):
    install(user_files)
    report = install(user_files, server_name="ithaca-work")
    assert "mcp server ithaca" in report.removed and "mcp server ithaca-work" in report.added
    assert set(config(user_files)["mcp_servers"]) == {"docs", "ithaca-work"}
    uninstall(user_files)
    assert (user_files / CONFIG).read_bytes() == (FIXTURES / "config-user.toml").read_bytes()


def test_a_server_name_taken_by_another_program_is_refused_and_nothing_written(user_files):
    before = (user_files / CONFIG).read_bytes()
    with pytest.raises(Conflict) as raised:
        install(user_files, server_name="docs")
    assert raised.value.code == "MCP_SERVER_NAME_TAKEN"
    assert (user_files / CONFIG).read_bytes() == before
    assert not (user_files / ".ithaca").exists()


def test_malformed_toml_is_refused_and_nothing_written(tmp_path):
    (tmp_path / ".codex").mkdir()
    (tmp_path / CONFIG).write_text("[mcp_servers\ncommand = 1\n")
    with pytest.raises(InvalidInput) as raised:
        install(tmp_path)
    assert raised.value.code == "INVALID_SETTINGS"
    assert not (tmp_path / HOOKS).exists()


@pytest.mark.parametrize("name", ["hooks", "codex_hooks"])
def test_hooks_the_user_switched_off_stay_off_and_are_reported(tmp_path, name):
    (tmp_path / ".codex").mkdir()
    (tmp_path / CONFIG).write_text(f"[features]\n{name} = false\n")
    report = install(tmp_path)
    assert config(tmp_path)["features"] == {name: False}
    switched_off = f"hooks are switched off ([features] {name} = false)"
    assert switched_off in report.notes
    assert switched_off in manifest(tmp_path)["degraded"]


def test_the_feature_flag_an_earlier_install_added_is_taken_back(tmp_path):
    (tmp_path / ".codex").mkdir()
    original = 'model = "o3"\n'
    (tmp_path / CONFIG).write_text(original)
    install(tmp_path)
    recorded = manifest(tmp_path)
    text = "\n[features]\ncodex_hooks = true\n"
    (tmp_path / CONFIG).write_text((tmp_path / CONFIG).read_text() + text)
    recorded["configAdditions"].append(
        {
            "label": "feature codex_hooks",
            "key": ["features", "codex_hooks"],
            "value": True,
            "anchor": "",
            "text": text,
        }
    )
    (tmp_path / ".ithaca/.runtime/installs/codex.json").write_text(json.dumps(recorded))
    report = install(tmp_path)
    assert "feature codex_hooks" in report.removed
    assert "features" not in config(tmp_path)
    uninstall(tmp_path)
    assert (tmp_path / CONFIG).read_text() == original


def test_an_edited_ithaca_table_is_left_to_the_user(user_files):
    install(user_files)
    path = user_files / CONFIG
    path.write_text(path.read_text() + "startup_timeout_sec = 20\n")
    report = uninstall(user_files)
    assert "mcp server ithaca" in report.unchanged
    assert config(user_files)["mcp_servers"]["ithaca"]["startup_timeout_sec"] == 20
    assert "codex_hooks" not in config(user_files)["features"]


_KEYS = st.text("abcxyz_", min_size=1, max_size=6)
_VALUES = st.one_of(st.integers(-5, 5), st.booleans(), st.text("ab #[]\"'\\", max_size=6))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tables=st.lists(
        st.tuples(
            st.sampled_from(["", "features", "tools", "mcp_servers.docs", "profiles.fast"]),
            st.dictionaries(_KEYS, _VALUES, max_size=3),
        ),
        max_size=4,
        unique_by=lambda table: table[0],
    ),
    comment=st.booleans(),
    final_newline=st.booleans(),
)
def test_any_users_config_survives_a_round_trip(tmp_path_factory, tables, comment, final_newline):
    lines = ["# kept as written"] if comment else []
    for name, values in sorted(tables, key=lambda table: table[0] != ""):
        if name:
            lines.append(f"[{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    original = "\n".join(lines) + ("\n" if final_newline and lines else "")
    root = tmp_path_factory.mktemp("codex")
    (root / ".codex").mkdir()
    (root / CONFIG).write_text(original)
    install(root)
    installed = config(root)
    assert installed["mcp_servers"].pop("ithaca")["args"][-1] == "mcp"
    installed.get("features", {}).pop("codex_hooks", None)
    assert installed.pop("default_permissions") == "ithaca"
    assert installed["permissions"].pop("ithaca")["extends"] == ":workspace"
    user = tomllib.loads(original)
    assert {key: value for key, value in installed.items() if value != {} or key in user} == user
    uninstall(root)
    assert (root / CONFIG).read_text() == original


def test_the_sandboxed_profile_makes_ithacas_permission_profile_the_default(tmp_path):
    report = install(tmp_path)
    config = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert manifest(tmp_path)["sandbox"] == {"profile": "sandboxed"}
    assert config["default_permissions"] == "ithaca"
    profile = config["permissions"]["ithaca"]
    assert profile["extends"] == ":workspace"
    assert profile["filesystem"][":workspace_roots"] == {
        ".git": "write", ".git/hooks": "read", ".git/config": "read", ".ithaca": "read"
    }  # fmt: skip
    assert profile["filesystem"]["~/.ithaca"] == "read"
    assert profile["filesystem"][install_sandbox.seal_key()] == "deny"
    assert not any("best-effort" in note for note in report.notes)


def test_a_claude_code_folder_is_read_only_where_there_is_one(tmp_path):
    (tmp_path / ".claude").mkdir()
    install(tmp_path)
    config = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert config["permissions"]["ithaca"]["filesystem"][":workspace_roots"][".claude"] == "read"


def test_an_existing_mcp_json_is_read_only_too(tmp_path):
    (tmp_path / ".mcp.json").write_text("{}")
    install(tmp_path)
    config = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert config["permissions"]["ithaca"]["filesystem"][":workspace_roots"][".mcp.json"] == "read"


def test_the_unsandboxed_profile_takes_the_permission_profile_back(tmp_path):
    install(tmp_path)
    report = install(tmp_path, profile="unsandboxed")
    config = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert "default_permissions" not in config and "permissions" not in config
    assert manifest(tmp_path)["sandbox"] == {"profile": "unsandboxed"}
    assert any("best-effort" in note for note in report.notes)
    uninstall(tmp_path)
    assert not (tmp_path / ".codex").exists()


def test_a_permission_profile_of_the_users_own_is_left_alone(tmp_path):
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('default_permissions = ":workspace"\n')
    with pytest.raises(Conflict) as refused:
        install(tmp_path)
    assert refused.value.code == "PERMISSIONS_TAKEN"
    assert "--profile unsandboxed" in refused.value.message
    assert (
        tmp_path / ".codex" / "config.toml"
    ).read_text() == 'default_permissions = ":workspace"\n'


ROLE = ".codex/agents/code-reviewer.toml"


def test_install_adds_the_reviewer_as_a_codex_agent_role_from_the_same_text(tmp_path):
    from importlib.resources import files

    from ithaca.kernel.config_schema import SCHEMA

    root = tmp_path / "repo"
    report = install(root)

    assert "agent code-reviewer" in report.added
    role = tomllib.loads((root / ROLE).read_text())
    assert set(role) == {"name", "description", "sandbox_mode", "developer_instructions"}
    assert role["sandbox_mode"] == "read-only"  # it reads and checks; it submits over MCP
    assert role["name"] == SCHEMA["ultragoal"]["reviewer_agent_type"][1]
    shipped = files("ithaca.skills").joinpath("agents", "code-reviewer.md").read_text()
    assert role["developer_instructions"].strip() == shipped.split("---\n", 2)[2].strip()
    assert "ULTRAGOAL_REVIEW session=<session id> dispatch=<n>" in role["developer_instructions"]
    assert install(root).unchanged.count("agent code-reviewer") == 1

    removal = uninstall(root)

    assert "agent code-reviewer" in removal.removed
    assert not (root / ".codex" / "agents").exists()


def test_a_role_file_of_the_users_own_refuses_the_install_and_nothing_is_written(tmp_path):
    root = tmp_path / "repo"
    (root / ".codex" / "agents").mkdir(parents=True)
    (root / ROLE).write_text('name = "code-reviewer"\ndescription = "Ours"\n')

    with pytest.raises(Conflict) as refused:
        install(root)

    assert refused.value.code == "AGENT_PATH_TAKEN"
    assert (root / ROLE).read_text() == 'name = "code-reviewer"\ndescription = "Ours"\n'
    assert not (root / CONFIG).exists() and not (root / HOOKS).exists()


def test_an_edited_role_file_is_left_by_uninstall(tmp_path):
    root = tmp_path / "repo"
    install(root)
    (root / ROLE).write_text((root / ROLE).read_text() + "# our note\n")

    removal = uninstall(root)

    assert "agent code-reviewer" in removal.unchanged
    assert (root / ROLE).read_text().endswith("# our note\n")
