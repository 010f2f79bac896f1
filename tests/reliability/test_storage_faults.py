"""Storage faults by name, on real file systems with real processes: a full disk, a
read-only mount, a refused permission and a locked store each answer under their own code
with the fix, from the ``ithaca`` CLI and from ``ithaca mcp`` over stdio, and none is
called a lost state (no restore, no rebuild of a healthy database).

The disks are small tmpfs mounts made for each test and unmounted after it, so these
tests need root (CI runs them as root); the permission test runs Ithaca without the
capabilities that let root ignore file permissions, as any other user meets them.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, TextContent
from tests.command_line import claude_hook

from ithaca import init_project

ITHACA = str(Path(sys.executable).parent / "ithaca")
DB = Path(".ithaca/.runtime/state.db")
# Root, meeting file permissions as every other user does (util-linux's setpriv).
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
BASELINE = {"project_name": "shop", "mode": "brownfield"}
LOST_STATE_WORDS = ("doctor restore", "--rebuild", "STATE_UNREADABLE", "chmod u+rw")


def record_request(key: str) -> dict[str, Any]:
    """The MCP ``record`` tool's request for a first baseline entry."""
    entry = {"kind": "baseline", "action": "initialize", "idempotency_key": key}
    return {"entries": [{**entry, "data": BASELINE}]}


def mounted(where: Path, *options: str) -> None:
    done = subprocess.run(
        ["mount", *options, str(where)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(
            f"cannot mount {where} ({done.stderr.strip()}): these tests run as root, as in CI",
            pytrace=False,
        )


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A file system of its own, 8 MiB of memory, unmounted after the test."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted(where, "-t", "tmpfs", "-o", "size=8m", "tmpfs")
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=True)


@pytest.fixture
def project_on_disk(disk: Path) -> Path:
    """A Git repository on ``disk`` with ``ithaca init`` applied (its store closed)."""
    root = disk / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_project(root)[0].close()
    return root


def fill(disk: Path) -> Path:
    """Fill ``disk`` to its last byte with one file; returns the file."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:  # noqa: PTH123 - raw writes
        for size in (1 << 20, 1 << 12, 1):
            try:
                while out.write(b"\0" * size):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


def remount_read_only(disk: Path) -> None:
    mounted(disk, "-o", "remount,ro")


def ithaca(
    root: Path, *args: str, wrap: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``ithaca --project ROOT ARGS`` in its own process."""
    done = subprocess.run(
        [*(wrap or []), ITHACA, "--project", str(root), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "400"},
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


def refused(done: subprocess.CompletedProcess[str], code: str) -> str:
    """The message of a command that must fail with ``code`` (exit 1, ``error CODE: …``)."""
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.startswith("error ")]
    assert lines and lines[-1].startswith(f"error {code}: "), done.stderr
    message = lines[-1].removeprefix(f"error {code}: ")
    for words in LOST_STATE_WORDS:
        assert words not in message, message
    return message


def refused_json(done: subprocess.CompletedProcess[str], code: str) -> dict[str, Any]:
    """The ``{code, message, details}`` a ``--json`` command must fail with."""
    assert done.returncode == 1, (done.returncode, done.stderr)
    error: dict[str, Any] = json.loads(done.stderr.splitlines()[-1])["error"]
    assert error["code"] == code, error
    return error


def record(
    root: Path, key: str, *, wrap: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``ithaca record baseline initialize`` with ``key``: a command that writes."""
    data = json.dumps(BASELINE)
    return ithaca(root, "record", "baseline", "initialize", "--data", data, "--key", key, wrap=wrap)


Step = Callable[[], None] | tuple[str, dict[str, Any]]


def over_mcp(
    root: Path, steps: list[Step], *, wrap: list[str] | None = None
) -> list[CallToolResult]:
    """Start ``ithaca mcp`` for ``root`` over stdio, then take each step in turn: run a
    callable (to break the disk while the server runs), or call a tool; returns the
    tools' results in order."""
    command = [*(wrap or []), ITHACA, "--project", str(root), "mcp"]
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

    async def session() -> list[CallToolResult]:
        results = []
        with anyio.fail_after(120):
            async with Client(server, read_timeout_seconds=60) as client:
                for step in steps:
                    if callable(step):
                        step()
                    else:
                        results.append(await client.call_tool(*step))
        return results

    return anyio.run(session)


def hook_denial(root: Path, code: str) -> str:
    """The reason Claude Code's ``PreToolUse`` hook gives for denying a ``Write`` in
    ``root``: it must name ``code`` and no lost state."""
    write = {"file_path": str(root / "notes.txt"), "content": "hello"}
    answer = claude_hook(root, "PreToolUse", "Write", write, "s-storage")
    assert answer["effect"] == "deny", answer
    assert code in answer["text"], answer["text"]
    for words in LOST_STATE_WORDS:
        assert words not in answer["text"], answer["text"]
    return answer["text"]


def tool_error(result: CallToolResult, code: str) -> dict[str, Any]:
    """The ``{code, message, details}`` of a tool call that must fail with ``code``: the
    same JSON as text and as structured content, as every refusal is."""
    assert result.is_error, result.structured_content
    block = result.content[0]
    assert isinstance(block, TextContent), block
    error: dict[str, Any] = json.loads(block.text)
    assert error == result.structured_content
    assert error["code"] == code, error
    assert set(error) == {"code", "message", "details"}
    for words in LOST_STATE_WORDS:
        assert words not in error["message"], error["message"]
    return error


def test_a_full_disk_is_disk_full_for_every_command_and_nothing_is_lost(
    disk: Path, project_on_disk: Path
):
    root = project_on_disk
    filler = fill(disk)

    for done in (
        record(root, "k1"),
        ithaca(root, "checkpoint", "research", "--baseline", "--key", "k2"),
        ithaca(root, "status"),
    ):
        message = refused(done, "DISK_FULL")
        assert message.startswith(f"the disk holding {root / DB} is full"), message
        assert "free some space on it, then run the command again" in message
    for args in (["status"], ["record", "baseline", "initialize", "--data", "{}", "--key", "k3"]):
        error = refused_json(ithaca(root, *args, "--json"), "DISK_FULL")
        assert error["details"]["path"] == str(root / DB)
    assert "free some space" in hook_denial(root, "DISK_FULL")

    filler.unlink()  # the user frees some space
    assert record(root, "k1").returncode == 0
    assert ithaca(root, "status").returncode == 0


def test_a_disk_that_fills_under_the_mcp_server_is_disk_full_to_the_agent(
    disk: Path, project_on_disk: Path
):
    root = project_on_disk
    filled: list[Path] = []

    full, after = over_mcp(
        root,
        [
            lambda: filled.append(fill(disk)),
            ("record", record_request("b1")),
            lambda: filled[0].unlink(),
            ("record", record_request("b1")),
        ],
    )

    error = tool_error(full, "DISK_FULL")
    assert error["message"].startswith(f"the disk holding {root / DB} is full")
    assert error["details"]["path"] == str(root / DB)
    assert not after.is_error, after.content  # space freed: the same call goes through


def test_a_read_only_file_system_is_named_with_remounting_as_its_fix(
    disk: Path, project_on_disk: Path
):
    root = project_on_disk
    remount_read_only(disk)

    for done in (record(root, "k1"), ithaca(root, "status")):
        message = refused(done, "READ_ONLY_FILESYSTEM")
        assert message.startswith(f"{root / DB} is on a file system mounted read-only"), message
        assert "remount it read-write" in message
    (result,) = over_mcp(root, [("record", record_request("b1"))])
    error = tool_error(result, "READ_ONLY_FILESYSTEM")
    assert "remount it read-write" in error["message"]
    assert "remount it read-write" in hook_denial(root, "READ_ONLY_FILESYSTEM")


@pytest.mark.parametrize("closed", ["the state folder", "the database"])
def test_state_the_user_may_not_write_is_permission_denied(closed: str, project_dir: Path):
    """The user's Ithaca may read the state but not write it: the folder that holds the
    database (where SQLite keeps its journal files beside it) or the database itself."""
    root = project_dir
    runtime = root / DB.parent
    named = runtime if closed == "the state folder" else root / DB
    mode = 0o555 if named.is_dir() else 0o444
    named.chmod(mode)
    try:
        message = refused(record(root, "k1", wrap=WITHOUT_OVERRIDE), "PERMISSION_DENIED")
        (result,) = over_mcp(root, [("record", record_request("b1"))], wrap=WITHOUT_OVERRIDE)
    finally:
        named.chmod(mode | 0o200)
    assert message.startswith(f"permission denied on {named}"), message  # (and its journal)
    assert "run Ithaca as the user who owns" in message and f"`ls -ld {named}" in message
    error = tool_error(result, "PERMISSION_DENIED")
    assert error["details"]["path"] == str(named)
    assert record(root, "k1").returncode == 0  # the permission given back


@pytest.fixture
def holder(project_dir: Path) -> Iterator[sqlite3.Connection]:
    """Another process's hold on ``project_dir``'s store: an exclusive transaction that
    readers and writers alike wait for, until the test lets go (``close``)."""
    held = sqlite3.connect(project_dir / DB, isolation_level=None)
    held.execute("PRAGMA locking_mode = EXCLUSIVE")
    held.execute("BEGIN EXCLUSIVE")
    held.execute("SELECT count(*) FROM journal").fetchone()
    yield held
    held.close()


def test_a_store_another_process_holds_is_store_locked_not_lost(
    project_dir: Path, holder: sqlite3.Connection
):
    """Each answer waits out the store's busy timeout (a few seconds), not more."""
    root = project_dir

    error = refused_json(ithaca(root, "status", "--json"), "STORE_LOCKED")
    assert error["message"].startswith(f"{root / DB} is locked by another process")
    assert "run the command again" in error["message"]
    for words in LOST_STATE_WORDS:
        assert words not in error["message"], error["message"]
    locked, freed = over_mcp(
        root,
        [("record", record_request("b1")), holder.close, ("record", record_request("b1"))],
    )
    tool_error(locked, "STORE_LOCKED")
    assert not freed.is_error, freed.content  # the lock let go: the same call goes through
