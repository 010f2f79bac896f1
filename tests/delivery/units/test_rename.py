"""Recoverable units that move a folder: moved before files are written, moved back
(after the files are restored) on failure and after a dead owner, never over a folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService
from ithaca.delivery.units.plans import Outcome, Plan, Rename, Stale, TrackedWrite
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import canon, clock


class Boom(Exception):
    pass


def moving_plan(fail: bool = False) -> Plan:
    def commit(conn: object) -> Outcome:
        if fail:
            raise Boom()
        return Outcome({"moved": True}, None)

    write = TrackedWrite("done/box/note.txt", b"note\n", "note", "project", None)
    return Plan("move", commit, (write,), [], (Rename("open/box", "done/box"),))


@pytest.fixture
def units(project: IthacaProject, state_root: Path) -> Units:
    (state_root / "open/box").mkdir(parents=True)
    (state_root / "open/box/kept.txt").write_text("kept\n")
    return Units(project.project, project.store)


def test_the_folder_moves_and_the_file_lands_in_it(units: Units, state_root: Path) -> None:
    assert units.run(moving_plan(), None)["result"] == {"moved": True}
    assert (state_root / "done/box/kept.txt").read_text() == "kept\n"
    assert (state_root / "done/box/note.txt").read_text() == "note\n"
    assert not (state_root / "open/box").exists()


def test_a_failed_commit_moves_the_folder_back(units: Units, state_root: Path) -> None:
    with pytest.raises(Boom):
        units.run(moving_plan(fail=True), None)
    assert sorted(path.name for path in (state_root / "open/box").iterdir()) == ["kept.txt"]
    assert not (state_root / "done").exists()


def test_a_taken_target_is_stale_and_nothing_moves(units: Units, state_root: Path) -> None:
    (state_root / "done/box").mkdir(parents=True)
    with pytest.raises(Stale):
        units.run(moving_plan(), None)
    assert (state_root / "open/box/kept.txt").exists()
    assert not any((state_root / "done/box").iterdir())


def test_a_dead_owners_move_is_undone(
    units: Units, project: IthacaProject, state_root: Path
) -> None:
    (state_root / "done").mkdir()
    (state_root / "open/box").rename(state_root / "done/box")
    (state_root / "done/box/note.txt").write_bytes(b"note\n")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    steps = {
        "targets": [
            {
                "path": "done/box/note.txt",
                "expected": canon.digest_bytes(b"note\n"),
                "previous": None,
                "copy": None,
            }
        ],
        "renames": [{"source": "open/box", "target": "done/box"}],
    }
    with project.store.write() as conn:
        conn.execute(
            "INSERT INTO delivery_fs_intents VALUES ('int_gone', 'move', 'pending', ?, NULL,"
            " ?, ?, ?)",
            (int(gone.stdout), canon.canonical_text(steps), clock.now(), clock.now()),
        )
    service = DeliveryService(project.project, project.store, project.config)
    assert [found["now"] for found in service.recovered] == ["rolled_back"]
    assert sorted(path.name for path in (state_root / "open/box").iterdir()) == ["kept.txt"]
    assert not (state_root / "done").exists()
