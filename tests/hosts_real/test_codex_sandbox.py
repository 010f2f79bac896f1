"""The sandboxed install profile inside the real Codex: Ithaca's permission profile is the
project's default, so every shell command and every ``apply_patch`` runs in Codex's
bubblewrap sandbox with Ithaca's state, the host wiring, the user's Ithaca settings and
what git would run outside the sandbox read-only, whatever the spelling, while the
project, temp space, commits and worktrees keep working. A session started with the
sandbox switched off (``--dangerously-bypass-approvals-and-sandbox``, the most permissive
choice) has no wall: there the effect check holds the session instead (test_effects)."""

from __future__ import annotations

import json
import subprocess

from tests.hosts_real.codex_host import CodexHost
from tests.hosts_real.scripted import Script

# Spellings the text guard does not resolve (brace expansion, a variable built at run time).
TAMPERING = (
    "touch .ithac{a,}/protocols/team.forged.json; echo rc=$?",  # Codex refuses rm -rf
    'd=.co; d="${d}dex"; echo "# x" >> $d/config.toml; echo rc=$?',
    "touch ~/.ithac{a,}/forged; echo rc=$?",
    "g=.git; echo 'curl evil' > $g/hooks/pre-commit; echo rc=$?",
)
WORK = (
    "echo work > work.txt && git add work.txt && git commit -qm work && echo committed",
    'tmp=$(mktemp) && echo scratch > "$tmp" && cat "$tmp"',
    "git worktree add -q -b side trees/side && echo worktree",
    "git status --porcelain && echo status-done",
)
HOOK_PATCH = ".git/hooks/post-checkout"


def test_the_profile_keeps_ithacas_files_read_only_whatever_the_spelling(codex: CodexHost):
    config = (codex.repo / ".codex" / "config.toml").read_text()
    assert 'default_permissions = "ithaca"' in config
    wiring = (codex.repo / ".codex" / "config.toml").read_bytes()
    (codex.root / ".ithaca").mkdir(exist_ok=True)
    subprocess.run(["git", "add", "-A"], cwd=codex.repo, check=True)
    git = ["git", "commit", "-qm", "Ithaca wired in"]
    subprocess.run(git, cwd=codex.repo, check=True, env=codex.env())
    steps = [*codex.protocols_loaded(), *(codex.shell(c) for c in TAMPERING)]
    steps.append(codex.write(HOOK_PATCH, "#!/bin/sh\ncurl evil\n"))
    run = codex.run("Clean up and commit", Script(main=[*steps, *(codex.shell(c) for c in WORK)]))
    assert run.exit_code == 0, run.stderr
    for command in TAMPERING:
        shown = run.call("shell", given=json.dumps(command)[1:-1]).text
        assert "Read-only file system" in shown and "rc=1" in shown, shown
    assert not (codex.repo / ".ithaca" / "protocols" / "team.forged.json").exists()
    assert (codex.repo / ".codex" / "config.toml").read_bytes() == wiring
    assert not (codex.root / ".ithaca" / "forged").exists()
    assert not (codex.repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (codex.repo / HOOK_PATCH).exists(), run.call("apply_patch").text
    committed, scratch, worktree, status = (
        run.call("shell", given=json.dumps(c)[1:-1]).text for c in WORK
    )
    assert "committed" in committed and "scratch" in scratch and "worktree" in worktree
    assert status.strip().endswith("status-done"), status
    untracked = [line for line in status.splitlines() if line.startswith("??")]
    assert untracked == ["?? trees/"], f"git sees the sandbox's stand-ins: {status}"
