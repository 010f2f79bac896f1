"""A process killed inside the kernel's atomic write, after its temp file is written and
before the rename, leaves nothing behind once the next service rolls its unit back: not
the temp, not the target, not a folder it made, not a half-written temp no live writer
holds; other files beside it, and a live writer's temp, stay."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService

CHANGE = "changes/active/fix-crash"
LIVE_TEMP = ".ithaca-0123456789abcdef.tmp"
DEAD_TEMP = ".ithaca-fedcba9876543210.tmp"

# argv: project folder, then the JSON data of a change_contract entry and its action.
CHILD = textwrap.dedent(
    """
    import json, os, sys
    from ithaca.app import open_project
    from ithaca.delivery.units import recoverable as units
    from ithaca.delivery.service import DeliveryService

    real = units.write_atomic

    def die_before_rename(*args, **kwargs):
        os._exit(9)

    def write(root, relpath, data, **kwargs):
        if str(relpath).endswith("intent.md"):
            os.replace = die_before_rename  # the kernel writer renames its temp with it
        return real(root, relpath, data, **kwargs)

    units.write_atomic = write
    project = open_project(sys.argv[1])
    service = DeliveryService(project.project, project.store, project.config)
    service.record({"entries": [{"kind": "change_contract", "action": sys.argv[2],
        "idempotency_key": "killed", "data": json.loads(sys.argv[3])}]})
    """
)


def kill_inside_write(project_dir: Path, action: str, data: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(project_dir), action, data],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 9, done.stderr.decode()


def temps(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.rglob(".ithaca-*.tmp"))


def reopen(project: IthacaProject) -> list[dict[str, Any]]:
    return DeliveryService(project.project, project.store, project.config).recovered


def intent_statuses(project: IthacaProject) -> list[str]:
    rows = project.store.connection().execute(
        # init's own units (the templates, the team ledger) and the ledger's publishes
        "SELECT status FROM delivery_fs_intents WHERE op NOT IN ('templates', 'sync.publish')"
    )
    return [row[0] for row in rows]


def test_a_new_files_temp_and_folders_are_gone_after_recovery(
    project_dir: Path, project: IthacaProject, state_root: Path
) -> None:
    opening = '{"id": "fix-crash", "kind": "quick", "title": "Fix crash", "intent": "Stop."}'
    kill_inside_write(project_dir, "open", opening)
    assert len(temps(state_root / CHANGE)) == 1  # the orphan the killed write left
    assert not (state_root / CHANGE / "intent.md").exists()

    assert [entry["now"] for entry in reopen(project)] == ["rolled_back"]
    assert temps(state_root) == []
    assert not (state_root / "changes").exists()
    assert intent_statuses(project) == ["rolled_back"]


def test_the_units_temp_and_abandoned_ones_go_from_a_folder_that_existed(
    project_dir: Path, project: IthacaProject, state_root: Path, record: Any
) -> None:
    record(
        "change_contract",
        "open",
        {"id": "fix-crash", "kind": "quick", "title": "Fix crash", "intent": "Stop."},
    )
    intent = state_root / CHANGE / "intent.md"
    before = intent.read_bytes()
    kill_inside_write(project_dir, "revise", '{"id": "fix-crash", "patch": {}, "intent": "New."}')
    [killed] = temps(state_root / CHANGE)
    others = {
        LIVE_TEMP: b"a live writer's half\n",  # not the unit's bytes, and held
        ".ithaca-notes.tmp": b"not the kernel's name\n",
        "notes.md": b"kept\n",
    }
    for name, data in others.items():
        (state_root / CHANGE / name).write_bytes(data)
    # A half-written temp no one holds: a writer killed before its rename.
    (state_root / CHANGE / DEAD_TEMP).write_bytes(b"a dead writer's half")

    with open(state_root / CHANGE / LIVE_TEMP, "rb") as live:
        fcntl.flock(live, fcntl.LOCK_EX)  # what the kernel's writer holds until its rename
        assert [entry["now"] for entry in reopen(project)] == ["rolled_back"]
    assert not (state_root / CHANGE / killed).exists()
    assert not (state_root / CHANGE / DEAD_TEMP).exists()
    assert intent.read_bytes() == before
    for name, data in others.items():
        assert (state_root / CHANGE / name).read_bytes() == data
    assert sorted(intent_statuses(project)) == ["done", "rolled_back"]
