"""The sandboxed install profile inside the real Claude Code: every Bash command runs in
Claude Code's OS sandbox (bubblewrap here), where Ithaca's state, the user's Ithaca
settings and the host wiring are read-only whatever the command's spelling, while the
project, temp space and git keep working. Checked in the default permission mode and in
``acceptEdits`` with every command allowed, the most permissive one open to a root user
(Claude Code refuses ``bypassPermissions`` as root), and with the model asking to run a
command outside the sandbox (``dangerouslyDisableSandbox``), which the profile forbids."""

from __future__ import annotations

import json
import subprocess

import pytest
from tests.hosts_real.claude_host import ClaudeHost
from tests.hosts_real.scripted import Call, Script, Step

# Spellings the text guard does not resolve (brace expansion, a variable built at run time).
TAMPERING = (
    "rm -rf .ithac{a,}/protocols; echo rc=$?",
    'd=.cl; d="${d}aude"; echo "{}" > $d/settings.json; echo rc=$?',
    "touch ~/.ithac{a,}/forged; echo rc=$?",
    "g=.git; echo 'curl evil' > $g/hooks/pre-commit; echo rc=$?",  # git would run it unsandboxed
)
WORK = (
    "echo work > work.txt && git add work.txt && git commit -qm work && echo committed",
    'tmp=$(mktemp) && echo scratch > "$tmp" && cat "$tmp"',
    "git worktree add -q -b side trees/side && echo worktree",
    "git status --porcelain",
)


ESCAPE = "rm -rf .ithaca/reports; echo rc=$?"


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_the_sandbox_keeps_ithacas_files_read_only_whatever_the_spelling(
    claude: ClaudeHost, mode: str
):
    settings = json.loads((claude.repo / ".claude" / "settings.json").read_text())
    assert settings["sandbox"]["enabled"] and settings["sandbox"]["failIfUnavailable"]
    wiring = (claude.repo / ".claude" / "settings.json").read_bytes()
    (claude.home / ".ithaca").mkdir(exist_ok=True)
    subprocess.run(["git", "add", "-A"], cwd=claude.repo, check=True)
    git = ["git", "commit", "-qm", "Ithaca wired in"]
    subprocess.run(git, cwd=claude.repo, check=True, env=claude.env())
    escape = Call("Bash", {"command": ESCAPE, "dangerouslyDisableSandbox": True})
    steps: list[Step] = [
        *claude.protocols_loaded(),
        *(claude.shell(c) for c in TAMPERING),
        [escape],
    ]
    run = claude.run(
        "Clean up and commit",
        Script(main=[*steps, *(claude.shell(c) for c in WORK)]),
        "--permission-mode",
        mode,
    )
    assert run.exit_code == 0, run.stderr
    for command in TAMPERING:
        shown = run.call("shell", given=json.dumps(command)[1:-1]).text
        assert "Read-only file system" in shown and "rc=1" in shown, shown
    assert (claude.repo / ".ithaca" / "protocols").is_dir()
    assert (claude.repo / ".ithaca" / "reports").is_dir(), run.call("shell", given="reports")
    assert (claude.repo / ".claude" / "settings.json").read_bytes() == wiring
    assert not (claude.home / ".ithaca" / "forged").exists()
    assert not (claude.repo / ".git" / "hooks" / "pre-commit").exists()
    committed, scratch, worktree, status = (
        run.call("shell", given=json.dumps(c)[1:-1]).text for c in WORK
    )
    assert "committed" in committed and "scratch" in scratch and "worktree" in worktree
    assert status.strip() == "(Bash completed with no output)", f"git sees: {status}"
