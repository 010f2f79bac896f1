"""The journal's seal key inside the real Codex: the permission profile ``ithaca install
codex`` makes the project's default denies ``~/.ithaca/journal.key`` outright, so a
command in Codex's sandbox can neither read nor write it, however it spells the attempt.
Run through ``codex sandbox --permission-profile ithaca``, the pinned binary's own way to
run one command in the sandbox a profile describes, the one its agent's shell gets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.hosts_real.binaries import host_binary

ITHACA = Path(sys.executable).parent / "ithaca"
ATTEMPTS = (
    "cat ~/.ithaca/journal.key; echo rc=$?",
    "python3 -c \"import os; print(open(os.path.expanduser('~/.ithaca/journal.key')).read())\";"
    " echo rc=$?",
    "cp ~/.ithaca/journal.key copied; cat copied; echo rc=$?",
    "echo 00 > ~/.ithaca/journal.key; echo rc=$?",
    "rm -f ~/.ithaca/journal.key; echo rc=$?",
)


def test_a_command_in_codexs_sandbox_can_neither_read_nor_write_the_seal_key():
    home = Path(tempfile.mkdtemp(prefix="ithaca-seal-", dir="/var/tmp"))  # not under /tmp
    try:
        attempt_everything(home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def attempt_everything(home: Path) -> None:
    codex = host_binary("codex")
    repo = home / "repo"
    repo.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ITHACA_HOME": str(home / ".ithaca"),
        "CODEX_HOME": str(home / "codex"),
        "TMPDIR": str(home / "tmp"),  # apart from CODEX_HOME, where Codex puts its helper
    }
    (home / "codex").mkdir()
    (home / "tmp").mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for args in (["init"], ["install", "codex"]):
        done = subprocess.run([str(ITHACA), *args], cwd=repo, env=env, capture_output=True,
                              text=True)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    config = (repo / ".codex" / "config.toml").read_text()
    assert '"~/.ithaca/journal.key" = "deny"' in config, config
    key_file = home / ".ithaca" / "journal.key"
    key = key_file.read_bytes()
    secret = key.decode().strip()
    for command in ATTEMPTS:
        done = subprocess.run(
            [str(codex), "sandbox", "-P", "ithaca", "-C", str(repo), "--", "sh", "-c", command],
            cwd=repo, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        shown = done.stdout + done.stderr
        assert secret[:16] not in shown, shown
        assert "rc=0" not in shown and (
            "Permission denied" in shown or "Read-only file system" in shown
        ), f"{command}: {shown}"
    assert key_file.read_bytes() == key
