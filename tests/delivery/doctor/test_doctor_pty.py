"""``ithaca doctor restore`` and ``--rebuild`` from a real pseudo-terminal: the user types
the token the prompt shows; a bad backup is refused before anything moves."""

from __future__ import annotations

import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ithaca import open_project
from ithaca.kernel import doctor, journal

ITHACA = Path(sys.executable).parent / "ithaca"
WAIT_SECONDS = 60


def on_terminal(project_dir: Path, *args: str, answer: str | None = None) -> tuple[int, str]:
    """Run ``ithaca`` on a pty; type ``answer`` once it asks; return (exit code, output)."""
    master, slave = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}
    process = subprocess.Popen(
        [str(ITHACA), "--project", str(project_dir), *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    output, typed = "", answer is None
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        ready, _, _ = select.select([master], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            process.kill()
            raise AssertionError(f"timed out; output so far:\n{output}")
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk.decode(errors="replace")
        if not typed and "press Enter: " in output:
            os.write(master, f"{answer}\n".encode())
            typed = True
    code = process.wait(timeout=WAIT_SECONDS)
    os.close(master)
    return code, output


def decisions(project_dir: Path) -> list[str]:
    project = open_project(project_dir)
    try:
        rows = project.store.connection().execute("SELECT id FROM delivery_decisions")
        return sorted(row[0] for row in rows)
    finally:
        project.close()


def take_backup(project_dir: Path) -> Path:
    project = open_project(project_dir)
    try:
        return Path(doctor.backup(project.project, project.store)["path"])
    finally:
        project.close()


def add_decision(project_dir: Path, decision_id: str) -> None:
    project = open_project(project_dir)
    try:
        data = {
            "id": decision_id,
            "scope": {"baseline": True},
            "question": f"{decision_id}?",
            "recommendation": "yes",
            "owner": "maria",
            "selection": {"choice": "yes", "rationale": "because"},
        }
        entry = {
            "kind": "decision",
            "action": "accept",
            "data": data,
            "idempotency_key": decision_id,
        }
        project.delivery.record({"entries": [entry]})
    finally:
        project.close()


def test_restore_with_the_typed_token_brings_the_backup_back(project_dir: Path) -> None:
    add_decision(project_dir, "dec-kept")
    backup = take_backup(project_dir)
    add_decision(project_dir, "dec-after")

    code, output = on_terminal(project_dir, "doctor", "restore", backup.name, answer=backup.stem)

    assert code == 0, output
    assert "Restored" in output
    assert decisions(project_dir) == ["dec-kept"]


def test_a_tampered_backup_is_refused_and_the_database_stays(project_dir: Path) -> None:
    add_decision(project_dir, "dec-kept")
    backup = take_backup(project_dir)
    with sqlite3.connect(backup) as conn:
        conn.execute("DELETE FROM delivery_decisions")
    add_decision(project_dir, "dec-after")

    code, output = on_terminal(project_dir, "doctor", "restore", backup.name, answer=backup.stem)

    assert code == 1
    assert "BACKUP_INVALID" in output
    assert "press Enter" not in output
    assert decisions(project_dir) == ["dec-after", "dec-kept"]


def test_rebuild_with_the_typed_token_reloads_from_files(project_dir: Path) -> None:
    add_decision(project_dir, "dec-kept")

    code, output = on_terminal(project_dir, "doctor", "--rebuild", answer="rebuild")

    assert code == 0, output
    assert "delivery: loaded 0 changes, 1 decisions, 3 files" in output  # with the ledger
    assert decisions(project_dir) == ["dec-kept"]
    project = open_project(project_dir)
    try:
        conn = project.store.connection()
        assert [e["actor"] for e in journal.query(conn, kind="delivery.doctor_rebuilt")] == ["user"]
    finally:
        project.close()
