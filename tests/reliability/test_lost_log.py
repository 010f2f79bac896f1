"""Nothing committed disappears unreported: committed journal events lost behind Ithaca's
back (a write-ahead log deleted or damaged after a crash, an older copy of the database put
back, a truncated file) are refused by the next hook as data loss, with the backup that
restores them; the CLI says the same, the doctor reports the loss, and the backup the CLI
took restores every record.

Every step runs as a user or a host runs it: ``ithaca`` and ``ithaca-hook`` processes, and
a reader process that keeps SQLite from checkpointing the write-ahead log (as a long-lived
MCP server does) until it is killed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.command_line import doctor_codes, ithaca
from tests.conftest import TerminalRun

HOOK = str(Path(sys.executable).parent / "ithaca-hook")
SESSION = "55555555-5555-4555-8555-555555555555"
RUNTIME = Path(".ithaca") / ".runtime"
DB = RUNTIME / "state.db"
RECORDS = 3


def record(root: Path, n: int) -> None:
    data = json.dumps({"type": "note_kept", "payload": {"n": n}})
    done = ithaca(root, "record", "event", "append", "--data", data)
    assert done.returncode == 0, done.stderr


def hook(root: Path, command: str) -> str:
    """Claude Code's PreToolUse hook on a ``Bash`` call; the deny reason ("" if none)."""
    payload = {"session_id": SESSION, "cwd": str(root), "hook_event_name": "PreToolUse",
               "tool_name": "Bash", "tool_input": {"command": command}}  # fmt: skip
    done = subprocess.run(
        [HOOK, "claude", "PreToolUse"], input=json.dumps(payload), capture_output=True,
        text=True, cwd=root, env={**os.environ, "CLAUDE_PROJECT_DIR": str(root)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    answer = json.loads(done.stdout) if done.stdout.strip() else {}
    specific = answer.get("hookSpecificOutput", {})
    return str(specific.get("permissionDecisionReason", ""))


def kept_notes(root: Path) -> list[int]:
    """The records the test made, as the journal holds them."""
    conn = sqlite3.connect(f"file:{root / DB}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT payload FROM journal WHERE kind = 'observation.note_kept' ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    return [json.loads(row[0])["n"] for row in rows]


def latest_backup(root: Path) -> str:
    names = sorted(path.name for path in (root / RUNTIME / "backups").glob("state-*.db"))
    assert names, "the CLI took no backup"
    return names[-1]


def hold_the_log(root: Path) -> subprocess.Popen[str]:
    """A process with the database open, so that no writer's close checkpoints the log."""
    reader = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({str(root / DB)!r})\n"
         "c.execute('SELECT count(*) FROM journal').fetchone()\n"
         "print('ready', flush=True)\n"
         "time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
    return reader


def crash(reader: subprocess.Popen[str]) -> None:
    reader.send_signal(signal.SIGKILL)
    reader.wait(timeout=30)


def wal_deleted(root: Path, reader: subprocess.Popen[str]) -> None:
    assert (root / f"{DB}-wal").stat().st_size > 0  # the records are only in the log
    crash(reader)
    (root / f"{DB}-wal").unlink()


def wal_damaged(root: Path, reader: subprocess.Popen[str]) -> None:
    crash(reader)
    log = root / f"{DB}-wal"
    data = bytearray(log.read_bytes())
    data[32:4096] = os.urandom(4096 - 32)  # the first frame's header and page garbled
    log.write_bytes(bytes(data))


def make_older_copy(root: Path, keep: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{root / DB}{suffix}").exists():
            shutil.copy2(f"{root / DB}{suffix}", keep / f"state.db{suffix}")


LOSSES: dict[str, Callable[[Path, subprocess.Popen[str]], None]] = {
    "wal deleted after a crash": wal_deleted,
    "wal damaged after a crash": wal_damaged,
}


@pytest.fixture
def project(project_dir: Path) -> Path:
    assert ithaca(project_dir, "status").returncode == 0
    return project_dir


def assert_refused_as_loss(root: Path, lost_from: int) -> str:
    """The next hook, the CLI and the doctor report the loss; returns the backup named."""
    reason = hook(root, "touch notes.txt")
    assert reason.startswith("Refused by Ithaca policy [JOURNAL_TAIL_MISSING]"), reason
    assert f"event {lost_from}" in reason, reason
    backup = latest_backup(root)
    assert f"`ithaca doctor restore {backup}`" in reason, reason
    status = ithaca(root, "status", "--json")
    assert status.returncode != 0
    error = json.loads(status.stderr or status.stdout)["error"]
    assert error["code"] == "JOURNAL_TAIL_MISSING" and backup in error["message"]
    assert "JOURNAL_TAIL_MISSING" in doctor_codes(root)
    assert hook(root, "touch notes.txt") == reason  # still refused: nothing moved past it
    return backup


def restore(root: Path, backup: str, type_ahead: TerminalRun) -> None:
    token = backup[: -len(".db")]
    code, shown = type_ahead(["--project", str(root), "doctor", "restore", backup], token)
    assert code == 0, shown
    assert "JOURNAL_TAIL_MISSING" not in doctor_codes(root)
    assert "[JOURNAL_" not in hook(root, "touch notes.txt")


@pytest.mark.parametrize("lose", sorted(LOSSES))
def test_records_lost_with_the_log_are_refused_as_data_loss_and_the_backup_restores_them(
    lose: str, project: Path, type_ahead: TerminalRun
):
    reader = hold_the_log(project)
    try:
        for n in range(RECORDS):
            record(project, n)
        assert kept_notes(project) == list(range(RECORDS))
        head = int((project / RUNTIME / "journal.anchor").read_text().split()[0])
        LOSSES[lose](project, reader)
    finally:
        if reader.poll() is None:
            crash(reader)
    assert kept_notes(project) == []  # gone with the log
    backup = assert_refused_as_loss(project, head)
    restore(project, backup, type_ahead)
    assert kept_notes(project) == list(range(RECORDS))


def test_an_older_copy_put_back_is_refused_as_data_loss(
    project: Path, tmp_path: Path, type_ahead: TerminalRun
):
    keep = tmp_path / "older"
    keep.mkdir()
    make_older_copy(project, keep)
    for n in range(RECORDS):
        record(project, n)
    head = int((project / RUNTIME / "journal.anchor").read_text().split()[0])
    for suffix in ("", "-wal", "-shm"):
        Path(f"{project / DB}{suffix}").unlink(missing_ok=True)
        if (keep / f"state.db{suffix}").exists():
            shutil.copy2(keep / f"state.db{suffix}", f"{project / DB}{suffix}")
    assert kept_notes(project) == []
    backup = assert_refused_as_loss(project, head)
    restore(project, backup, type_ahead)
    assert kept_notes(project) == list(range(RECORDS))


def test_a_truncated_database_is_refused_as_data_loss(project: Path, type_ahead: TerminalRun):
    for n in range(RECORDS):
        record(project, n)
    db = project / DB
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    pages = db.stat().st_size // 4096
    with open(db, "r+b") as stream:  # the last pages, where the new rows went, cut off
        stream.truncate((pages - 8) * 4096)
    reason = hook(project, "touch notes.txt")
    assert reason.startswith("Refused by Ithaca policy [JOURNAL_TAIL_MISSING]") or (
        reason.startswith("Refused by Ithaca policy [STATE_UNREADABLE]")
    ), reason
    backup = latest_backup(project)
    assert f"`ithaca doctor restore {backup}`" in reason, reason
    restore(project, backup, type_ahead)
    assert kept_notes(project) == list(range(RECORDS))


def test_a_commit_from_a_home_without_the_head_record_does_not_hide_the_loss(
    project: Path, tmp_path: Path
):
    """A process whose Ithaca home keeps no head record of this project (another user's,
    a fresh one) commits on top of the loss: the anchor stays where the loss shows."""
    reader = hold_the_log(project)
    try:
        for n in range(RECORDS):
            record(project, n)
        wal_deleted(project, reader)
    finally:
        if reader.poll() is None:
            crash(reader)
    anchored = (project / RUNTIME / "journal.anchor").read_bytes()
    other: dict[str, Any] = {**os.environ, "ITHACA_HOME": str(tmp_path / "another-home")}
    commit = (
        "import sys\n"
        "from ithaca.kernel import Store, journal\n"
        "store = Store(sys.argv[1], migrate=False)\n"
        "with store.write() as conn:\n"
        "    journal.append(conn, actor='user', kind='test.after', subject=None, payload={})\n"
        "store.close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", commit, str(project / DB)], env=other, timeout=60, check=True
    )
    assert (project / RUNTIME / "journal.anchor").read_bytes() == anchored
    assert "[JOURNAL_TAIL_MISSING]" in hook(project, "touch notes.txt")
    assert "JOURNAL_TAIL_MISSING" in doctor_codes(project)
