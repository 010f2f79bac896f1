"""A ledger generation nobody committed is never imported (docs/delivery.md, "The team
ledger: `sync`" and "Recoverable units").

``sync publish`` writes the file before its transaction commits. Until then the file holds
a generation this checkout's own unit may still take back (it fails, or its writer dies
and the next service rolls it back). Imported in that window and then put back, the file
used to look like a branch switched back, and the import after it undid what the publish
published. Here: a publish that fails after writing, one whose writer died, an import
whose snapshot predates a publish's intent, and a rewound file against completed tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.delivery.sync.test_sync import (
    call,
    define,
    events,
    ledger_file,
    retitle,
    title_of,
)

from ithaca.app import IthacaProject
from ithaca.delivery.ledger import base as ledger_base
from ithaca.delivery.ledger.format import LEDGER_PATH, parse
from ithaca.delivery.sync import inspect as sync_inspect
from ithaca.delivery.units import owners
from ithaca.delivery.units.plans import Outcome, Plan, Read, Stale
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import canon, clock

# Runs ``sync publish`` and dies (exit 9) right after the unit wrote the ledger file,
# before its transaction commits.
DIE_AFTER_WRITE = textwrap.dedent(
    """
    import os, sys
    from ithaca.app import open_project
    from ithaca.delivery.sync import tool as sync
    from ithaca.delivery.units.recoverable import Units

    real = Units._write_files

    def write_then_die(self, intent, writes):
        real(self, intent, writes)
        os._exit(9)

    Units._write_files = write_then_die
    project = open_project(sys.argv[1])
    sync.sync(project.project, project.store, project.config,
              {"action": "publish", "idempotency_key": "killed"}, units=project.delivery.units)
    """
)


@pytest.fixture
def published(project: IthacaProject, record: Callable[..., Any]) -> IthacaProject:
    """Three tasks, published: the file and the base agree."""
    for task_id in ("T-1", "T-2", "T-3"):
        define(record, task_id)
    call(project, "publish")
    return project


def base_state(project: IthacaProject) -> str:
    with project.store.read() as conn:
        base = ledger_base.load(conn)
    assert base is not None
    return base.state_digest


def test_a_publish_that_fails_after_writing_the_ledger_undoes_nothing(
    published: IthacaProject, record: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
):
    committed = ledger_file(published).read_bytes()
    retitle(record, "T-1", "renamed here")
    seen: dict[str, Any] = {}
    real = Units._write_files

    def write_then_fail(self: Units, intent: dict[str, Any], writes: Any) -> None:
        real(self, intent, writes)
        if intent["op"] == "sync.publish" and "import" not in seen:
            # Another caller, while the new generation is on disk and not committed.
            seen["import"] = call(published, "import")
            seen["inspect"] = call(published, "inspect")
            raise OSError("the disk filled up before the commit")

    monkeypatch.setattr(Units, "_write_files", write_then_fail)
    with pytest.raises(OSError):
        call(published, "publish")
    monkeypatch.undo()

    assert seen["import"]["status"] == "publishing"
    assert [note["code"] for note in seen["import"]["diagnostics"]] == [
        "LEDGER_PUBLISH_IN_PROGRESS"
    ]
    assert seen["inspect"]["status"] == "publishing"
    assert ledger_file(published).read_bytes() == committed  # put back
    assert base_state(published) == parse(committed).state_digest  # nothing was imported
    answer = call(published, "import")
    assert answer["status"] == "current" and answer["journal_seq"] is None
    assert title_of(published, "T-1") == "renamed here"  # not rewound over
    call(published, "publish")
    assert parse(ledger_file(published).read_bytes()).index[("task", "T-1")].body["title"] == (
        "renamed here"
    )


def test_the_generation_of_a_publish_whose_writer_died_is_rolled_back_never_imported(
    published: IthacaProject, record: Callable[..., Any]
):
    units = published.delivery.units  # opened now: the child's unit is recovered below
    committed = ledger_file(published).read_bytes()
    retitle(record, "T-2", "renamed here")
    root = published.project.root
    done = subprocess.run(
        [sys.executable, "-c", DIE_AFTER_WRITE, str(root)], capture_output=True, timeout=60
    )
    assert done.returncode == 9, done.stderr.decode()
    written = ledger_file(published).read_bytes()
    assert written != committed  # the dead writer's generation, never committed

    inspected = call(published, "inspect")
    assert inspected["status"] == "uncommitted"
    with published.store.read() as conn:
        finding = sync_inspect.uncommitted_ledger(conn, published.project)
    assert finding is not None
    assert (finding["code"], finding["severity"]) == ("LEDGER_UNCOMMITTED", "needs_attention")

    answer = call(published, "import")
    assert answer.get("applied", 0) == 0
    assert ledger_file(published).read_bytes() == committed  # the unit was rolled back
    assert events(published, "delivery.intent_rolled_back") == 1
    assert base_state(published) == parse(committed).state_digest
    assert title_of(published, "T-2") == "renamed here"
    assert units.recover_dead() == []
    assert call(published, "inspect")["status"] == "ahead"
    with published.store.read() as conn:
        assert sync_inspect.uncommitted_ledger(conn, published.project) is None


def test_a_file_read_before_its_writers_intent_was_visible_is_checked_after_it_settles(
    published: IthacaProject,
):
    """The plan read bytes a live unit wrote (its intent not in the plan's snapshot);
    the unit then puts the old file back. The plan waits for the unit, finds the bytes
    gone, and is ``Stale``: its commit never runs."""
    state_root = Path(published.project.state_root)
    committed = ledger_file(published).read_bytes()
    uncommitted = committed.replace(b'"generation"', b'"generation" ', 1)
    ledger_file(published).write_bytes(uncommitted)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with published.store.write() as conn:
            conn.execute(
                "INSERT INTO delivery_fs_intents (id, op, status, owner_pid, owner_start, steps,"
                " created_at, updated_at) VALUES ('int_writer', 'sync.publish', 'pending', ?, ?,"
                " ?, ?, ?)",
                (
                    holder.pid,
                    owners.start_time(holder.pid),
                    json.dumps({"targets": [{"path": LEDGER_PATH, "expected": "x" * 64}]}),
                    clock.now(),
                    clock.now(),
                ),
            )

        def settle() -> None:  # the writer's rollback: the old file back, the intent gone
            (state_root / LEDGER_PATH).write_bytes(committed)
            with published.store.write() as conn:
                conn.execute("DELETE FROM delivery_fs_intents WHERE id = 'int_writer'")

        commits: list[int] = []
        plan = Plan(
            "sync.import",
            lambda conn: commits.append(1) or Outcome({}, None),  # type: ignore[func-returns-value]
            reads=(Read(LEDGER_PATH, canon.digest_bytes(uncommitted)),),
        )
        timer = threading.Timer(0.2, settle)
        timer.start()
        with pytest.raises(Stale):
            Units(published.project, published.store).run(plan, None)
        timer.join()
    finally:
        holder.kill()
        holder.wait()
    assert commits == []
    assert ledger_file(published).read_bytes() == committed


def test_a_plan_whose_reads_still_hold_commits_and_settles_its_intent(published: IthacaProject):
    found = ledger_file(published).read_bytes()
    plan = Plan(
        "sync.import",
        lambda conn: Outcome({"ok": True}, None),
        reads=(Read(LEDGER_PATH, canon.digest_bytes(found)),),
    )
    answer = Units(published.project, published.store).run(plan, None)
    assert answer["result"] == {"ok": True}
    rows = published.store.connection().execute(
        "SELECT status, steps FROM delivery_fs_intents WHERE op = 'sync.import'"
    )
    [(status, steps)] = rows.fetchall()
    assert status == "done" and json.loads(steps)["reads"] == [LEDGER_PATH]


def test_a_task_completed_here_stays_completed_when_the_ledger_is_rewound(
    project: IthacaProject, service: Any, define_task: Callable[..., str]
):
    define_task()
    call(project, "publish")
    before_completion = ledger_file(project).read_bytes()
    started = _record(service, "start", {"task_id": "T-1"})
    _record(
        service,
        "complete",
        {
            "task_id": "T-1",
            "session_id": started["session"]["id"],
            "packet_digest": started["packet"]["digest"],
            "output": {
                "task_id": "T-1",
                "status": "completed",
                "summary": "login form added",
                "changed_files": ["src/app.py"],
                "verification": {"argv": ["pytest", "-q"], "exit_code": 0},
            },
        },
    )
    assert parse(ledger_file(project).read_bytes()).index[("task", "T-1")].body["status"] == (
        "completed"
    )
    define(lambda *args: _define(service, *args), "T-2")  # unpublished work of its own

    ledger_file(project).write_bytes(before_completion)  # git checkout of an older commit
    answer = call(project, "import")
    assert answer["relation"] == "rewound"
    codes = [note["code"] for note in answer["diagnostics"]]
    assert codes == ["LEDGER_REWOUND", "LEDGER_COMPLETION_KEPT"]
    row = (
        project.store.connection()
        .execute("SELECT status, outcome FROM delivery_tasks WHERE id = 'T-1'")
        .fetchone()
    )
    assert row[0] == "completed" and json.loads(row[1])["summary"] == "login form added"
    assert call(project, "inspect")["status"] == "ahead"  # the completion is to publish again
    call(project, "publish")
    body = parse(ledger_file(project).read_bytes()).index[("task", "T-1")].body
    assert body["status"] == "completed" and body["outcome"]["summary"] == "login form added"


def _record(service: Any, action: str, data: dict[str, Any]) -> dict[str, Any]:
    entry = {
        "kind": "task_outcome",
        "action": action,
        "data": data,
        "idempotency_key": os.urandom(8).hex(),
    }
    result: dict[str, Any] = service.record({"entries": [entry]})["results"][0]["result"]
    return result


def _define(service: Any, kind: str, action: str, data: dict[str, Any]) -> None:
    entry = {"kind": kind, "action": action, "data": data, "idempotency_key": os.urandom(8).hex()}
    service.record({"entries": [entry]})
