"""The team ledger kept in step around the tools (reference §8.2, §8.3): ``ithaca init``
registers the merge driver and publishes generation 0; mutating calls import first and
publish after team-visible changes, reporting trouble as diagnostics; a call that would
change a record in conflict is refused with ``LEDGER_CONFLICT``."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject, init_project
from ithaca.delivery.ledger import format as ledger_format
from ithaca.delivery.ledger.format import LEDGER_PATH, Ledger, document, parse
from ithaca.delivery.records import tool_batch as record
from ithaca.delivery.service import DeliveryService
from ithaca.delivery.sync import tool as sync
from ithaca.kernel.errors import Conflict

_KEYS = itertools.count(1)


def ledger(project: IthacaProject) -> Ledger:
    return parse((Path(project.project.state_root) / LEDGER_PATH).read_bytes())


def ids_of(found: Ledger, kind: str) -> list[str]:
    return [item.id for item in found.records if item.type == kind]


def codes(answer: dict[str, Any]) -> list[str]:
    return [note["code"] for note in answer["diagnostics"]]


def define(record: Any, task_id: str) -> None:
    data = {"id": task_id, "title": "a task", "verification": {"argv": ["pytest"]}}
    record("task_contract", "define", data)


def title_of(project: IthacaProject, task_id: str) -> str:
    found = project.store.connection().execute(
        "SELECT contract FROM delivery_tasks WHERE id = ?", (task_id,)
    )
    return str(json.loads(found.fetchone()[0])["title"])


def teammate_retitles(project: IthacaProject, task_id: str, title: str) -> None:
    """Write the ledger's next generation as another checkout would publish it."""
    current = ledger(project)
    records = []
    for found in current.records:
        if found.key == ("task", task_id):
            found = ledger_format.record("task", task_id, {**found.body, "title": title})
        records.append(ledger_format.revised(found, current.index[found.key].stamp))
    following = document(
        current.project_id,
        tuple(records),
        generation=current.generation + 1,
        parent_digest=current.state_digest,
        ancestors=(current.state_digest, *current.ancestors),
    )
    path = Path(project.project.state_root) / LEDGER_PATH
    path.write_bytes(ledger_format.render(following))


def publish(project: IthacaProject) -> None:
    request = {"action": "publish", "idempotency_key": f"pub-{next(_KEYS)}"}
    sync.sync(project.project, project.store, project.config, request)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- init ---------------------------------------------------------------------------------


def test_init_registers_the_driver_and_publishes_generation_zero(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    opened, made = init_project(root)
    try:
        found = ledger(opened)
        assert (found.generation, found.records) == (0, ())
        assert found.project_id.startswith("prj-")
        assert ".ithaca/tasks/tasks.json" in made
        assert git(root, "check-attr", "merge", "--", ".ithaca/tasks/tasks.json").endswith(
            "merge: ithaca-ledger\n"
        )
        assert "sync merge-driver %O %A %B %P" in git(root, "config", "merge.ithaca-ledger.driver")
        inspected = sync.sync(opened.project, opened.store, opened.config, {"action": "inspect"})
        assert (inspected["status"], inspected["merge_driver_registered"]) == ("current", True)
    finally:
        opened.close()
    again, made_again = init_project(root)
    again.close()
    assert made_again == []
    assert ledger(again).project_id == found.project_id


def test_init_outside_git_writes_no_ledger(tmp_path: Path) -> None:
    opened, _ = init_project(tmp_path / "plain")
    opened.close()
    assert not (tmp_path / "plain" / ".ithaca" / LEDGER_PATH).exists()
    assert not (tmp_path / "plain" / ".gitattributes").exists()


def test_init_skips_the_driver_quietly_when_git_cannot_register_it(tmp_path: Path) -> None:
    root = tmp_path / "not-really-git"
    (root / ".git").mkdir(parents=True)  # a folder Git does not accept as a repository
    opened, made = init_project(root)
    opened.close()
    assert not any(item.startswith("git config") for item in made)
    assert ledger(opened).generation == 0


# --- publish after team-visible changes ---------------------------------------------------


def test_opening_a_change_publishes_and_defining_a_task_waits(
    project: IthacaProject, record: Any, new_change: Any
) -> None:
    answer = new_change("add-login")
    assert answer["status"] == "committed"
    after_open = ledger(project)
    assert (after_open.generation, ids_of(after_open, "change")) == (1, ["add-login"])

    define(record, "T-1")
    assert ledger(project) == after_open  # task contracts are published by the next trigger

    accepted = project.delivery.checkpoint(
        {
            "stage": "plan",
            "scope": {"change_id": "add-login"},
            "payload": {"summary": "one task"},
            "idempotency_key": "plan-1",
        }
    )
    assert accepted["accepted"] is True
    assert "LEDGER_PUBLISH_DEFERRED" not in codes(accepted)
    after_plan = ledger(project)
    assert after_plan.generation == 2
    assert ids_of(after_plan, "task") == ["T-1"]
    assert ids_of(after_plan, "checkpoint") == ["plan:change:add-login"]


def test_archiving_publishes_the_archived_change(project: IthacaProject, new_change: Any) -> None:
    new_change("add-login")
    project.delivery.archive(
        {
            "change_id": "add-login",
            "payload": {"summary": "done", "no_baseline_change_reason": "nothing changed"},
            "idempotency_key": "arch-1",
        }
    )
    assert ledger(project).index[("change", "add-login")].body["status"] == "archived"


def test_a_committed_unit_left_by_a_dead_writer_is_published_on_open(
    project: IthacaProject, record: Any
) -> None:
    quiet = record_entries(project, "change_contract", "open", OPENED)
    assert quiet["results"][0]["status"] == "committed"
    assert ids_of(ledger(project), "change") == []  # published by nobody yet
    dead = subprocess.Popen(["true"])
    dead.wait()
    with project.store.write() as conn:
        conn.execute(
            "INSERT INTO delivery_fs_intents (id, op, status, owner_pid, owner_start, steps,"
            " created_at, updated_at) VALUES ('int_dead', 'change_contract.open', 'committed',"
            " ?, NULL, '{\"targets\": []}', 'x', 'x')",
            (dead.pid,),
        )

    DeliveryService(project.project, project.store, project.config)

    assert ids_of(ledger(project), "change") == ["fix-crash"]


OPENED = {"id": "fix-crash", "kind": "quick", "title": "Fix crash", "intent": "Stop it."}


def record_entries(project: IthacaProject, kind: str, action: str, data: dict[str, Any]):
    """A ``record`` call below the service: nothing imported, nothing published."""
    request = {"entries": [{"kind": kind, "action": action, "data": data, "idempotency_key": "q"}]}
    return record.run(project.store, project.project, project.delivery.units, record.parse(request))


# --- import before a mutating call --------------------------------------------------------


@pytest.fixture
def shared(project: IthacaProject, record: Any) -> IthacaProject:
    """T-1 and T-2, published."""
    define(record, "T-1")
    define(record, "T-2")
    publish(project)
    return project


def test_a_mutating_call_first_imports_a_teammates_ledger(shared: IthacaProject, record: Any):
    teammate_retitles(shared, "T-1", "theirs")
    answer = shared.delivery.record(
        {
            "entries": [
                {
                    "kind": "event",
                    "action": "append",
                    "idempotency_key": "e-1",
                    "data": {"type": "note", "payload": {"text": "hello"}},
                }
            ]
        }
    )
    assert answer["results"][0]["status"] == "committed"
    assert title_of(shared, "T-1") == "theirs"


def test_reads_and_heartbeats_never_import(shared: IthacaProject) -> None:
    acquired = shared.delivery.session(
        {
            "operation": "acquire",
            "task_id": "T-2",
            "strategy": "spawn",
            "worktree": "none",
            "idempotency_key": "acq-T-2",
        }
    )
    teammate_retitles(shared, "T-1", "theirs")

    shared.delivery.session({"operation": "heartbeat", "session_id": acquired["session"]["id"]})
    shared.delivery.session({"operation": "admission", "task_id": "T-1"})
    envelope = shared.delivery.context({})

    assert title_of(shared, "T-1") == "a task"
    assert envelope["team_checkpoint"]["status"] == "behind"
    pending = envelope["diagnostics"]["needs_attention"]
    assert "LEDGER_IMPORT_PENDING" in [note["code"] for note in pending]


def test_changing_a_conflicted_record_is_refused_and_others_go_on(
    shared: IthacaProject, record: Any
) -> None:
    record("task_contract", "revise", {"id": "T-1", "patch": {"title": "ours"}})
    teammate_retitles(shared, "T-1", "theirs")
    before = shared.store.connection().execute("SELECT max(seq) FROM journal").fetchone()[0]

    with pytest.raises(Conflict) as caught:
        record("task_contract", "revise", {"id": "T-1", "patch": {"title": "ours again"}})

    assert caught.value.code == "LEDGER_CONFLICT"
    assert caught.value.details["records"] == ["task:T-1"]
    assert title_of(shared, "T-1") == "ours"
    after = shared.store.connection().execute("SELECT max(seq) FROM journal").fetchone()[0]
    assert after == before

    other = shared.delivery.record(
        {
            "entries": [
                {
                    "kind": "change_contract",
                    "action": "open",
                    "idempotency_key": "o-1",
                    "data": OPENED,
                }
            ]
        }
    )
    assert other["results"][0]["status"] == "committed"
    notes = {note["code"]: note["severity"] for note in other["diagnostics"]}
    assert codes(other)[0] == "LEDGER_CONFLICT" and codes(other)[-1] == "LEDGER_PUBLISH_DEFERRED"
    assert notes["LEDGER_CONFLICT"] == notes["LEDGER_PUBLISH_DEFERRED"] == "needs_attention"


def test_acquiring_a_conflicted_task_is_refused(shared: IthacaProject, record: Any) -> None:
    record("task_contract", "revise", {"id": "T-1", "patch": {"title": "ours"}})
    teammate_retitles(shared, "T-1", "theirs")
    request = {
        "operation": "acquire",
        "task_id": "T-1",
        "strategy": "spawn",
        "worktree": "none",
        "idempotency_key": "acq-1",
    }
    with pytest.raises(Conflict) as caught:
        shared.delivery.session(request)
    assert caught.value.code == "LEDGER_CONFLICT"
    taken = shared.delivery.session({**request, "task_id": "T-2", "idempotency_key": "acq-2"})
    assert taken["session"]["task_id"] == "T-2"
    assert "LEDGER_CONFLICT" in codes(taken)


# --- doctor -------------------------------------------------------------------------------


def test_doctor_reports_a_missing_driver_and_republishes_a_missing_ledger(
    shared: IthacaProject,
) -> None:
    root = Path(shared.project.root)
    git(root, "config", "--unset", "merge.ithaca-ledger.driver")
    path = Path(shared.project.state_root) / LEDGER_PATH
    published = path.read_bytes()
    path.unlink()

    report = shared.delivery.doctor({"operation": "inspect"})
    found = {(item["code"], item["subject"]) for item in report["findings"]}
    assert {("MERGE_DRIVER_MISSING", LEDGER_PATH), ("LEDGER_MISSING", LEDGER_PATH)} <= found

    repaired = shared.delivery.doctor({"operation": "repair"})
    assert f"delivery: republished {LEDGER_PATH}" in repaired["repaired"]
    assert parse(path.read_bytes()).state_digest == parse(published).state_digest
    left = {item["code"] for item in repaired["findings"]}
    assert "LEDGER_MISSING" not in left and "MERGE_DRIVER_MISSING" in left
