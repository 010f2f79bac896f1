"""Every corruption the doctor finds names the command that recovers from it, and that
command works: a damaged page, a zeroed header, a file cut in half. The project is made
and damaged as a user's is, and every command runs as a process of its own: the doctor
(``--json``), the restore or rebuild it names (at a terminal, where the user types its
token), and a checkpoint killed while it writes (docs/delivery.md, ``doctor``)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests import command_line
from tests.conftest import TerminalRun

DB = Path(".ithaca/.runtime/state.db")
BACKUPS = Path(".ithaca/.runtime/backups")
RUNTIME = Path(".ithaca/.runtime")
DECISIONS = ["dec-1", "dec-2", "dec-3", "dec-4"]
# What the doctor may say of damage: its own report's codes, and the lost-state code of
# a database SQLite will not open at all (``kernel.lost_state``).
DAMAGE = {
    "INTEGRITY_FAILED",
    "DATABASE_UNREADABLE",
    "JOURNAL_UNREADABLE",
    "JOURNAL_CHAIN_BROKEN",
    "STATE_UNREADABLE",
}
TEMP = re.compile(r"\.ithaca-[0-9a-f]{16}\.tmp")
PAUSE_S = 0.05  # between looks for a child that stopped itself


def ithaca(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ithaca ARGS`` at ``root``, whose messages name paths, never descriptors."""
    done = command_line.ithaca(root, *args, timeout=180)
    shown = done.stdout + done.stderr
    assert "/proc/self/fd" not in shown and not re.search(r"\bfd \d", shown), shown
    return done


def doctor(root: Path, *args: str) -> dict[str, Any]:
    """``ithaca doctor --json``: its report, or the error it answered with instead."""
    done = ithaca(root, "doctor", *args, "--json")
    if done.stdout.strip():
        report: dict[str, Any] = json.loads(done.stdout)
        assert done.returncode == (0 if report["ok"] else 1)
        return report
    assert done.returncode == 1, done.stderr
    error: dict[str, Any] = json.loads(done.stderr)["error"]
    return {"error": error}


def record_decision(root: Path, decision_id: str) -> None:
    data = {
        "id": decision_id,
        "scope": {"baseline": True},
        "question": f"{decision_id}?",
        "recommendation": "yes",
        "owner": "maria",
        "selection": {"choice": "yes", "rationale": "because"},
    }
    done = ithaca(
        root, "record", "decision", "accept", "--data", json.dumps(data), "--key", decision_id
    )
    assert done.returncode == 0, done.stderr


def decisions(database: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return sorted(row[0] for row in conn.execute("SELECT id FROM delivery_decisions"))
    finally:
        conn.close()


def backups(root: Path) -> list[str]:
    return sorted(name for name in os.listdir(root / BACKUPS) if name.endswith(".db"))


def restorable(root: Path) -> list[Path]:
    """The backups ``ithaca doctor restore`` takes (each with its manifest), newest last."""
    return [
        root / BACKUPS / name
        for name in backups(root)
        if name.startswith("state-") and (root / BACKUPS / name).with_suffix(".json").exists()
    ]


def checkpointed(root: Path) -> None:
    """Every committed page in the database file itself, the write-ahead log emptied."""
    conn = sqlite3.connect(root / DB)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project made with the CLI: two decisions, a verified backup taken by ``ithaca
    doctor --repair``, two decisions more, and every page in the database file."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert ithaca(root, "init").returncode == 0
    for decision_id in DECISIONS[:2]:
        record_decision(root, decision_id)
    repaired = doctor(root, "--repair")
    assert repaired["ok"], repaired
    for decision_id in DECISIONS[2:]:
        record_decision(root, decision_id)
    checkpointed(root)
    return root


# --- the damage -------------------------------------------------------------------------------


def corrupted_page(root: Path) -> None:
    """Garbage over the b-tree page of a table in the middle of the file."""
    conn = sqlite3.connect(f"file:{root / DB}?mode=ro", uri=True)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        (rootpage,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'delivery_decisions'"
        ).fetchone()
    finally:
        conn.close()
    assert 1 < rootpage < pages  # a page in the middle, not the header's
    with open(root / DB, "r+b") as stream:
        stream.seek((rootpage - 1) * page_size)
        stream.write(b"\xff" * 64)


def zeroed_header(root: Path) -> None:
    with open(root / DB, "r+b") as stream:
        stream.write(b"\x00" * 100)


def truncated(root: Path) -> None:
    size = (root / DB).stat().st_size
    os.truncate(root / DB, size // 2)


DAMAGES = {"corrupted page": corrupted_page, "zeroed header": zeroed_header, "truncated": truncated}


def named_recovery(found: dict[str, Any]) -> list[str]:
    """The commands the doctor named, in order: its report's ``recovery``, or the
    commands in backquotes of the lost-state error that stood in for a report."""
    if "error" in found:
        return re.findall(r"`(ithaca doctor [^`]*)`", found["error"]["message"])
    assert found["status"] == "corrupt"
    return list(found["recovery"]["commands"])


def damage_codes(found: dict[str, Any]) -> set[str]:
    if "error" in found:
        return {found["error"]["code"]}
    return {finding["code"] for finding in found["findings"] if finding["severity"] == "error"}


def run_named(root: Path, command: str, type_ahead: TerminalRun) -> str:
    """Run a command the doctor named, at a terminal, typing the token it asks for."""
    words = shlex.split(command)
    assert words[:2] == ["ithaca", "doctor"], command
    token = os.path.basename(words[3])[: -len(".db")] if words[2] == "restore" else "rebuild"
    code, shown = type_ahead(["--project", str(root), *words[1:]], token)
    assert code == 0, shown
    assert "Traceback" not in shown, shown
    return shown


def healthy(root: Path) -> None:
    report = doctor(root)
    assert "error" not in report, report
    errors = [finding for finding in report["findings"] if finding["severity"] == "error"]
    assert report["ok"] and not errors, report["findings"]


# --- each damage names its recovery, and the command named recovers -------------------------


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_the_restore_the_doctor_names_brings_back_the_newest_backup(
    damage: str, project: Path, type_ahead: TerminalRun
) -> None:
    root = project
    newest = restorable(root)[-1]
    held = decisions(newest)
    assert held and set(held) <= set(DECISIONS)
    DAMAGES[damage](root)
    damaged = (root / DB).read_bytes()

    found = doctor(root)
    assert damage_codes(found) & DAMAGE, found
    commands = named_recovery(found)
    restores = [command for command in commands if command.startswith("ithaca doctor restore ")]
    assert restores and "ithaca doctor --rebuild" in commands, commands
    assert os.path.basename(shlex.split(restores[0])[3]) == newest.name

    shown = run_named(root, restores[0], type_ahead)

    assert "Restored" in shown
    healthy(root)
    assert decisions(root / DB) == held
    # The damaged database was kept aside, as it was, in the quarantine named.
    quarantined = list((root / RUNTIME / "recovery").glob("quarantine-*/state.db"))
    assert [path.read_bytes() for path in quarantined] == [damaged]


def test_without_a_backup_that_verifies_the_rebuild_named_recovers(
    project: Path, type_ahead: TerminalRun
) -> None:
    root = project
    for backup in restorable(root):  # no backup matches its manifest any more
        with open(backup, "r+b") as stream:
            stream.seek(200)
            stream.write(b"\x01")
    corrupted_page(root)

    found = doctor(root)
    assert damage_codes(found) & DAMAGE, found
    commands = named_recovery(found)
    assert commands == ["ithaca doctor --rebuild"], commands

    run_named(root, commands[0], type_ahead)

    healthy(root)
    assert decisions(root / DB) == DECISIONS  # loaded back from their Decision Records


def test_a_repair_of_a_damaged_database_keeps_no_copy_of_it_as_the_newest_backup(
    project: Path, type_ahead: TerminalRun
) -> None:
    root = project
    before = backups(root)
    newest = str(restorable(root)[-1])
    corrupted_page(root)

    repaired = ithaca(root, "doctor", "--repair", "--json")

    assert repaired.returncode == 1
    error = json.loads(repaired.stderr)["error"]
    assert error["code"] == "BACKUP_FAILED"
    assert f"`ithaca doctor restore {newest}`" in error["message"]
    assert backups(root) == before
    assert not [name for name in os.listdir(root / BACKUPS) if name.endswith(".tmp")]
    again = doctor(root)
    assert named_recovery(again)[0] == f"ithaca doctor restore {newest}"
    run_named(root, named_recovery(again)[0], type_ahead)
    healthy(root)


# --- temp files a killed checkpoint left --------------------------------------------------------

# A ``checkpoint plan`` that SIGKILLs (or SIGSTOPs) itself the moment the kernel's atomic
# writer has created its temp file in the folder named by KILL_IN, before writing to it.
KILLED_AT_TEMP = """
import os, re, signal, sys
folder, how = os.environ["KILL_IN"], getattr(signal, os.environ["KILL_WITH"])
real = os.write
def write(fd, data):
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        path = ""
    if re.fullmatch(r"\\.ithaca-[0-9a-f]{16}\\.tmp", os.path.basename(path)) and folder in path:
        os.write = real
        os.kill(os.getpid(), how)
    return real(fd, data)
os.write = write
from ithaca.cli.entry import main
sys.argv[0] = "ithaca"
sys.exit(main())
"""
PLAN = ["checkpoint", "plan", "--change", "add-login", "--payload", '{"summary": "p"}']


@pytest.fixture
def planned_change(tmp_path: Path) -> Path:
    """A project with a change and a task: what a plan checkpoint plans."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert ithaca(root, "init").returncode == 0
    change = {"id": "add-login", "kind": "standard", "title": "Add login", "intent": "# L\n"}
    task = {"id": "T-1", "title": "t", "change_id": "add-login", "verification": {"argv": ["true"]}}
    for kind, data in (("change_contract open", change), ("task_contract define", task)):
        done = ithaca(root, "record", *kind.split(), "--data", json.dumps(data))
        assert done.returncode == 0, done.stderr
    return root


def plan_killed_at_temp(root: Path, folder: str, how: str = "SIGKILL") -> subprocess.Popen[str]:
    env = {**os.environ, "KILL_IN": folder, "KILL_WITH": how}
    return subprocess.Popen(
        [sys.executable, "-c", KILLED_AT_TEMP, *PLAN, "--key", "plan-1"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def temps(root: Path) -> list[Path]:
    return sorted(path for path in (root / ".ithaca").rglob("*") if TEMP.fullmatch(path.name))


def codes(report: dict[str, Any]) -> set[str]:
    return {finding["code"] for finding in report["findings"]}


@pytest.mark.parametrize("folder", ["/changes/active/add-login/", "/.runtime/blobs/"])
def test_doctor_repair_removes_the_temp_a_killed_checkpoint_left(
    planned_change: Path, folder: str
) -> None:
    root = planned_change
    child = plan_killed_at_temp(root, folder)
    child.communicate(timeout=180)
    assert child.returncode == -signal.SIGKILL
    left = temps(root)
    assert left, "the killed checkpoint left no temp file"

    found = doctor(root)
    assert "FILE_UNREGISTERED" not in codes(found)
    named = {
        entry["path"]
        for finding in found["findings"]
        for entry in finding.get("files") or ()
        if entry["state"] == "temp"
    } | {finding["subject"] for finding in found["findings"] if finding["code"] == "TEMP_FILE_LEFT"}
    assert {str(path.relative_to(root / ".ithaca")) for path in left} <= named, found["findings"]

    repaired = doctor(root, "--repair")

    assert temps(root) == []
    assert repaired["ok"] and not codes(repaired) & {"TEMP_FILE_LEFT", "FILE_UNREGISTERED"}
    assert ithaca(root, *PLAN, "--key", "plan-2").returncode == 0
    assert doctor(root)["status"] == "healthy"


def test_the_rerun_of_a_killed_plan_checkpoint_removes_its_temp(planned_change: Path) -> None:
    root = planned_change
    child = plan_killed_at_temp(root, "/changes/active/add-login/")
    child.communicate(timeout=180)
    assert child.returncode == -signal.SIGKILL
    assert temps(root)

    rerun = ithaca(root, *PLAN, "--key", "plan-1")

    assert rerun.returncode == 0, rerun.stderr
    assert temps(root) == []
    report = doctor(root)
    assert report["status"] == "healthy", report["findings"]


def test_a_repair_leaves_the_temp_of_a_writer_still_alive(planned_change: Path) -> None:
    root = planned_change
    child = plan_killed_at_temp(root, "/changes/active/add-login/", "SIGSTOP")
    try:
        deadline = time.monotonic() + 120
        while not temps(root) or _state(child.pid) != "T":
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(PAUSE_S)
        held = temps(root)

        doctor(root, "--repair")

        assert temps(root) == held  # its writer holds it: not the doctor's to remove
    finally:
        os.kill(child.pid, signal.SIGCONT)
    out, err = child.communicate(timeout=180)
    assert child.returncode == 0, err
    assert temps(root) == []
    assert doctor(root)["status"] == "healthy"


def _state(pid: int) -> str:
    """A process's state letter from ``/proc/<pid>/stat`` (``T``: stopped)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stream:
        return stream.read().rsplit(")", 1)[1].split()[0]
