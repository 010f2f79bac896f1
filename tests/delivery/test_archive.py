"""``archive``: a change with decisions and no accepted baseline archives, gaps are
diagnostics, the hard cases are errors that change nothing, and the unit survives a
crash on either side of its commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.archive import ARCHIVE_SCHEMA, archive_change
from ithaca.delivery.records import decisions
from ithaca.delivery.service import DeliveryService
from ithaca.delivery.units import recoverable as units
from ithaca.kernel import canon, clock
from ithaca.kernel.errors import Conflict, Corrupt, InvalidInput, IthacaError, Refused

TODAY = "2030-01-02"
ARCHIVED = f"changes/archive/{TODAY}-add-login"
DECISION = {
    "id": "dec-session-store",
    "scope": {"change_id": "add-login"},
    "question": "Where do sessions live?",
    "recommendation": "In a signed cookie",
    "selection": {"choice": "cookie", "rationale": "no server state"},
    "owner": "maria",
}


@pytest.fixture(autouse=True)
def fixed_day(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "now", lambda: f"{TODAY}T10:00:00.000Z")


@pytest.fixture
def change(new_change: Any, record: Any) -> None:
    """A change with a decision, a pending task and a copied research note."""
    new_change()
    record("decision", "accept", DECISION)
    record(
        "task_contract",
        "define",
        {
            "id": "T-1",
            "title": "Login form",
            "change_id": "add-login",
            "verification": {"argv": ["pytest"]},
        },
    )
    record(
        "artifact",
        "bind",
        {
            "kind": "research",
            "scope": {"change_id": "add-login"},
            "path": "research/auth.md",
            "content": "# Auth\n\nCookies.\n",
        },
    )


def run(project: IthacaProject, payload: dict[str, Any], key: str = "arch-1") -> dict[str, Any]:
    request = {"change_id": "add-login", "payload": payload, "idempotency_key": key}
    return archive_change(project.project, project.store, project.config, request)


def codes(answer: dict[str, Any]) -> dict[str, str]:
    return {found["code"]: found["severity"] for found in answer["diagnostics"]}


def rows(project: IthacaProject, query: str, *args: Any) -> list[tuple[Any, ...]]:
    return project.store.connection().execute(query, args).fetchall()


def assert_untouched(project: IthacaProject, state_root: Path) -> None:
    assert (state_root / "changes/active/add-login/intent.md").exists()
    assert not (state_root / "changes/archive").exists()
    assert rows(project, "SELECT status, path FROM delivery_changes") == [
        ("active", "changes/active/add-login")
    ]
    assert rows(project, "SELECT count(*) FROM delivery_reconciliations") == [(0,)]


def test_a_change_with_decisions_archives_without_an_accepted_baseline(
    change: None, project: IthacaProject, state_root: Path, record: Any
) -> None:
    decision_file = state_root / "changes/active/add-login/decisions/dec-session-store.json"
    decision_bytes = decision_file.read_bytes()
    answer = run(project, {"summary": "Login shipped.", "no_baseline_change_reason": "no spec"})

    assert answer["change"]["status"] == "archived"
    assert answer["change"]["path"] == ARCHIVED
    assert codes(answer) == {
        "ARCHIVE_TASKS_OPEN": "warning",
        "DELIVER_CHECKPOINT_MISSING": "warning",
        "BASELINE_NOT_ACCEPTED": "info",
    }
    assert not (state_root / "changes/active/add-login").exists()
    moved = state_root / ARCHIVED / "decisions/dec-session-store.json"
    assert moved.read_bytes() == decision_bytes
    note = json.loads((state_root / ARCHIVED / "delivery/archive.json").read_text())
    assert note["summary"] == "Login shipped."
    assert note["reconciliation"] == {"status": "reconciled", "updates": [], "reason": "no spec"}
    assert [task["id"] for task in note["tasks"]] == ["T-1"]
    assert note["tasks"][0]["outcome"] is None
    assert note["decisions"][0]["id"] == "dec-session-store"

    conn = project.store.connection()
    row = decisions.find(conn, "dec-session-store")
    assert row is not None and row["path"] == f"{ARCHIVED}/decisions/dec-session-store.json"
    assert decisions.read_verified(str(state_root), conn, row)["digest"] == row["digest"]
    assert rows(project, "SELECT path FROM delivery_artifacts") == [
        (f"{ARCHIVED}/research/auth.md",)
    ]
    registered = rows(
        project,
        "SELECT path, digest FROM delivery_files WHERE path LIKE ? ORDER BY path",
        "changes/%",
    )
    assert all(path.startswith(ARCHIVED + "/") for path, _ in registered)
    for path, digest in registered:
        assert canon.digest_bytes((state_root / path).read_bytes()) == digest
    assert rows(project, "SELECT kind FROM journal ORDER BY seq DESC LIMIT 1") == [
        ("delivery.change_archived",)
    ]
    with pytest.raises(Refused) as refused:
        record("decision", "accept", {**DECISION, "id": "dec-later"})
    assert refused.value.code == "CHANGE_ARCHIVED"


def test_a_repeated_key_replays_and_a_second_archive_is_refused(
    change: None, project: IthacaProject
) -> None:
    payload = {"summary": "Done.", "no_baseline_change_reason": "none"}
    first = run(project, payload)
    again = run(project, payload)
    assert again["replayed"] is True
    assert again["journal_seq"] == first["journal_seq"]
    with pytest.raises(Refused) as refused:
        run(project, payload, key="arch-2")
    assert refused.value.code == "CHANGE_ARCHIVED"


def test_baseline_updates_are_copied_and_raise_the_baseline_revision(
    change: None, project: IthacaProject, state_root: Path, record: Any
) -> None:
    record("baseline", "initialize", {"project_name": "demo"})
    (state_root / "specs").mkdir()
    (state_root / "specs/auth.md").write_text("old spec\n")
    answer = run(
        project,
        {
            "summary": "Done.",
            "baseline_updates": [{"target": "specs/auth.md", "source": "research/auth.md"}],
        },
    )
    assert (state_root / "specs/auth.md").read_text() == "# Auth\n\nCookies.\n"
    reconciliation = answer["reconciliation"]
    assert reconciliation["status"] == "reconciled"
    assert reconciliation["baseline_revision"] == 2
    assert reconciliation["updates"][0]["target"] == "specs/auth.md"
    assert rows(project, "SELECT revision, specs FROM delivery_baselines") == [
        (
            2,
            canon.canonical_text(
                [{"digest": reconciliation["updates"][0]["digest"], "path": "specs/auth.md"}]
            ),
        )
    ]
    assert not any((state_root / ".runtime/recovery").glob("*"))


def test_saying_nothing_about_the_baseline_needs_attention_until_reconciled(
    change: None, project: IthacaProject, record: Any
) -> None:
    answer = run(project, {"summary": "Done."})
    assert codes(answer)["BASELINE_RECONCILIATION_MISSING"] == "needs_attention"
    status = "SELECT status FROM delivery_reconciliations WHERE change_id = 'add-login'"
    assert rows(project, status) == [("unreconciled",)]
    record("baseline", "revise", {"patch": {"unknowns": ["auth"]}, "reconciles": ["add-login"]})
    assert rows(project, status) == [("reconciled",)]


def test_running_work_conflicts(change: None, project: IthacaProject, state_root: Path) -> None:
    with project.store.write() as conn:
        conn.execute("UPDATE delivery_tasks SET status = 'in_progress' WHERE id = 'T-1'")
    with pytest.raises(Conflict) as conflict:
        run(project, {"summary": "Done."})
    assert conflict.value.code == "ARCHIVE_SESSIONS_RUNNING"
    assert_untouched(project, state_root)


def test_an_existing_archive_folder_conflicts(
    change: None, project: IthacaProject, state_root: Path
) -> None:
    (state_root / ARCHIVED).mkdir(parents=True)
    with pytest.raises(Conflict) as conflict:
        run(project, {"summary": "Done."})
    assert conflict.value.code == "ARCHIVE_TARGET_EXISTS"
    assert rows(project, "SELECT status FROM delivery_changes") == [("active",)]


def test_an_edited_decision_file_is_drift(
    change: None, project: IthacaProject, state_root: Path
) -> None:
    path = state_root / "changes/active/add-login/decisions/dec-session-store.json"
    path.write_text(path.read_text().replace("signed cookie", "database"))
    with pytest.raises(Corrupt) as corrupt:
        run(project, {"summary": "Done."})
    assert corrupt.value.code == "DECISION_FILE_DRIFT"
    assert_untouched(project, state_root)


@pytest.mark.parametrize(
    ("update", "code"),
    [
        ({"target": "../escape.md", "source": "research/auth.md"}, "PATH_UNSAFE"),
        ({"target": "changes/x.md", "source": "research/auth.md"}, "PATH_UNSAFE"),
        ({"target": "specs/a.md", "source": "/etc/passwd"}, "PATH_UNSAFE"),
    ],
)
def test_unsafe_baseline_paths_are_refused(
    change: None, project: IthacaProject, state_root: Path, update: dict[str, str], code: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        run(project, {"summary": "Done.", "baseline_updates": [update]})
    assert refused.value.code == code
    assert_untouched(project, state_root)


def test_both_reconciliation_fields_or_unknown_fields_are_invalid(
    change: None, project: IthacaProject
) -> None:
    both = {
        "summary": "x",
        "no_baseline_change_reason": "y",
        "baseline_updates": [{"target": "specs/a.md", "source": "research/auth.md"}],
    }
    for payload in (both, {"summary": "x", "extra": 1}):
        with pytest.raises(InvalidInput) as invalid:
            run(project, payload)
        assert invalid.value.code == "VALIDATION_ERROR"
    assert ARCHIVE_SCHEMA["additionalProperties"] is False


class Crash(Exception):
    pass


def test_a_failure_before_the_commit_rolls_everything_back(
    change: None, project: IthacaProject, state_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (state_root / "specs").mkdir()
    (state_root / "specs/auth.md").write_text("old spec\n")
    real = units.write_atomic
    crashed: list[str] = []

    def write_then_crash(root: Any, relpath: Any, data: Any, **kwargs: Any) -> Any:
        written = real(root, relpath, data, **kwargs)
        if str(relpath) == "specs/auth.md" and not crashed:
            crashed.append(str(relpath))
            raise Crash(relpath)
        return written

    monkeypatch.setattr(units, "write_atomic", write_then_crash)
    update = {"target": "specs/auth.md", "source": "research/auth.md"}
    with pytest.raises(Crash):
        run(project, {"summary": "Done.", "baseline_updates": [update]})
    assert (state_root / "specs/auth.md").read_text() == "old spec\n"
    assert not (state_root / "changes/active/add-login/delivery").exists()
    assert_untouched(project, state_root)
    assert rows(project, "SELECT count(*) FROM delivery_fs_intents WHERE op = 'archive'") == [(0,)]


CHILD = textwrap.dedent(
    """
    import os, sys
    from ithaca.app import open_project
    from ithaca.delivery.units import recoverable as units
    from ithaca.delivery.archive import archive_change
    from ithaca.kernel import clock

    clock.now = lambda: "2030-01-02T10:00:00.000Z"
    if sys.argv[2] == "before":
        real = units.write_atomic

        def write_then_die(root, relpath, data, **kwargs):
            written = real(root, relpath, data, **kwargs)
            if str(relpath) == "specs/auth.md":
                os._exit(7)
            return written

        units.write_atomic = write_then_die
    else:
        units.Units._finish = lambda self, intent: os._exit(7)
    project = open_project(sys.argv[1])
    archive_change(project.project, project.store, project.config, {
        "change_id": "add-login", "idempotency_key": "arch-1",
        "payload": {"summary": "Done.", "baseline_updates": [
            {"target": "specs/auth.md", "source": "research/auth.md"}]}})
    """
)


def killed_mid_archive(project_dir: Path, when: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(project_dir), when], capture_output=True, timeout=60
    )
    assert done.returncode == 7, done.stderr.decode()


def test_a_killed_archive_before_its_commit_rolls_back_on_next_open(
    change: None, project_dir: Path, project: IthacaProject, state_root: Path
) -> None:
    (state_root / "specs").mkdir()
    (state_root / "specs/auth.md").write_text("old spec\n")
    killed_mid_archive(project_dir, "before")
    assert (state_root / ARCHIVED / "delivery/archive.json").exists()  # left half done
    assert (state_root / "specs/auth.md").read_text() == "# Auth\n\nCookies.\n"

    service = DeliveryService(project.project, project.store, project.config)
    assert [(found["op"], found["now"]) for found in service.recovered] == [
        ("archive", "rolled_back")
    ]
    assert (state_root / "specs/auth.md").read_text() == "old spec\n"
    assert not (state_root / "changes/active/add-login/delivery").exists()
    assert_untouched(project, state_root)
    answer = run(project, {"summary": "Done.", "no_baseline_change_reason": "later"})
    assert answer["change"]["status"] == "archived"


def test_a_killed_archive_after_its_commit_is_finished_on_next_open(
    change: None, project_dir: Path, project: IthacaProject, state_root: Path
) -> None:
    killed_mid_archive(project_dir, "after")
    intents = "SELECT status FROM delivery_fs_intents WHERE op = 'archive'"
    assert rows(project, intents) == [("committed",)]
    service = DeliveryService(project.project, project.store, project.config)
    assert [(found["op"], found["now"]) for found in service.recovered] == [("archive", "done")]
    assert rows(project, "SELECT status, path FROM delivery_changes") == [("archived", ARCHIVED)]
    assert (state_root / "specs/auth.md").read_text() == "# Auth\n\nCookies.\n"
    assert (state_root / ARCHIVED / "delivery/archive.json").exists()
    assert not os.path.exists(state_root / "changes/active/add-login")
    assert not any((state_root / ".runtime/recovery").glob("*"))


def test_errors_keep_their_class(change: None, project: IthacaProject) -> None:
    request = {"change_id": "nope", "payload": {"summary": "x"}, "idempotency_key": "k"}
    with pytest.raises(IthacaError) as missing:
        archive_change(project.project, project.store, project.config, request)
    assert missing.value.code == "CHANGE_NOT_FOUND"
