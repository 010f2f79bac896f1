"""Every hook decides before its host stops waiting (docs/hooks.md "Host timeouts").

A host that waits out a hook's timeout runs the call as if it were allowed. So the hook is
told the timeout its host gives it, and what it waits for (the store's lock, Git) waits
only until then, and is then refused with a code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ithaca import resolve
from ithaca.hosts import HOSTS, dispatch
from ithaca.kernel import deadline, find_project, git

# Holds the store's write lock until told to let go (a line on its stdin).
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


def _install(root: Path, host: str) -> dict[str, dict[str, object]]:
    """Each event's Ithaca hook as ``ithaca install HOST`` wrote it in the hooks document."""
    done = subprocess.run(
        ["ithaca", "--project", str(root), "install", host], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    adapter = resolve(HOSTS[host])
    document = json.loads((root / adapter.runs_ithaca(str(root))).read_text())
    return {
        event: hook
        for event, groups in document["hooks"].items()
        for group in groups
        for hook in group["hooks"]
        if f"ithaca-hook {host} {event} " in hook["command"]
    }


def _write(root: Path) -> bytes:
    return json.dumps(
        {
            "session_id": "sess-deadline",
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(root / "a.py"), "content": "x = 1\n"},
        }
    ).encode()


@pytest.mark.parametrize("host", list(HOSTS))
def test_each_installed_hook_is_told_its_hosts_timeout(project_dir: Path, host: str):
    hooks = _install(project_dir, host)
    assert set(hooks) == set(resolve(HOSTS[host]).EVENTS)
    for event, hook in hooks.items():
        assert str(hook["command"]).endswith(f" {event} --timeout {hook['timeout']}"), event


@pytest.mark.parametrize("host", list(HOSTS))
def test_a_mutating_call_is_denied_while_another_process_holds_the_store(
    project_dir: Path, host: str
):
    hook = _install(project_dir, host)["PreToolUse"]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(project_dir / ".ithaca/.runtime/state.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        # The installed command, and the bare hook, which assumes its host's timeout.
        for command in (
            ["/bin/sh", "-c", str(hook["command"])],
            ["ithaca-hook", host, "PreToolUse"],
        ):
            done = subprocess.run(
                command, input=_write(project_dir), capture_output=True, cwd=project_dir
            )
            assert holder.poll() is None  # the hook answered while the lock was still held
            assert done.returncode == 0, done.stderr
            answer = json.loads(done.stdout)["hookSpecificOutput"]
            assert answer["permissionDecision"] == "deny"
            assert "STORE_LOCKED" in answer["permissionDecisionReason"]
            assert "locked by another process" in answer["permissionDecisionReason"]
            if Path("/proc/locks").exists():  # where the system lists its locks: who holds it
                assert f"(pid {holder.pid})" in answer["permissionDecisionReason"]
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0  # it held the lock to the end, then committed


def test_git_stops_at_the_hooks_deadline_and_says_so(project_dir: Path):
    slow = ["-c", "alias.slow=!sleep 5", "slow"]
    deadline.start(1.1)  # a fifth of a second left to decide
    try:
        with pytest.raises(git.TimedOut):
            git.run(slow, cwd=str(project_dir), timeout=60)
        assert deadline.cut_short()
    finally:
        deadline.clear()
    assert not deadline.cut_short()


def test_a_hook_waits_for_the_store_only_until_its_deadline(project_dir: Path):
    project = find_project(str(project_dir))
    assert project is not None
    deadline.start(1.5)  # half a second left to decide
    try:
        conn, _, lost = dispatch._open(project)
        assert conn is not None and lost is None
        waits_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        conn.close()
    finally:
        deadline.clear()
    assert waits_ms <= 500  # not the store's own 5 s, past the host's timeout
