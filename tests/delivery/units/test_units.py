"""Recoverable units: a crash between the file write and the commit leaves no orphan, in
this process or after a killed one, and concurrent writers of one file both land."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService
from ithaca.delivery.units import recoverable as units
from ithaca.kernel import canon, clock

OPEN = {"id": "fix-crash", "kind": "quick", "title": "Fix crash", "intent": "Stop the crash."}


class Crash(Exception):
    pass


def crash_after_writing(monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    """Make the unit's writer write the target file, then fail (once) before T2."""
    real = units.write_atomic
    crashed: list[str] = []

    def write_then_crash(root: Any, relpath: Any, data: Any, **kwargs: Any) -> Any:
        written = real(root, relpath, data, **kwargs)
        if str(relpath).endswith(suffix) and not crashed:
            crashed.append(str(relpath))
            raise Crash(relpath)
        return written

    monkeypatch.setattr(units, "write_atomic", write_then_crash)


def table_count(project: IthacaProject, table: str) -> int:
    return int(project.store.connection().execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_a_crash_before_commit_leaves_no_orphan(
    record: Any, project: IthacaProject, state_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = ("delivery_changes", "delivery_fs_intents", "delivery_idempotency", "delivery_files")
    before = {table: table_count(project, table) for table in tables}
    crash_after_writing(monkeypatch, "intent.md")
    with pytest.raises(Crash):
        record("change_contract", "open", OPEN, key="open-1")
    assert not (state_root / "changes").exists()
    assert {table: table_count(project, table) for table in tables} == before
    monkeypatch.undo()
    assert record("change_contract", "open", OPEN, key="open-1")["status"] == "committed"


def test_a_crash_while_replacing_a_file_restores_the_old_one(
    record: Any, project: IthacaProject, state_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record("change_contract", "open", OPEN)
    intent = state_root / "changes/active/fix-crash/intent.md"
    crash_after_writing(monkeypatch, "intent.md")
    with pytest.raises(Crash):
        record("change_contract", "revise", {"id": "fix-crash", "patch": {}, "intent": "New."})
    assert intent.read_text() == "Stop the crash.\n"
    row = project.store.connection().execute("SELECT revision FROM delivery_changes").fetchone()
    assert row[0] == 1
    assert not (state_root / ".runtime/recovery").exists() or not any(
        (state_root / ".runtime/recovery").iterdir()
    )


CHILD = textwrap.dedent(
    """
    import os, sys
    from ithaca.app import open_project
    from ithaca.delivery.units import recoverable as units
    from ithaca.delivery.service import DeliveryService

    real = units.write_atomic

    def write_then_die(root, relpath, data, **kwargs):
        written = real(root, relpath, data, **kwargs)
        if str(relpath).endswith("intent.md"):
            os._exit(7)
        return written

    units.write_atomic = write_then_die
    project = open_project(sys.argv[1])
    service = DeliveryService(project.project, project.store, project.config)
    service.record({"entries": [{"kind": "change_contract", "action": "open",
        "idempotency_key": "open-1", "data": {"id": "fix-crash", "kind": "quick",
        "title": "Fix crash", "intent": "Stop the crash."}}]})
    """
)


def test_a_killed_writer_is_rolled_back_when_the_next_service_opens(
    project_dir: Path, project: IthacaProject, state_root: Path, record: Any
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(project_dir)], capture_output=True, timeout=60
    )
    assert done.returncode == 7, done.stderr.decode()
    intent = state_root / "changes/active/fix-crash/intent.md"
    assert intent.exists()  # the orphan the dead process left
    assert table_count(project, "delivery_changes") == 0

    service = DeliveryService(project.project, project.store, project.config)
    assert [entry["now"] for entry in service.recovered] == ["rolled_back"]
    assert not (state_root / "changes").exists()
    events = project.store.connection().execute(
        "SELECT count(*) FROM journal WHERE kind = 'delivery.intent_rolled_back'"
    )
    assert events.fetchone()[0] == 1
    assert record("change_contract", "open", OPEN, key="open-1")["status"] == "committed"


def test_a_dead_owners_committed_unit_is_finished(project: IthacaProject, state_root: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    dead_pid = int(gone.stdout)
    copies = state_root / ".runtime/recovery/int_dead/0"
    copies.parent.mkdir(parents=True)
    copies.write_text("old")
    steps = {"targets": [{"path": "x.md", "expected": "0" * 64, "previous": None, "copy": None}]}
    with project.store.write() as conn:
        conn.execute(
            "INSERT INTO delivery_fs_intents VALUES ('int_dead', 'test', 'committed', ?, NULL,"
            " ?, ?, ?)",
            (dead_pid, canon.canonical_text(steps), clock.now(), clock.now()),
        )
    service = DeliveryService(project.project, project.store, project.config)
    assert service.recovered == [
        {"intent": "int_dead", "op": "test", "was": "committed", "now": "done"}
    ]
    assert not copies.parent.exists()
    again = DeliveryService(project.project, project.store, project.config)
    assert again.recovered == []


def test_a_live_owners_pending_unit_is_left_alone(project: IthacaProject, state_root: Path) -> None:
    steps = {"targets": [{"path": "x.md", "expected": "0" * 64, "previous": None, "copy": None}]}
    with project.store.write() as conn:
        conn.execute(
            "INSERT INTO delivery_fs_intents VALUES ('int_live', 'test', 'pending', ?, NULL,"
            " ?, ?, ?)",
            (os.getpid(), json.dumps(steps), clock.now(), clock.now()),
        )
    service = DeliveryService(project.project, project.store, project.config)
    assert service.recovered == []


def test_concurrent_writers_of_one_file_both_land(
    service: DeliveryService, record: Any, project: IthacaProject, state_root: Path
) -> None:
    record("change_contract", "open", OPEN)
    errors: list[BaseException] = []

    def revise(text: str) -> None:
        try:
            service.record(
                {
                    "entries": [
                        {
                            "kind": "change_contract",
                            "action": "revise",
                            "idempotency_key": f"revise-{text}",
                            "data": {"id": "fix-crash", "patch": {}, "intent": text},
                        }
                    ]
                }
            )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=revise, args=(text,)) for text in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    conn = project.store.connection()
    assert conn.execute("SELECT revision FROM delivery_changes").fetchone()[0] == 3
    registered = conn.execute(
        "SELECT digest FROM delivery_files WHERE path = 'changes/active/fix-crash/intent.md'"
    ).fetchone()[0]
    on_disk = (state_root / "changes/active/fix-crash/intent.md").read_bytes()
    assert canon.digest_bytes(on_disk) == registered
    assert (
        conn.execute("SELECT count(*) FROM delivery_fs_intents WHERE status != 'done'").fetchone()[
            0
        ]
        == 0
    )
