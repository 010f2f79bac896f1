"""The anchor moves only after a commit is durable: a write refused for lack of space
leaves the journal's anchor and head record on the last committed head, so once space
returns the doctor and the hooks find nothing lost and nothing tampered with.

The project lives on a small file system of its own (a tmpfs the test mounts, as root: CI
runs as root too), filled until SQLite's ``COMMIT`` fails with ``SQLITE_FULL``. The store
stays open across the failure, as the long-lived MCP server's does, and commits again
once space is back.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.command_line import ithaca

from ithaca import init_project
from ithaca.kernel import Store, anchor, journal

HOOK = str(Path(sys.executable).parent / "ithaca-hook")
RUNTIME = Path(".ithaca") / ".runtime"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.fail("mounting a small file system needs root (CI runs the suite as root)")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(folder: Path) -> Path:
    """A file that takes every byte left on ``folder``'s file system."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as stream:  # nothing left to flush on close
        block = b"\0" * (1 << 16)
        try:
            while True:
                stream.write(block)
        except OSError:
            pass
    return filler


def head(root: Path) -> tuple[int, str]:
    conn = sqlite3.connect(f"file:{root / RUNTIME / 'state.db'}?mode=ro", uri=True)
    try:
        found = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    return int(found[0]), str(found[1])


def test_a_commit_refused_for_lack_of_space_never_moves_the_anchor(small_disk: Path):
    root = small_disk / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_project(root)[0].close()
    runtime = str(root / RUNTIME)
    store = Store(root / RUNTIME / "state.db", migrate=False)
    with store.write() as conn:
        journal.append(conn, actor="user", kind="test.before", subject=None, payload={})
    committed = head(root)
    assert anchor.read(runtime, anchor.ANCHOR) == committed

    filler = fill(small_disk)
    with pytest.raises(sqlite3.OperationalError, match="full"), store.write() as conn:
        journal.append(
            conn, actor="user", kind="test.too_big", subject=None, payload={"x": "y" * 400_000}
        )
    assert head(root) == committed
    assert anchor.read(runtime, anchor.ANCHOR) == committed
    filler.unlink()

    with store.write() as conn:  # the same connection commits again, appending nothing
        conn.execute("CREATE TABLE IF NOT EXISTS scratch (n INTEGER)")
    store.close()

    assert head(root) == committed
    assert anchor.read(runtime, anchor.ANCHOR) == committed
    assert anchor.read_record(anchor.head_path(runtime))[:2] == committed  # type: ignore[index]
    report = json.loads(ithaca(root, "doctor", "--json").stdout)
    journal_codes = {f["code"] for f in report["findings"] if f["code"].startswith("JOURNAL_")}
    assert journal_codes == set(), report["findings"]
    payload = {"session_id": "s1", "cwd": str(root), "hook_event_name": "PreToolUse",
               "tool_name": "Bash", "tool_input": {"command": "touch notes.txt"}}  # fmt: skip
    done = subprocess.run(
        [HOOK, "claude", "PreToolUse"], input=json.dumps(payload), capture_output=True,
        text=True, cwd=root, env={**os.environ, "CLAUDE_PROJECT_DIR": str(root)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "[JOURNAL_" not in done.stdout and "[LOCKDOWN]" not in done.stdout, done.stdout
