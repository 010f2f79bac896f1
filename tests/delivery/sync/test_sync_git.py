"""The team ledger through real Git (reference §8.3, §16 sync): two clones, each with its
own database, publish on their branches; ``git merge`` runs the registered merge driver.
Disjoint edits merge cleanly; an edit of one task on both sides stops the merge and
``ithaca sync import --resolve`` settles it. Commands run through the ``sync`` CLI group."""

from __future__ import annotations

import itertools
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ithaca import init_project
from ithaca.app import open_project
from ithaca.cli.commands.sync import group

DRIVER = f"{shlex.quote(sys.executable)} -m ithaca.delivery.ledger.driver %O %A %B %P"
LEDGER = ".ithaca/tasks/tasks.json"
_KEYS = itertools.count(1)


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GIT_AUTHOR", "GIT_COMMITTER"):
        monkeypatch.setenv(f"{name}_NAME", "Test")
        monkeypatch.setenv(f"{name}_EMAIL", "test@example.com")


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=check
    )


def sync(root: Path, *args: str) -> Result:
    return CliRunner().invoke(group, list(args), obj={"project_path": str(root)})


def record(root: Path, kind: str, action: str, data: dict[str, Any]) -> None:
    project = open_project(root)
    try:
        project.delivery.record(
            {
                "entries": [
                    {
                        "kind": kind,
                        "action": action,
                        "data": data,
                        "idempotency_key": f"{root.name}-{next(_KEYS)}",
                    }
                ]
            }
        )
    finally:
        project.close()


def retitle(root: Path, task_id: str, title: str) -> None:
    record(root, "task_contract", "revise", {"id": task_id, "patch": {"title": title}})


def title_of(root: Path, task_id: str) -> str:
    project = open_project(root)
    try:
        row = (
            project.store.connection()
            .execute("SELECT contract FROM delivery_tasks WHERE id = ?", (task_id,))
            .fetchone()
        )
        title: str = json.loads(row[0])["title"]
        return title
    finally:
        project.close()


def publish_and_commit(root: Path, message: str) -> None:
    assert sync(root, "publish").exit_code == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


@pytest.fixture
def clones(project_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two clones sharing a published ledger of T-1..T-3, each with the driver registered."""
    first = project_dir
    for task_id in ("T-1", "T-2", "T-3"):
        record(
            first,
            "task_contract",
            "define",
            {"id": task_id, "title": "a task", "verification": {"argv": ["pytest"]}},
        )
    assert sync(first, "install-driver", "--command", DRIVER).exit_code == 0
    publish_and_commit(first, "tasks")
    second = tmp_path / "second"
    subprocess.run(["git", "clone", "-q", str(first), str(second)], check=True)
    opened, _ = init_project(second)  # imports the cloned ledger into a new database
    opened.close()
    assert sync(second, "install-driver", "--command", DRIVER).exit_code == 0
    assert title_of(second, "T-3") == "a task"
    return first, second


def pull(root: Path) -> subprocess.CompletedProcess[str]:
    git(root, "fetch", "-q", "origin")
    branch = git(root, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
    return git(root, "merge", "--no-edit", f"origin/{branch}", check=False)


def test_branches_touching_different_tasks_merge_cleanly_through_git(clones):
    first, second = clones
    retitle(first, "T-1", "first's edit")
    publish_and_commit(first, "first edits T-1")
    retitle(second, "T-2", "second's edit")
    publish_and_commit(second, "second edits T-2")

    merged = pull(second)

    assert merged.returncode == 0, merged.stdout + merged.stderr
    ledger = json.loads((second / LEDGER).read_text())
    titles = {item["id"]: item["body"]["title"] for item in ledger["records"]}
    assert titles == {"T-1": "first's edit", "T-2": "second's edit", "T-3": "a task"}
    assert "conflicts" not in ledger
    assert json.loads(sync(second, "import", "--json").stdout)["applied"] == 1
    assert (title_of(second, "T-1"), title_of(second, "T-2")) == ("first's edit", "second's edit")
    assert json.loads(sync(second, "inspect", "--json").stdout)["status"] == "current"


def test_one_task_edited_on_both_branches_stops_git_until_resolved(clones):
    first, second = clones
    retitle(first, "T-3", "first's title")
    publish_and_commit(first, "first edits T-3")
    retitle(second, "T-3", "second's title")
    publish_and_commit(second, "second edits T-3")

    merged = pull(second)

    assert merged.returncode != 0
    ledger = json.loads((second / LEDGER).read_text())
    assert [(item["type"], item["id"]) for item in ledger["conflicts"]] == [("task", "T-3")]
    inspected = json.loads(sync(second, "inspect", "--json").stdout)
    assert inspected["status"] == "conflicted"
    refused = sync(second, "import")
    assert refused.exit_code == 1 and "LEDGER_UNRESOLVED_CONFLICTS" in refused.output

    settled = sync(second, "import", "--resolve", "task:T-3=theirs", "--json")

    assert settled.exit_code == 0, settled.output
    assert "conflicts" not in json.loads((second / LEDGER).read_text())
    assert title_of(second, "T-3") == "first's title"
    git(second, "add", LEDGER)
    git(second, "commit", "-q", "--no-edit")
    assert json.loads(sync(second, "publish", "--json").stdout)["status"] == "unchanged"


def test_install_driver_registers_once_and_inspect_sees_it(project_dir: Path):
    first = sync(project_dir, "install-driver", "--command", DRIVER)
    again = sync(project_dir, "install-driver", "--command", DRIVER)
    # ``ithaca init`` registered the attribute; only the command changes here.
    assert "registered git config merge.ithaca-ledger.driver" in first.output
    assert "already registered" in again.output
    attributes = (project_dir / ".gitattributes").read_text().splitlines()
    assert attributes.count(f"{LEDGER} merge=ithaca-ledger") == 1
    assert git(project_dir, "config", "merge.ithaca-ledger.driver").stdout.strip() == DRIVER
    inspected = json.loads(sync(project_dir, "inspect", "--json").stdout)
    assert inspected["merge_driver_registered"] is True


def test_the_merge_driver_command_exits_as_git_expects(tmp_path: Path):
    for name in ("O", "A", "B"):
        (tmp_path / name).write_text("not a ledger")
    result = sync(tmp_path, "merge-driver", *(str(tmp_path / name) for name in "OAB"))
    assert result.exit_code == 2
    assert (tmp_path / "A").read_text() == "not a ledger"
