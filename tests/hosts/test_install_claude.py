"""Installing Ithaca into a Claude Code project, and taking it back out."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ithaca.hosts.install_claude import (
    CLAUDE_EVENTS,
    hook_command,
    install,
    uninstall,
)
from ithaca.kernel.canon import canonical, digest_bytes
from ithaca.kernel.clock import parse
from ithaca.kernel.errors import Conflict, InvalidInput

FIXTURES = Path(__file__).parent / "fixtures" / "claude"
EVENTS = [spec.event for spec in CLAUDE_EVENTS]
SKILL = ".claude/skills/ulysses/SKILL.md"


def manifest_server(root: Path) -> str | None:
    """The server name the install manifest records, or None without a manifest."""
    path = root / ".ithaca" / ".runtime" / "installs" / "claude.json"
    return json.loads(path.read_text())["serverName"] if path.is_file() else None


def make_bin(folder: Path) -> Path:
    """A folder holding an interpreter and Ithaca's two console scripts, like a venv's bin."""
    folder.mkdir(parents=True)
    for name in ("python", "ithaca", "ithaca-hook"):
        script = folder / name
        script.write_text("#!/bin/sh\n")
        script.chmod(0o755)
    return folder


def use_interpreter(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(folder / "python"))


@pytest.fixture(autouse=True)
def hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ITHACA_DIR from the outside, no real scripts on PATH, a fake interpreter."""
    monkeypatch.delenv("ITHACA_DIR", raising=False)
    empty_path = tmp_path / "empty-path"
    empty_path.mkdir()
    monkeypatch.setenv("PATH", str(empty_path))
    folder = make_bin(tmp_path / "venv-a" / "bin")
    use_interpreter(monkeypatch, folder)
    return folder


def project_with(tmp_path: Path, settings: str | None = None, mcp: str | None = None) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    if settings:
        (root / ".claude").mkdir()
        shutil.copy(FIXTURES / settings, root / ".claude" / "settings.json")
    if mcp:
        shutil.copy(FIXTURES / mcp, root / ".mcp.json")
    return root


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def fixture(name: str) -> dict:
    return load(FIXTURES / name)


def settings_of(root: Path) -> dict:
    return load(root / ".claude" / "settings.json")


def ithaca_commands(document: dict, event: str) -> list[str]:
    return [
        hook["command"]
        for group in document["hooks"].get(event, [])
        for hook in group["hooks"]
        if "ithaca.hosts.main" in hook["command"]
    ]


def test_install_adds_every_claude_event_with_an_explicit_timeout(
    tmp_path: Path, hermetic: Path
) -> None:
    root = project_with(tmp_path, settings="settings-empty.json")

    install(root)

    hooks = settings_of(root)["hooks"]
    assert list(hooks) == EVENTS
    timeouts = {event: groups[0]["hooks"][0]["timeout"] for event, groups in hooks.items()}
    assert timeouts == {
        "SessionStart": 10,
        "UserPromptSubmit": 10,
        "PreToolUse": 10,
        "PostToolUse": 10,
        "PreCompact": 10,
        "Stop": 15,
        "SubagentStop": 15,
        "SessionEnd": 10,
    }
    matchers = {event: groups[0].get("matcher") for event, groups in hooks.items()}
    assert matchers == {event: "*" if "ToolUse" in event else None for event in EVENTS}
    assert all("matcher" not in hooks[event][0] for event in EVENTS if "ToolUse" not in event)
    assert hooks["Stop"][0]["hooks"] == [
        {"type": "command", "command": hook_command("Stop"), "timeout": 15}
    ]
    assert load(root / ".mcp.json") == {
        "mcpServers": {"ithaca": {"command": str(hermetic / "ithaca"), "args": ["mcp"]}}
    }


def test_install_creates_the_settings_folder_with_two_space_json(tmp_path: Path) -> None:
    root = project_with(tmp_path)

    install(root)

    for path in (root / ".claude" / "settings.json", root / ".mcp.json"):
        text = path.read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"


def test_install_keeps_the_users_hooks_and_settings_in_their_order(tmp_path: Path) -> None:
    root = project_with(tmp_path, settings="settings-user-hooks.json")
    original = fixture("settings-user-hooks.json")

    install(root)

    merged = settings_of(root)
    assert list(merged) == list(original)
    assert {key: merged[key] for key in ("permissions", "env", "model")} == {
        key: original[key] for key in ("permissions", "env", "model")
    }
    new_events = [event for event in EVENTS if event not in original["hooks"]]
    assert list(merged["hooks"]) == list(original["hooks"]) + new_events
    assert merged["hooks"]["PreToolUse"][:2] == original["hooks"]["PreToolUse"]
    assert merged["hooks"]["Stop"][:1] == original["hooks"]["Stop"]
    assert merged["hooks"]["Notification"] == original["hooks"]["Notification"]
    assert len(merged["hooks"]["PreToolUse"]) == 3
    assert len(merged["hooks"]["Stop"]) == 2


def test_reinstall_writes_nothing_and_adds_no_duplicates(tmp_path: Path) -> None:
    root = project_with(tmp_path, settings="settings-user-hooks.json")
    install(root)
    files = [root / ".claude" / "settings.json", root / ".mcp.json"]
    files.append(root / ".ithaca" / ".runtime" / "installs" / "claude.json")
    before = [path.read_bytes() for path in files]

    report = install(root)

    assert report.added == [] and report.removed == [] and report.files == []
    assert sorted(report.unchanged) == sorted(
        [f"hook {e}" for e in EVENTS] + ["mcp server ithaca", "skill ulysses"]
    )
    assert [path.read_bytes() for path in files] == before
    assert all(len(ithaca_commands(settings_of(root), event)) == 1 for event in EVENTS)


def test_reinstall_from_a_moved_interpreter_replaces_only_ithacas_entries_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hermetic: Path
) -> None:
    root = project_with(tmp_path, settings="settings-user-hooks.json")
    install(root)
    edited = settings_of(root)
    users_later_hook = {"hooks": [{"type": "command", "command": "echo later"}]}
    edited["hooks"]["PreToolUse"].append(users_later_hook)
    (root / ".claude" / "settings.json").write_text(json.dumps(edited))
    moved = make_bin(tmp_path / "venv-b" / "bin")
    use_interpreter(monkeypatch, moved)

    report = install(root)

    merged = settings_of(root)
    assert str(hermetic) not in json.dumps(merged)
    assert str(hermetic) not in (root / ".mcp.json").read_text()
    pre_tool_use = merged["hooks"]["PreToolUse"]
    assert pre_tool_use[2]["hooks"][0]["command"] == hook_command("PreToolUse")
    assert pre_tool_use[2]["hooks"][0]["command"].startswith(f"{moved}/python ")
    assert pre_tool_use[3] == users_later_hook
    assert pre_tool_use[:2] == fixture("settings-user-hooks.json")["hooks"]["PreToolUse"]
    assert all(len(ithaca_commands(merged, event)) == 1 for event in EVENTS)
    assert load(root / ".mcp.json")["mcpServers"]["ithaca"]["command"] == str(moved / "ithaca")
    assert "hook Stop" in report.removed and "hook Stop" in report.added
    assert "mcp server ithaca" in report.removed and "mcp server ithaca" in report.added


def test_reinstall_collapses_duplicated_copies_of_ithacas_hook(tmp_path: Path) -> None:
    root = project_with(tmp_path, settings="settings-user-hooks.json")
    install(root)
    merged_twice = settings_of(root)
    merged_twice["hooks"]["Stop"].append(merged_twice["hooks"]["Stop"][1])
    (root / ".claude" / "settings.json").write_text(json.dumps(merged_twice))

    report = install(root)

    stop = settings_of(root)["hooks"]["Stop"]
    assert stop == merged_twice["hooks"]["Stop"][:2]
    assert report.removed == ["hook Stop"]


@pytest.mark.parametrize("settings_fixture", ["settings-empty.json", "settings-user-hooks.json"])
def test_uninstall_gives_back_the_settings_the_user_had(
    tmp_path: Path, settings_fixture: str
) -> None:
    root = project_with(tmp_path, settings=settings_fixture)
    install(root)

    report = uninstall(root)

    assert settings_of(root) == fixture(settings_fixture)
    assert load(root / ".mcp.json") == {}
    assert sorted(report.removed) == sorted(
        [f"hook {e}" for e in EVENTS] + ["mcp server ithaca", "skill ulysses"]
    )
    assert not (root / ".ithaca" / ".runtime" / "installs" / "claude.json").exists()
    assert not (root / ".claude" / "skills").exists()


def test_uninstall_keeps_the_edits_the_user_made_after_install(tmp_path: Path) -> None:
    root = project_with(tmp_path, settings="settings-user-hooks.json")
    install(root)
    edited = settings_of(root)
    edited["hooks"]["PreToolUse"][0]["hooks"][0]["command"] = "./scripts/check-bash.sh --strict"
    ithaca_stop_group = edited["hooks"]["Stop"][1]
    ithaca_stop_group["hooks"].append({"type": "command", "command": "afplay done.aiff"})
    edited["includeCoAuthoredBy"] = False
    (root / ".claude" / "settings.json").write_text(json.dumps(edited, indent=4))

    uninstall(root)

    expected = fixture("settings-user-hooks.json")
    expected["hooks"]["PreToolUse"][0]["hooks"][0]["command"] = "./scripts/check-bash.sh --strict"
    expected["hooks"]["Stop"].append(
        {"hooks": [{"type": "command", "command": "afplay done.aiff"}]}
    )
    expected["includeCoAuthoredBy"] = False
    assert settings_of(root) == expected


def test_uninstall_keeps_a_server_entry_the_user_changed(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    install(root)
    mcp = load(root / ".mcp.json")
    mcp["mcpServers"]["ithaca"]["env"] = {"ITHACA_HOME": "/srv/ithaca"}
    (root / ".mcp.json").write_text(json.dumps(mcp))

    report = uninstall(root)

    assert load(root / ".mcp.json") == mcp
    assert report.unchanged == ["mcp server ithaca"]
    assert "hooks" not in settings_of(root)


def test_uninstall_without_a_manifest_removes_nothing(tmp_path: Path) -> None:
    root = project_with(tmp_path, settings="settings-user-hooks.json", mcp="mcp-other-servers.json")
    before = (root / ".claude" / "settings.json").read_bytes(), (root / ".mcp.json").read_bytes()

    report = uninstall(root)

    assert report.to_dict() == {"added": [], "removed": [], "unchanged": [], "files": []}
    after = (root / ".claude" / "settings.json").read_bytes(), (root / ".mcp.json").read_bytes()
    assert after == before


def test_a_different_server_under_ithacas_name_is_refused_and_nothing_written(
    tmp_path: Path,
) -> None:
    root = project_with(tmp_path, mcp="mcp-other-servers.json")
    before = (root / ".mcp.json").read_bytes()

    with pytest.raises(Conflict) as refusal:
        install(root)

    assert refusal.value.code == "MCP_SERVER_NAME_TAKEN"
    assert refusal.value.details["serverName"] == "ithaca"
    assert (root / ".mcp.json").read_bytes() == before
    assert not (root / ".claude").exists()
    assert not (root / ".ithaca").exists()


def test_another_server_name_installs_beside_the_users_servers_and_uninstalls_cleanly(
    tmp_path: Path, hermetic: Path
) -> None:
    root = project_with(tmp_path, mcp="mcp-other-servers.json")

    install(root, server_name="ithaca-kernel")

    servers = load(root / ".mcp.json")["mcpServers"]
    assert list(servers) == ["github", "ithaca", "ithaca-kernel"]
    assert servers["ithaca-kernel"] == {"command": str(hermetic / "ithaca"), "args": ["mcp"]}
    assert manifest_server(root) == "ithaca-kernel"

    uninstall(root)

    assert load(root / ".mcp.json") == fixture("mcp-other-servers.json")


def test_reinstalling_under_a_new_server_name_moves_ithacas_entry(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    install(root)

    report = install(root, server_name="governance")

    assert list(load(root / ".mcp.json")["mcpServers"]) == ["governance"]
    assert "mcp server ithaca" in report.removed
    assert manifest_server(root) == "governance"


@pytest.mark.parametrize(
    ("target", "content"),
    [
        (".claude/settings.json", (FIXTURES / "settings-malformed.json").read_text()),
        (".mcp.json", (FIXTURES / "settings-malformed.json").read_text()),
        (".claude/settings.json", '["not", "an", "object"]'),
        (".claude/settings.json", '{"hooks": ["not", "an", "object"]}'),
        (".claude/settings.json", '{"hooks": {"Stop": {"hooks": []}}}'),
        (".mcp.json", '{"mcpServers": []}'),
    ],
)
def test_malformed_settings_are_refused_naming_the_file_and_nothing_written(
    tmp_path: Path, target: str, content: str
) -> None:
    root = project_with(tmp_path)
    (root / target).parent.mkdir(parents=True, exist_ok=True)
    (root / target).write_text(content)

    with pytest.raises(InvalidInput) as refusal:
        install(root)

    assert refusal.value.code == "INVALID_SETTINGS"
    assert refusal.value.details["path"] == str(root / target)
    assert (root / target).read_text() == content
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert written == [target]


def test_uninstall_refuses_malformed_settings_and_keeps_the_manifest(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    install(root)
    (root / ".claude" / "settings.json").write_text("{oops")

    with pytest.raises(InvalidInput) as refusal:
        uninstall(root)

    assert refusal.value.code == "INVALID_SETTINGS"
    assert "ithaca" in load(root / ".mcp.json")["mcpServers"]
    assert manifest_server(root) == "ithaca"


def test_an_empty_settings_file_reads_as_no_settings(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text("")

    install(root)
    assert list(settings_of(root)["hooks"]) == EVENTS
    uninstall(root)

    assert settings_of(root) == {}


def test_a_manifest_missing_its_fields_is_refused_and_nothing_removed(tmp_path: Path) -> None:
    root = project_with(tmp_path, settings="settings-user-hooks.json")
    install(root)
    manifest = root / ".ithaca" / ".runtime" / "installs" / "claude.json"
    manifest.write_text('{"host": "claude"}')
    before = (root / ".claude" / "settings.json").read_bytes()

    with pytest.raises(InvalidInput) as refusal:
        uninstall(root)

    assert refusal.value.code == "INVALID_SETTINGS"
    assert refusal.value.details["path"] == str(manifest)
    assert (root / ".claude" / "settings.json").read_bytes() == before


def test_manifest_records_every_added_entry_in_canonical_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hermetic: Path
) -> None:
    state_root = tmp_path / "state"
    monkeypatch.setenv("ITHACA_DIR", str(state_root))
    root = project_with(tmp_path)

    report = install(root)

    manifest_file = state_root / ".runtime" / "installs" / "claude.json"
    assert report.files == [
        str(root / ".claude" / "settings.json"),
        str(root / ".mcp.json"),
        str(root / ".claude" / "skills" / "ulysses" / "SKILL.md"),
        str(manifest_file),
    ]
    raw = manifest_file.read_bytes()
    manifest = json.loads(raw)
    assert raw == canonical(manifest) + b"\n"
    parse(manifest.pop("installedAt"))
    assert manifest == {
        "host": "claude",
        "serverName": "ithaca",
        "settingsPath": ".claude/settings.json",
        "mcpPath": ".mcp.json",
        "hooks": [
            {
                "event": spec.event,
                "matcher": spec.matcher,
                "command": hook_command(spec.event),
                "timeout": spec.timeout,
            }
            for spec in CLAUDE_EVENTS
        ],
        "mcpEntry": {"command": str(hermetic / "ithaca"), "args": ["mcp"]},
        "skills": [{"path": SKILL, "sha256": digest_bytes((root / SKILL).read_bytes())}],
    }
    assert not (root / ".ithaca").exists()


def test_the_manifest_names_the_server_until_uninstall(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    assert manifest_server(root) is None

    install(root, server_name="ithaca_dev")
    assert manifest_server(root) == "ithaca_dev"
    assert (root / ".ithaca" / ".runtime" / "installs" / "claude.json").is_file()

    uninstall(root)
    assert manifest_server(root) is None


def test_a_server_name_that_cannot_prefix_tool_names_is_refused(tmp_path: Path) -> None:
    root = project_with(tmp_path)

    with pytest.raises(InvalidInput) as refusal:
        install(root, server_name="my server")

    assert refusal.value.code == "INVALID_INPUT"
    assert not any(root.iterdir())


def test_hook_command_quotes_an_interpreter_folder_with_spaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_bin(tmp_path / "my tools" / "bin")
    use_interpreter(monkeypatch, folder)

    words = shlex.split(hook_command("Stop"))

    assert words[:4] == [str(folder / "python"), "-S", "-P", "-c"]
    assert words[5:] == ["claude", "Stop"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
user_hooks = st.fixed_dictionaries(
    {"type": st.just("command"), "command": st.text(min_size=1, max_size=12)},
    optional={"timeout": st.integers(1, 600)},
) | st.fixed_dictionaries({"type": st.just("prompt"), "prompt": st.text(max_size=12)})
user_groups = st.fixed_dictionaries(
    {"hooks": st.lists(user_hooks, max_size=3)},
    optional={"matcher": st.sampled_from(["*", "Bash", "Edit|Write", ""])},
)
user_settings = st.builds(
    lambda others, hooks: {**others, **({"hooks": hooks} if hooks else {})},
    st.dictionaries(
        st.text(max_size=8).filter(lambda key: key != "hooks"), json_values, max_size=4
    ),
    st.dictionaries(
        st.sampled_from([*EVENTS, "Notification"]),
        st.lists(user_groups, min_size=1, max_size=3),
        max_size=4,
    ),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(original=user_settings)
def test_any_user_settings_survive_install_reinstall_and_uninstall(original: dict) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / ".claude").mkdir()
        settings_file = root / ".claude" / "settings.json"
        settings_file.write_text(json.dumps(original))

        install(root)
        once = settings_file.read_bytes()
        assert install(root).added == []
        assert settings_file.read_bytes() == once
        uninstall(root)

        assert load(settings_file) == original


def test_install_adds_the_ulysses_skill_and_uninstall_takes_it_back(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    install(root)
    text = (root / SKILL).read_text()
    assert text.startswith("---\nname: ulysses\n")
    assert '"operation": "reflect"' in text

    uninstall(root)
    assert not (root / ".claude" / "skills").exists()


def test_a_skill_the_user_edited_after_install_survives_uninstall(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    install(root)
    (root / SKILL).write_text("my own notes on debugging\n")

    report = uninstall(root)

    assert (root / SKILL).read_text() == "my own notes on debugging\n"
    assert "skill ulysses" in report.unchanged


def test_a_foreign_skill_at_that_path_refuses_the_install_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    root = project_with(tmp_path)
    (root / SKILL).parent.mkdir(parents=True)
    (root / SKILL).write_text("someone else's skill\n")

    with pytest.raises(Conflict) as refused:
        install(root)

    assert refused.value.code == "SKILL_PATH_TAKEN"
    assert (root / SKILL).read_text() == "someone else's skill\n"
    assert not (root / ".claude" / "settings.json").exists()
    assert not (root / ".mcp.json").exists()
