"""Installing Ithaca into a Claude Code project, and taking it back out."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ithaca
from ithaca.hosts.claude.installer import (
    CLAUDE_EVENTS,
    DEGRADED,
    hook_command,
    install,
    uninstall,
)
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.kernel.canon import canonical, digest, digest_bytes
from ithaca.kernel.clock import parse
from ithaca.kernel.errors import Conflict, InvalidInput, Refused

FIXTURES = Path(__file__).parents[1] / "fixtures" / "claude"
EVENTS = [spec.event for spec in CLAUDE_EVENTS]
SKILL = ".claude/skills/ulysses/SKILL.md"
ULTRAGOAL_SKILL = ".claude/skills/ultragoal/SKILL.md"
AGENT = ".claude/agents/code-reviewer.md"
SHIPPED_LABELS = ["skill ulysses", "skill ultragoal", "agent code-reviewer"]
CAP = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
SANDBOX = "sandbox profile sandboxed"
GIT = shutil.which("git") or "git"  # found before the hermetic PATH hides it


def manifest_server(root: Path) -> str | None:
    """The server name the install manifest records, or None without a manifest."""
    path = root / ".ithaca" / ".runtime" / "installs" / "claude.json"
    return json.loads(path.read_text())["serverName"] if path.is_file() else None


REAL_PYTHON = sys.executable
REAL_HOOK = str(Path(sys.executable).parent / "ithaca-hook")


def make_bin(folder: Path) -> Path:
    """A folder holding an interpreter (this one, under another path, so the install's
    preflight can run its hook) and Ithaca's two console scripts, like a venv's bin."""
    folder.mkdir(parents=True)
    for name, text in (
        ("python", f'#!/bin/sh\nexec {shlex.quote(REAL_PYTHON)} "$@"\n'),
        ("ithaca", "#!/bin/sh\n"),
        ("ithaca-hook", f'#!/bin/sh\nexec {shlex.quote(REAL_HOOK)} "$@"\n'),
    ):
        script = folder / name
        script.write_text(text)
        script.chmod(0o755)
    return folder


def use_interpreter(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(folder / "python"))


@pytest.fixture(autouse=True)
def hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ITHACA_DIR from the outside, and on PATH only a bin folder holding Ithaca's
    commands under another interpreter path, as a tool install has them."""
    monkeypatch.delenv("ITHACA_DIR", raising=False)
    folder = make_bin(tmp_path / "venv-a" / "bin")
    monkeypatch.setenv("PATH", str(folder))
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


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def fixture(name: str) -> dict[str, Any]:
    return load(FIXTURES / name)


def settings_of(root: Path) -> dict[str, Any]:
    return load(root / ".claude" / "settings.json")


def ithaca_commands(document: dict[str, Any], event: str) -> list[str]:
    return [
        hook["command"]
        for group in document["hooks"].get(event, [])
        for hook in group["hooks"]
        if "ithaca-hook" in hook["command"]
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
        "UserPromptExpansion": 10,
        "PreToolUse": 5,
        "PostToolUse": 10,
        "PreCompact": 10,
        "Stop": 90,
        "SubagentStop": 15,
        "SessionEnd": 10,
    }
    matchers = {event: groups[0].get("matcher") for event, groups in hooks.items()}
    assert matchers == {event: "*" if "ToolUse" in event else None for event in EVENTS}
    assert all("matcher" not in hooks[event][0] for event in EVENTS if "ToolUse" not in event)
    assert hooks["Stop"][0]["hooks"] == [
        {"type": "command", "command": hook_command("Stop"), "timeout": 90}
    ]
    assert load(root / ".mcp.json") == {
        "mcpServers": {"ithaca": {"command": "ithaca", "args": ["mcp"]}}
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
    assert list(merged) == [*original, "sandbox"]
    assert merged["model"] == original["model"]
    assert merged["permissions"]["allow"] == original["permissions"]["allow"]
    deny = original["permissions"]["deny"]
    key = install_sandbox.seal_key()  # outside ~ here: named by its absolute path
    assert merged["permissions"]["deny"] == [*deny, *install_sandbox.DENY_RULES, f"Read(/{key})"]
    assert merged["env"] == {**original["env"], CAP: "12"}
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
        [f"hook {e}" for e in EVENTS]
        + ["mcp server ithaca", f"env {CAP}", SANDBOX, *SHIPPED_LABELS]
    )
    assert report.notes == []
    assert [path.read_bytes() for path in files] == before
    assert all(len(ithaca_commands(settings_of(root), event)) == 1 for event in EVENTS)


def test_reinstall_over_a_machine_path_hook_replaces_only_ithacas_entries_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hermetic: Path
) -> None:
    """An install made by an older Ithaca, whose hooks named this machine's interpreter,
    is rewritten where it stood, to the command every machine can run."""
    import ithaca.hosts.install.hooks as install_hooks

    root = project_with(tmp_path, settings="settings-user-hooks.json")
    legacy = f"{hermetic}/python -P -c 'from ithaca.hosts.dispatch import serve; serve()' claude"
    monkeypatch.setattr(install_hooks, "hook_command", lambda event, *_: f"{legacy} {event}")
    install(root)
    monkeypatch.undo()
    monkeypatch.setenv("PATH", str(hermetic))
    edited = settings_of(root)
    users_later_hook = {"hooks": [{"type": "command", "command": "echo later"}]}
    edited["hooks"]["PreToolUse"].append(users_later_hook)
    (root / ".claude" / "settings.json").write_text(json.dumps(edited))

    report = install(root)

    merged = settings_of(root)
    assert str(hermetic) not in json.dumps(merged)
    assert str(hermetic) not in (root / ".mcp.json").read_text()
    pre_tool_use = merged["hooks"]["PreToolUse"]
    assert pre_tool_use[2]["hooks"][0]["command"] == hook_command("PreToolUse")
    assert pre_tool_use[3] == users_later_hook
    assert pre_tool_use[:2] == fixture("settings-user-hooks.json")["hooks"]["PreToolUse"]
    assert all(len(ithaca_commands(merged, event)) == 1 for event in EVENTS)
    assert load(root / ".mcp.json")["mcpServers"]["ithaca"]["command"] == "ithaca"
    assert "hook Stop" in report.removed and "hook Stop" in report.added


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

    assert (root / ".claude" / "settings.json").read_bytes() == (
        FIXTURES / settings_fixture
    ).read_bytes()
    assert not (root / ".mcp.json").exists()  # the install created it, and it is empty now
    assert sorted(report.removed) == sorted(
        [f"hook {e}" for e in EVENTS]
        + ["mcp server ithaca", f"env {CAP}", SANDBOX, *SHIPPED_LABELS]
    )
    assert not (root / ".ithaca" / ".runtime" / "installs" / "claude.json").exists()
    assert not (root / ".claude" / "skills").exists()
    assert not (root / ".claude" / "agents").exists()


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
    assert not (root / ".claude").exists()  # created by the install, and empty now


def test_uninstall_removes_the_files_install_created_and_keeps_the_users_empty_ones(
    tmp_path: Path,
) -> None:
    (tmp_path / "created").mkdir()
    created = project_with(tmp_path / "created")
    install(created)
    uninstall(created)
    assert not (created / ".mcp.json").exists() and not (created / ".claude").exists()
    assert not (created / ".ithaca" / ".runtime" / "installs").exists()

    (tmp_path / "own").mkdir()
    own = project_with(tmp_path / "own", settings="settings-empty.json")
    (own / ".mcp.json").write_text("{}\n")
    install(own)
    uninstall(own)
    assert (own / ".claude" / "settings.json").read_bytes() == (
        FIXTURES / "settings-empty.json"
    ).read_bytes()
    assert (own / ".mcp.json").read_text() == "{}\n"


def test_uninstall_without_a_manifest_removes_nothing(tmp_path: Path) -> None:
    root = project_with(tmp_path, settings="settings-user-hooks.json", mcp="mcp-other-servers.json")
    before = (root / ".claude" / "settings.json").read_bytes(), (root / ".mcp.json").read_bytes()

    report = uninstall(root)

    assert report.to_dict() == {
        "added": [],
        "removed": [],
        "unchanged": [],
        "files": [],
        "notes": [],
        "degraded": [],
    }
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
    assert servers["ithaca-kernel"] == {"command": "ithaca", "args": ["mcp"]}
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


def test_an_empty_settings_file_reads_as_no_settings_and_comes_back_empty(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text("")

    install(root)
    assert list(settings_of(root)["hooks"]) == EVENTS
    uninstall(root)

    assert (root / ".claude" / "settings.json").read_text() == ""


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
        str(root / SKILL),
        str(root / ULTRAGOAL_SKILL),
        str(root / AGENT),
        str(manifest_file),
    ]
    raw = manifest_file.read_bytes()
    manifest = json.loads(raw)
    assert raw == canonical(manifest) + b"\n"
    parse(manifest.pop("installedAt"))
    assert manifest.pop("degraded") == list(DEGRADED)
    provenance = manifest.pop("provenance")
    assert provenance["python"] == str(hermetic / "python")
    assert provenance["ithacaVersion"] == ithaca.__version__
    assert provenance["sha256"] == digest(provenance["entries"])
    assert [(entry["label"], entry["path"]) for entry in provenance["entries"]] == [
        *((f"hook {event}", ".claude/settings.json") for event in EVENTS),
        ("mcp server ithaca", ".mcp.json"),
        ("skill ulysses", SKILL),
        ("skill ultragoal", ULTRAGOAL_SKILL),
        ("agent code-reviewer", AGENT),
        (f"env {CAP}", ".claude/settings.json"),
        (SANDBOX, ".claude/settings.json"),
    ]
    sandbox = manifest.pop("sandbox")
    assert sandbox["profile"] == "sandboxed" and sandbox["createdSandbox"] is True
    assert sandbox["denyWrite"] == list(install_sandbox.DENY_WRITE)
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
        "mcpEntry": {"command": "ithaca", "args": ["mcp"]},
        "skills": [
            {"path": path, "sha256": digest_bytes((root / path).read_bytes())}
            for path in (SKILL, ULTRAGOAL_SKILL)
        ],
        "agents": [{"path": AGENT, "sha256": digest_bytes((root / AGENT).read_bytes())}],
        "stopHookBlockCap": {"set": True, "value": "12", "createdEnv": True},
        "originals": {},
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


def test_the_hook_command_fails_closed_on_a_machine_without_ithaca(tmp_path: Path) -> None:
    """Committed wiring on a teammate's clone with no Ithaca: exit 2, which Claude Code
    treats as a block, with the reason and the install command."""
    done = subprocess.run(
        ["/bin/sh", "-c", hook_command("PreToolUse")],
        input="{}",
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path)},
    )
    assert done.returncode == 2
    assert "ITHACA_NOT_INSTALLED" in done.stderr and "ithaca install claude" in done.stderr


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
user_env = st.dictionaries(
    st.sampled_from([CAP, "NODE_ENV", "DEBUG"]),
    st.sampled_from(["0", "3", "12", "40", "lots", ""]) | st.integers(0, 50),
)
user_settings = st.builds(
    lambda others, env, hooks: {
        **others,
        **({"env": env} if env is not None else {}),
        **({"hooks": hooks} if hooks else {}),
    },
    st.dictionaries(
        st.text(max_size=8).filter(lambda key: key not in ("hooks", "env")),
        json_values,
        max_size=4,
    ),
    st.none() | user_env,
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
def test_any_user_settings_come_back_byte_for_byte_after_install_and_uninstall(
    original: dict[str, Any],
) -> None:
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

        assert settings_file.read_text() == json.dumps(original)


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


def test_install_adds_the_ultragoal_skill_and_uninstall_takes_it_back(tmp_path: Path) -> None:
    root = project_with(tmp_path)

    report = install(root)

    assert "skill ultragoal" in report.added
    text = (root / ULTRAGOAL_SKILL).read_text()
    assert text.startswith("---\nname: ultragoal\ndescription: ")
    assert "ithaca ultragoal request-complete" in text
    uninstall(root)
    assert not (root / ".claude" / "skills").exists()


def test_an_edited_ultragoal_skill_survives_uninstall_and_the_other_goes(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    install(root)
    (root / ULTRAGOAL_SKILL).write_text("our team's pursuit notes\n")

    report = uninstall(root)

    assert (root / ULTRAGOAL_SKILL).read_text() == "our team's pursuit notes\n"
    assert "skill ultragoal" in report.unchanged and "skill ulysses" in report.removed
    assert not (root / SKILL).exists()


def _commands_in(text: str) -> list[list[str]]:
    """Every ``ithaca …`` command the text shows, as words: inline spans and bash blocks."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)
    spans = re.findall(r"`(ithaca [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    commands = []
    for source in [*blocks, *spans]:
        words = shlex.split(source.replace("[", " ").replace("]", " "))
        starts = [i for i, word in enumerate(words) if word == "ithaca"]
        for start, end in zip(starts, [*starts[1:], len(words)], strict=True):
            commands.append(words[start:end])
    return commands


@pytest.mark.parametrize(
    ("resource", "least"), [(("ultragoal", "SKILL.md"), 20), (("agents", "code-reviewer.md"), 3)]
)
def test_shipped_texts_name_only_real_commands_and_flags(
    resource: tuple[str, str], least: int
) -> None:
    from importlib.resources import files

    import click

    from ithaca.cli.entry import cli
    from ithaca.ultragoal.inputs import AGENT_OPERATIONS

    text = files("ithaca.skills").joinpath(*resource).read_text()
    commands = _commands_in(text)
    assert len(commands) >= least
    for words in commands:
        command: click.Command = cli
        path = words[1:]
        while isinstance(command, click.Group) and path:
            found = command.get_command(click.Context(command), path[0])
            if found is None:
                break
            command, path = found, path[1:]
        if isinstance(command, click.Group) and (not path or path[0].startswith("<")):
            continue  # the group itself, or its general form `ithaca ultragoal <subcommand>`
        assert not isinstance(command, click.Group), words
        options = {opt for param in command.params for opt in param.opts}
        flags = [word for word in path if word.startswith("--")]
        assert set(flags) <= options, (words, set(flags) - options)
    for operation in re.findall(r'"operation": "([a-z_]+)"', text):
        assert operation in AGENT_OPERATIONS


# --- the reviewer agent -----------------------------------------------------------------


def _front_matter(text: str) -> dict[str, str]:
    head = text.split("---\n")[1]
    return dict(line.split(": ", 1) for line in head.splitlines())


def test_install_adds_the_reviewer_agent_the_skill_starts_and_uninstall_takes_it_back(
    tmp_path: Path,
) -> None:
    from ithaca.kernel.config_schema import SCHEMA

    root = project_with(tmp_path)

    report = install(root)

    assert "agent code-reviewer" in report.added
    text = (root / AGENT).read_text()
    fields = _front_matter(text)
    assert fields["name"] == SCHEMA["ultragoal"]["reviewer_agent_type"][1]
    # Reading tools, and the MCP tool it submits with (its shell cannot write the state).
    tools = {"Read", "Grep", "Glob", "Bash", "mcp__ithaca__ultragoal"}
    assert set(fields["tools"].split(", ")) == tools
    assert f'subagent_type: "{fields["name"]}"' in (root / ULTRAGOAL_SKILL).read_text()
    assert "ULTRAGOAL_REVIEW session=<session id> dispatch=<n>" in text
    # The host keeps CLAUDE.md files (the agent's words) out of the reviewer's context.
    assert fields["omitClaudeMd"] == "true"

    removal = uninstall(root)

    assert "agent code-reviewer" in removal.removed
    assert not (root / ".claude" / "agents").exists()


def test_the_reviewers_example_artifact_is_one_ithaca_accepts() -> None:
    from importlib.resources import files

    from ithaca.ultragoal.reducer import artifact_problem

    text = files("ithaca.skills").joinpath("agents", "code-reviewer.md").read_text()
    example = re.search(r"submit-review --session <session id> --data '(.*?)'\n", text, re.DOTALL)
    assert example is not None
    artifact = json.loads(example.group(1))
    artifact["scope_contract_sha256"] = "0" * 64
    artifact["files_read"][0]["sha256"] = "0" * 64

    assert artifact_problem(artifact) is None


def test_the_reviewers_scope_table_matches_what_the_reducer_admits() -> None:
    from importlib.resources import files

    from ithaca.ultragoal.contract import SLOTS
    from ithaca.ultragoal.reducer import BASES, BASIS_REFERENCES

    text = files("ithaca.skills").joinpath("agents", "code-reviewer.md").read_text()
    rows = re.findall(r"^  \| `([A-Z_]+)` \| `(\w+)` \| (.+) \|$", text, flags=re.MULTILINE)

    assert {(scope, basis) for scope, basis, _ in rows} == {
        (scope, basis) for scope, bases in BASES.items() for basis in bases
    }
    for _, basis, references in rows:
        slots, story_ok = BASIS_REFERENCES[basis]
        named = set(re.findall(r"`(\w+)`", references))
        assert named == (set() if basis == "uncertain" else set(slots)), basis
        assert ("story id" in references) == story_ok, basis
        if basis == "uncertain":
            assert set(slots) == set(SLOTS) and "any of those slots" in references


def test_an_edited_reviewer_agent_survives_uninstall(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    install(root)
    (root / AGENT).write_text("---\nname: code-reviewer\n---\nOur own review rules.\n")

    report = uninstall(root)

    assert (root / AGENT).read_text().endswith("Our own review rules.\n")
    assert "agent code-reviewer" in report.unchanged
    assert not (root / ULTRAGOAL_SKILL).exists()


def test_a_foreign_agent_at_that_path_refuses_the_install_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    root = project_with(tmp_path)
    (root / AGENT).parent.mkdir(parents=True)
    (root / AGENT).write_text("---\nname: code-reviewer\n---\nA reviewer of our own.\n")

    with pytest.raises(Conflict) as refused:
        install(root)

    assert refused.value.code == "AGENT_PATH_TAKEN"
    assert refused.value.details["path"] == str(root / AGENT)
    assert (root / AGENT).read_text().endswith("A reviewer of our own.\n")
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert written == [AGENT]


def test_a_reinstall_replaces_an_unedited_agent_from_an_older_ithaca(tmp_path: Path) -> None:
    root = project_with(tmp_path)
    install(root)
    older = b"---\nname: code-reviewer\n---\nAn older reviewer text.\n"
    (root / AGENT).write_bytes(older)
    manifest_file = root / ".ithaca" / ".runtime" / "installs" / "claude.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["agents"] = [{"path": AGENT, "sha256": digest_bytes(older)}]
    manifest_file.write_bytes(canonical(manifest) + b"\n")

    report = install(root)

    assert "agent code-reviewer" in report.added
    assert (root / AGENT).read_text().startswith("---\nname: code-reviewer\ndescription: ")


def test_the_sandboxed_profile_tightens_the_users_sandbox_and_uninstall_gives_it_back(
    tmp_path: Path,
) -> None:
    root = project_with(tmp_path)
    own = {"sandbox": {"enabled": False, "filesystem": {"denyWrite": ["./secrets"]}}}
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(json.dumps(own, indent=2) + "\n")
    before = (root / ".claude" / "settings.json").read_bytes()

    install(root)

    sandbox = settings_of(root)["sandbox"]
    assert (sandbox["enabled"], sandbox["failIfUnavailable"]) == (True, True)
    assert sandbox["allowUnsandboxedCommands"] is False
    assert sandbox["filesystem"]["denyWrite"] == ["./secrets", *install_sandbox.DENY_WRITE]
    uninstall(root)
    assert (root / ".claude" / "settings.json").read_bytes() == before


def test_the_unsandboxed_profile_leaves_the_sandbox_alone_and_says_what_that_means(
    tmp_path: Path,
) -> None:
    root = project_with(tmp_path)
    report = install(root, profile="unsandboxed")
    settings = settings_of(root)
    assert "sandbox" not in settings and "deny" not in settings.get("permissions", {})
    assert any("best-effort" in note for note in report.notes)
    manifest = json.loads((root / ".ithaca/.runtime/installs/claude.json").read_text())
    assert manifest["sandbox"] == {"profile": "unsandboxed"}


def test_without_bubblewrap_the_sandboxed_profile_is_refused_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project_with(tmp_path)
    monkeypatch.setattr(install_sandbox, "SYSTEM_PATH", str(tmp_path / "no-such-dir"))
    with pytest.raises(Refused) as refusal:
        install(root)
    assert refusal.value.code == "SANDBOX_UNAVAILABLE"
    assert "apt-get install bubblewrap socat" in refusal.value.message
    assert "--profile unsandboxed" in refusal.value.message
    assert not (root / ".claude").exists() and not (root / ".mcp.json").exists()


def test_the_sandboxs_stand_ins_are_kept_out_of_git_and_uninstall_takes_that_back(
    tmp_path: Path,
) -> None:
    root = project_with(tmp_path)
    subprocess.run([GIT, "init", "-q", str(root)], check=True)
    exclude = root / ".git" / "info" / "exclude"
    before = exclude.read_bytes()
    for name in (".bashrc", ".vscode"):  # bubblewrap's empty stand-ins are files
        (root / name).write_text("")
    (root / ".idea").mkdir()
    (root / ".idea" / "workspace.xml").write_text("<project/>")

    install(root)

    untracked = subprocess.run(
        [GIT, "status", "--porcelain", "--", ".bashrc", ".vscode", ".idea"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert untracked == ["??", ".idea/"]  # a real folder is still seen
    install(root)
    assert exclude.read_text().count("# ithaca: end") == 1
    uninstall(root)
    assert exclude.read_bytes() == before


def test_the_stand_ins_stay_excluded_while_the_other_host_is_sandboxed(tmp_path: Path) -> None:
    from ithaca.hosts.codex import installer as install_codex

    root = project_with(tmp_path)
    subprocess.run([GIT, "init", "-q", str(root)], check=True)
    exclude = root / ".git" / "info" / "exclude"
    before = exclude.read_bytes()
    install(root)
    install_codex.install(root)
    assert exclude.read_text().count("# ithaca: end") == 1  # one block serves both hosts
    install_codex.uninstall(root)
    assert "# ithaca: end" in exclude.read_text()  # Claude Code's sandbox still needs it
    uninstall(root)
    assert exclude.read_bytes() == before
