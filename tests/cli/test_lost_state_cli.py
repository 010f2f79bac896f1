"""``ithaca status`` and ``ithaca doctor`` where the state is lost: the same code and the
same commands as the hooks' refusal, exit code 1, no traceback; and the commands named
do restore it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests import command_line
from tests.conftest import TerminalRun
from tests.lost_states import CASES, as_an_ordinary_user, deleted, garbage, with_backup

from ithaca.kernel import lost_state
from ithaca.kernel.lost_state import record_path
from ithaca.kernel.project import find_project


def ithaca(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ithaca ARGS`` in a terminal at ``root``, as an ordinary user runs it."""
    return command_line.ithaca(root, *args, preexec_fn=as_an_ordinary_user)


@pytest.mark.parametrize("case", sorted(CASES))
def test_status_and_doctor_say_what_was_lost_and_how_to_restore_it(case: str, project_dir: Path):
    root = with_backup(project_dir)
    lose, code, restore = CASES[case]
    lose(root)

    status = ithaca(root, "status")
    assert status.returncode == 1
    assert status.stderr.startswith(f"error {code}: "), status.stderr
    for command in restore:
        assert command in status.stderr, (command, status.stderr)
    refused = json.loads(ithaca(root, "status", "--json").stderr)["error"]
    assert refused["code"] == code and refused["details"]["root"] == str(root)

    checked = ithaca(root, "doctor")
    assert checked.returncode == 1
    if code == lost_state.EMPTIED:  # the doctor's own report names it
        assert f"error   {code}: " in checked.stdout, checked.stdout
    else:
        assert checked.stderr == status.stderr


def test_a_deleted_state_folder_comes_back_with_git_checkout_and_init(project_dir: Path):
    root = project_dir
    subprocess.run(["git", "-C", str(root), "add", ".ithaca"], check=True)
    deleted(root)

    subprocess.run(["git", "-C", str(root), "checkout", "--", ".ithaca"], check=True)
    assert ithaca(root, "status").returncode == 1  # the tracked part alone: no database yet
    assert ithaca(root, "init").returncode == 0
    assert ithaca(root, "status").returncode == 0
    assert "STATE_" not in ithaca(root, "doctor").stdout  # a new journal, which it may report


@pytest.mark.parametrize("case", ["database deleted", "a folder", "garbage"])
def test_the_named_backup_restores_a_lost_database(
    case: str, project_dir: Path, type_ahead: TerminalRun
):
    root = with_backup(project_dir)
    CASES[case][0](root)
    named = json.loads(ithaca(root, "status", "--json").stderr)["error"]["details"]["backup"]

    code, shown = type_ahead(["--project", str(root), "doctor", "restore", named], named[:-3])

    assert code == 0, shown
    assert ithaca(root, "status").returncode == 0
    assert ithaca(root, "doctor").returncode == 0


def test_without_a_backup_the_rebuild_named_restores_an_unreadable_database(
    project_dir: Path, type_ahead: TerminalRun
):
    shutil.rmtree(project_dir / ".ithaca" / ".runtime" / "backups")  # the one `init` took
    garbage(project_dir)
    status = ithaca(project_dir, "status")
    assert "`ithaca doctor --rebuild`" in status.stderr and "doctor restore" not in status.stderr

    code, shown = type_ahead(["--project", str(project_dir), "doctor", "--rebuild"], "rebuild")

    assert code == 0, shown
    assert ithaca(project_dir, "status").returncode == 0


def test_init_records_the_project_outside_it_and_a_never_set_up_folder_is_not_initialised(
    project_dir: Path, tmp_path: Path
):
    found = find_project(project_dir)
    assert found is not None
    record = json.loads(Path(record_path(found.root)).read_text())
    assert record["root"] == found.root and record["stateRoot"] == found.state_root

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["git", "init", "-q", str(fresh)], check=True)
    for command in ("status", "doctor"):
        done = ithaca(fresh, command)
        assert done.returncode == 1 and done.stderr.startswith("error NOT_INITIALISED: ")


def test_a_project_set_up_before_the_record_gets_one_when_opened(project_dir: Path):
    found = find_project(project_dir)
    assert found is not None
    record = Path(record_path(found.root))
    record.unlink()

    assert ithaca(project_dir, "status").returncode == 0

    assert json.loads(record.read_text())["root"] == found.root
