"""A crash leaves a clear report: after ``ithaca archive`` is killed mid-move, ``ithaca
doctor`` reports the moved and written files as part of the one unit that moved them,
with the command that rolls it back, not as missing or unregistered files; ``--repair``
restores them. A unit whose writer still runs is only information."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ithaca.app import IthacaProject
from ithaca.cli.entry import cli
from ithaca.kernel import canon, clock, journal

KILLED_ARCHIVE = textwrap.dedent(
    """
    import os, sys
    from ithaca.delivery.units import recoverable as units

    project_dir, when = sys.argv[1], sys.argv[2]
    real_rename, real_write = units.rename_folder, units.write_atomic

    def rename_then_die(*args, **kwargs):
        moved = real_rename(*args, **kwargs)
        if when == "moved":
            os._exit(9)
        return moved

    def write_then_die(root, relpath, data, **kwargs):
        written = real_write(root, relpath, data, **kwargs)
        if str(relpath).endswith("delivery/archive.json"):
            os._exit(9)
        return written

    units.rename_folder = rename_then_die
    units.write_atomic = write_then_die
    sys.argv = ["ithaca", "--project", project_dir, "archive", "add-login",
                "--summary", "Shipped.", "--no-baseline-change", "nothing changes"]
    from ithaca.cli.entry import main
    main()
    """
)
ACTIVE = "changes/active/add-login"
KEPT = ["decisions/dec-login.json", "intent.md", "research/notes.md"]


def run(project_dir: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--project", str(project_dir), *args])


@pytest.fixture
def change(record: Any, new_change: Any) -> None:
    new_change()
    record(
        "decision",
        "accept",
        {
            "id": "dec-login",
            "scope": {"change_id": "add-login"},
            "question": "Which login?",
            "recommendation": "Email",
            "owner": "maria",
            "selection": {"choice": "Email", "rationale": "simple"},
        },
    )
    record(
        "artifact",
        "bind",
        {
            "kind": "research",
            "scope": {"change_id": "add-login"},
            "path": "research/notes.md",
            "content": "notes\n",
        },
    )


def kill_archive(project_dir: Path, when: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KILLED_ARCHIVE, str(project_dir), when],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr.decode()


@pytest.mark.parametrize("when", ["moved", "wrote"])
def test_an_archive_killed_mid_move_is_one_unit_that_repair_rolls_back(
    change: None, project: IthacaProject, project_dir: Path, state_root: Path, when: str
) -> None:
    kill_archive(project_dir, when)
    (archived,) = (state_root / "changes/archive").iterdir()  # left half done
    moved_to = f"changes/archive/{archived.name}"
    assert not (state_root / ACTIVE).exists()

    result = run(project_dir, "doctor", "--json")

    report = json.loads(result.stdout)
    assert result.exit_code == 0, result.output  # nothing is lost: no error
    assert report["status"] == "degraded"
    (unit,) = report["findings"]
    assert unit["code"] == "RECOVERY_PENDING" and unit["severity"] == "warning"
    assert unit["op"] == "archive"
    assert unit["fix"] == "ithaca doctor --repair"
    assert unit["renames"] == [{"source": ACTIVE, "target": moved_to}]
    expected = [
        {"path": f"{ACTIVE}/{name}", "state": "moved", "now_at": f"{moved_to}/{name}"}
        for name in KEPT
    ]
    if when == "wrote":
        expected.append({"path": f"{moved_to}/delivery/archive.json", "state": "written"})
    assert sorted(unit["files"], key=lambda f: f["path"]) == sorted(
        expected, key=lambda f: f["path"]
    )
    assert "Nothing is lost: `ithaca doctor --repair` rolls it back" in unit["message"]
    assert f"moved {ACTIVE} → {moved_to}" in unit["message"]
    shown = run(project_dir, "doctor").output
    assert "FILE_MISSING" not in shown and "FILE_UNREGISTERED" not in shown
    assert f"moved    {ACTIVE}/intent.md → {moved_to}/intent.md" in shown

    repaired = run(project_dir, "doctor", "--repair", "--json")

    after = json.loads(repaired.stdout)
    assert repaired.exit_code == 0, repaired.output
    assert after["status"] == "healthy" and after["findings"] == []
    assert (
        sorted(
            str(path.relative_to(state_root / ACTIVE))
            for path in (state_root / ACTIVE).rglob("*")
            if path.is_file()
        )
        == KEPT
    )
    assert not (state_root / "changes/archive").exists()
    kinds = [e["kind"] for e in journal.query(project.store.connection(), kind="delivery.")]
    assert kinds[-2:] == ["delivery.intent_rolled_back", "delivery.doctor_repaired"]


def test_a_file_a_unit_changed_by_hand_is_still_reported(
    change: None, project_dir: Path, state_root: Path
) -> None:
    kill_archive(project_dir, "moved")
    (archived,) = (state_root / "changes/archive").iterdir()
    (archived / "research/notes.md").write_text("edited while the unit was pending\n")

    report = json.loads(run(project_dir, "doctor", "--json").stdout)

    codes = {(f["code"], f["subject"]) for f in report["findings"]}
    assert ("FILE_DIGEST_MISMATCH", f"{ACTIVE}/research/notes.md") in codes
    edited = next(f for f in report["findings"] if f["code"] == "FILE_DIGEST_MISMATCH")
    assert edited["now_at"] == f"changes/archive/{archived.name}/research/notes.md"
    unit = next(f for f in report["findings"] if f["code"] == "RECOVERY_PENDING")
    assert [f["path"] for f in unit["files"]] == [
        f"{ACTIVE}/decisions/dec-login.json",
        f"{ACTIVE}/intent.md",
    ]


def test_a_unit_whose_writer_still_runs_is_information_only(
    change: None, project: IthacaProject, project_dir: Path, state_root: Path
) -> None:
    new = state_root / ACTIVE / "delivery/archive.json"
    new.parent.mkdir()
    new.write_bytes(b"{}\n")
    steps = {
        "targets": [
            {
                "path": f"{ACTIVE}/delivery/archive.json",
                "expected": canon.digest_bytes(b"{}\n"),
                "previous": None,
                "copy": None,
            }
        ]
    }
    with project.store.write() as conn:
        conn.execute(
            "INSERT INTO delivery_fs_intents VALUES ('int_live', 'archive', 'pending', ?, NULL,"
            " ?, ?, ?)",
            (os.getpid(), canon.canonical_text(steps), clock.now(), clock.now()),
        )

    result = run(project_dir, "doctor", "--json")

    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["status"] == "healthy"
    (unit,) = report["findings"]
    assert (unit["code"], unit["severity"]) == ("UNIT_IN_PROGRESS", "info")
    assert unit["files"] == [{"path": f"{ACTIVE}/delivery/archive.json", "state": "written"}]
    delivery = [check for check in report["checks"] if check["id"] == "delivery"]
    assert [check["status"] for check in delivery] == ["ok"]
