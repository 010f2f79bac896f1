"""Many processes, and processes that die mid-operation (reference §10, *Concurrency* and
*Crash*). Children are forked and open their own store, as separate hook processes would."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from typing import Any

import pytest

from ithaca.kernel import config as config_loader
from ithaca.kernel import journal
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.ultragoal import completion, marker, records
from ithaca.ultragoal.service import UltragoalService

FORK = multiprocessing.get_context("fork")
WAIT_S = 60


def open_service(project: Project) -> UltragoalService:
    store = Store(project.db_path, migrate=False)
    return UltragoalService(project, store, config_loader.load(project.state_root))


def claim_in_child(project: Project, session: str, barrier: Any, results: Any) -> None:
    service = open_service(project)
    barrier.wait(WAIT_S)
    results.put(service.claim_review_dispatch(session))


def renew_in_child(project: Project, session: str, barrier: Any, results: Any) -> None:
    service = open_service(project)
    barrier.wait(WAIT_S)
    service.perform(
        {"operation": "approve_review_dispatch_renewal", "session": session}, actor="user"
    )
    results.put({"renewed": True})


def race(ug: Any, workers: list[Callable[..., None]]) -> list[dict[str, Any]]:
    barrier = FORK.Barrier(len(workers))
    results = FORK.Queue()
    project = ug.service.project
    children = [
        FORK.Process(target=worker, args=(project, ug.SESSION, barrier, results))
        for worker in workers
    ]
    for child in children:
        child.start()
    answers = [results.get(timeout=WAIT_S) for _ in children]
    for child in children:
        child.join(WAIT_S)
        assert child.exitcode == 0
    return answers


@pytest.mark.slow
def test_twenty_processes_claim_against_a_cap_of_five(ug: Any) -> None:
    ug.pursue()
    ug.approve_stories()

    answers = race(ug, [claim_in_child] * 20)

    allowed = [answer for answer in answers if answer["allowed"]]
    assert len(allowed) == 5
    assert len({answer["nonce"] for answer in allowed}) == 5
    assert sorted(answer["dispatch_no"] for answer in allowed) == [1, 2, 3, 4, 5]
    assert {a["reason"] for a in answers if not a["allowed"]} == {"budget_exhausted"}
    assert ug.row()["review_dispatch_used"] == 5
    events = journal.query(ug.service.store.connection(), kind="ultragoal.review_dispatch_claimed")
    assert len(events) == 5


@pytest.mark.slow
def test_a_renewal_racing_claims_never_exceeds_the_new_cap(ug: Any) -> None:
    ug.pursue()
    ug.approve_stories()

    answers = race(ug, [renew_in_child] + [claim_in_child] * 12)

    allowed = [a for a in answers if a.get("allowed")]
    row = ug.row()
    assert row["review_dispatch_cap"] == 10
    assert row["review_dispatch_used"] == len(allowed) <= 10
    assert len(allowed) >= 5


def complete_in_child(project: Project, session: str, crash_at: str) -> None:
    """Run request-complete and die (``os._exit``) at ``crash_at``."""
    service = open_service(project)

    def die(*args: Any, **kwargs: Any) -> Any:
        os._exit(17)

    if crash_at == "before_commit":
        completion.evaluate = die  # after hashing, in the transaction
    else:
        marker.sync = die  # after the commit, before the marker
    service.perform({"operation": "request_complete", "session": session}, actor="agent")
    os._exit(0)


def crash(ug: Any, crash_at: str) -> int | None:
    child = FORK.Process(target=complete_in_child, args=(ug.service.project, ug.SESSION, crash_at))
    child.start()
    child.join(WAIT_S)
    return child.exitcode


def ready(ug: Any) -> None:
    ug.pursue()
    ug.approve_stories()
    ug.submit(ug.artifact())
    ug.call("set_verdict", verdict="APPROVE")


def last_state_digest(ug: Any) -> str:
    conn = ug.service.store.connection()
    (event,) = journal.query(conn, kind="ultragoal.", subject=ug.SESSION, limit=1, newest=True)
    return str(event["payload"]["state_sha256"])


def test_a_crash_before_the_commit_never_yields_complete(ug: Any) -> None:
    ready(ug)
    before = ug.digest()

    assert crash(ug, "before_commit") == 17

    assert ug.row()["phase"] == "pursuing"
    assert ug.digest() == before
    assert last_state_digest(ug) == records.state_digest(ug.service.store.connection(), ug.SESSION)
    assert ug.call("request_complete")["phase"] == "complete"


def test_a_crash_between_commit_and_marker_leaves_complete_and_gc_fixes_the_marker(
    ug: Any,
) -> None:
    ready(ug)
    runtime = ug.service.project.runtime

    assert crash(ug, "after_commit") == 17

    assert ug.row()["phase"] == "complete"
    assert journal.query(ug.service.store.connection(), kind="ultragoal.completed")
    assert last_state_digest(ug) == records.state_digest(ug.service.store.connection(), ug.SESSION)
    assert marker.exists(runtime, ug.SESSION)
    ug.service.collect_garbage()
    assert not marker.exists(runtime, ug.SESSION)
