"""A protocols turn through each real host: admission, the load gate, a team protocol, the
kernel guard and a user-only command, as the model was shown them and as ``ithaca log``
records them."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from tests.hosts_real.codex_host import CodexHost
from tests.hosts_real.host import Host
from tests.hosts_real.scripted import Script

from ithaca.demo.protocols_turn import NO_PUSH


def test_a_turn_is_governed_from_admission_to_the_last_call(host: Host):
    play_the_protocols_turn(host)


def play_the_protocols_turn(host: Host) -> None:
    """Admission, the load gate, a team protocol, the kernel guard and a user-only command,
    each as the model was shown it and as ``ithaca log`` records it."""
    team_file = host.repo / ".ithaca" / "protocols" / "team.no-push.json"
    team_file.write_text(json.dumps(NO_PUSH, indent=2))
    team_text = team_file.read_text()
    run = host.run(
        "Write hello into notes.txt",
        Script(
            main=[
                host.write("notes.txt", "hello\n"),
                *host.protocols_loaded(),
                host.write("notes.txt", "hello\n"),
                host.shell("git push origin main"),
                host.shell("echo '{}' > .ithaca/protocols/team.no-push.json"),
                host.shell("ithaca protocols approve apr_01ABCDEFGHJKMNPQRSTVWXYZ00"),
            ]
        ),
    )
    assert run.exit_code == 0, run.stderr
    assert "Ithaca admitted this prompt as event evt_" in run.first_request().shown
    early, late = run.calls("write")
    assert "load_protocols" in early.text and "Refused by Ithaca" in early.text
    bundle = run.call("ithaca:load_protocols").text
    assert '"team.no-push"' in bundle and '"digest"' in bundle
    assert "Refused by Ithaca" not in late.text
    assert (host.repo / "notes.txt").read_text() == "hello\n"
    push = run.call("shell", given="git push")
    tamper = run.call("shell", given="team.no-push.json")
    approve = run.call("shell", given="protocols approve")
    assert "team.no-push" in push.text and "Pushing is the user's call." in push.text
    assert ".ithaca/" in tamper.text and "Refused by Ithaca" in tamper.text
    assert "ithaca protocols approve" in approve.text and "terminal" in approve.text
    assert team_file.read_text() == team_text
    decisions = [e for e in host.log() if e["kind"] == "protocols.decision"]
    denied = [e for e in decisions if e["payload"]["final"]["effect"] == "deny"]
    assert len(denied) >= 4, decisions


def test_the_install_records_codexs_trust_and_the_doctor_checks_it(codex: CodexHost):
    user_config = tomllib.loads((codex.home / "config.toml").read_text())
    assert user_config["projects"][str(codex.repo)]["trust_level"] == "trusted"
    assert len(user_config["hooks"]["state"]) == 6
    assert codex.ithaca_cli("install", "--doctor", "codex").returncode == 0
    hooks = codex.repo / ".codex" / "hooks.json"
    edited = json.loads(hooks.read_text())
    edited["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = 7
    hooks.write_text(json.dumps(edited))
    doctor = codex.ithaca_cli("install", "--doctor", "codex", check=False)
    assert doctor.returncode != 0 and "HOOKS_UNTRUSTED" in doctor.stdout + doctor.stderr


def test_without_hook_trust_codex_runs_no_hook_and_ithaca_says_so(codex: CodexHost):
    """Untrusted hooks never run, silently: the model gets no admission and its shell write
    goes through. Ithaca's MCP server still hears the model's calls, refuses each one with
    HOOKS_NOT_RUNNING, and ``ithaca status`` and the doctor name the fix."""
    user_config = codex.home / "config.toml"
    kept = [
        block
        for block in user_config.read_text().split("\n\n")
        if not block.lstrip().startswith("[hooks.state.")
    ]
    user_config.write_text("\n\n".join(kept))
    run = codex.run(
        "Write hello into notes.txt",
        Script(
            main=[
                *codex.load_tools(),
                codex.tool("protocols", {"operation": "list"}),
                codex.shell("echo hello > notes.txt"),
            ]
        ),
    )
    assert run.exit_code == 0, run.stderr
    assert "Ithaca admitted this prompt" not in run.first_request().shown
    refused = run.call("ithaca:protocols").answer()
    assert refused["code"] == "HOOKS_NOT_RUNNING", refused
    assert "ithaca install --doctor codex" in refused["message"]
    assert (codex.repo / "notes.txt").read_text() == "hello\n"
    status = codex.ithaca_cli("status").stdout
    assert "NOT RUNNING for codex" in status
    doctor = codex.ithaca_cli("install", "--doctor", "codex", check=False)
    assert doctor.returncode != 0 and "HOOKS_UNTRUSTED" in doctor.stdout + doctor.stderr


def test_on_a_machine_without_ithaca_the_committed_wiring_blocks_with_the_fix(
    host: Host, monkeypatch: pytest.MonkeyPatch
):
    """A teammate's clone: the hooks are committed, Ithaca is not installed. Every hook
    fails closed (exit 2), so the prompt is blocked before the model sees it. Claude Code
    prints the hook's message, which names the install command; ``codex exec --json``
    ends the turn without printing it."""
    ithaca_bin = str(Path(sys.executable).parent)
    path = [entry for entry in os.environ["PATH"].split(os.pathsep) if entry != ithaca_bin]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    assert shutil.which("ithaca-hook") is None
    run = host.run("Write hello into notes.txt", Script(main=[host.shell("echo hi > notes.txt")]))
    if host.name == "claude":
        printed = json.dumps(run.events) + run.stderr
        assert "ITHACA_NOT_INSTALLED" in printed and "ithaca install claude" in printed
    assert not run.model.lane("main"), "the model was asked although the prompt was blocked"
    assert not (host.repo / "notes.txt").exists()
