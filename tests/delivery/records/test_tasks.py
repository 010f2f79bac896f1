"""``record task_contract …``: contracts and their digests, dependency and file warnings,
the parent rules, revisions that reset the circuit, and removal."""

from __future__ import annotations

from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict, InvalidInput, NotFound, Refused

VERIFY = {"argv": ["pytest", "-q", "tests/test_auth.py"]}


def task(record: Any, task_id: str, **data: Any) -> dict[str, Any]:
    defined: dict[str, Any] = record(
        "task_contract",
        "define",
        {"id": task_id, "title": f"task {task_id}", "verification": VERIFY, **data},
    )
    return defined


def codes(result: dict[str, Any]) -> list[str]:
    return [found["code"] for found in result["diagnostics"]]


def status_of(project: IthacaProject, task_id: str) -> str:
    row = project.store.connection().execute(
        "SELECT status FROM delivery_tasks WHERE id = ?", (task_id,)
    )
    return str(row.fetchone()[0])


def test_define_stores_the_contract_with_its_digest(
    opened_change: dict[str, Any], record: Any
) -> None:
    result = record(
        "task_contract",
        "define",
        {
            "id": "T-1",
            "title": "Add login form",
            "change_id": "add-login",
            "verification": {"argv": ["pytest", "-q", "tests/test_auth.py"]},
            "files_modified": ["src/views/login.py", "./src/auth.py"],
            "acceptance": [{"id": "A1", "criterion": "valid credentials reach /home"}],
        },
    )
    stored = result["result"]["task"]
    assert stored["status"] == "pending"
    assert stored["contract"]["files_modified"] == ["src/auth.py", "src/views/login.py"]
    assert stored["contract_digest"] == canon.digest(stored["contract"])
    assert codes(result) == []


def test_unknown_deps_and_undeclared_files_warn(record: Any) -> None:
    result = task(record, "T-2", deps=["T-1"])
    assert codes(result) == ["TASK_DEP_UNKNOWN", "TASK_FILES_UNDECLARED"]
    assert result["diagnostics"][0]["subject"] == "T-1"
    task(record, "T-1", files_modified=["a.py"])
    assert "TASK_DEP_UNKNOWN" not in codes(
        task(record, "T-3", deps=["T-1"], files_modified=["b.py"])
    )


def test_defining_a_taken_id_conflicts_unless_identical(record: Any) -> None:
    task(record, "T-1")
    assert task(record, "T-1")["result"]["unchanged"] is True
    with pytest.raises(Conflict) as caught:
        task(record, "T-1", description="other")
    assert caught.value.code == "TASK_EXISTS"


def test_a_child_expands_its_parent_and_inherits_its_change(
    opened_change: dict[str, Any], record: Any, project: IthacaProject
) -> None:
    task(record, "T-1", change_id="add-login")
    child = task(record, "T-1.1", parent_id="T-1")["result"]["task"]
    assert child["change_id"] == "add-login"
    assert status_of(project, "T-1") == "expanded"
    task(record, "T-1.2", parent_id="T-1")
    assert status_of(project, "T-1") == "expanded"


def test_a_child_under_another_changes_task_is_a_scope_mismatch(
    new_change: Any, record: Any
) -> None:
    new_change("add-login")
    new_change("fix-logout")
    task(record, "T-1", change_id="add-login")
    with pytest.raises(InvalidInput) as caught:
        task(record, "T-2", parent_id="T-1", change_id="fix-logout")
    assert caught.value.code == "SCOPE_MISMATCH"


def test_a_removed_parent_cannot_take_children(record: Any) -> None:
    task(record, "T-1")
    record("task_contract", "remove", {"id": "T-1", "reason": "dup"})
    with pytest.raises(Refused) as caught:
        task(record, "T-2", parent_id="T-1")
    assert caught.value.code == "TASK_TRANSITION_INVALID"
    with pytest.raises(NotFound):
        task(record, "T-3", parent_id="T-9")


def test_revise_gives_a_new_digest_and_resets_the_circuit(
    record: Any, project: IthacaProject, count_events: Any
) -> None:
    before = task(record, "T-1")["result"]["task"]
    with project.store.write() as conn:
        conn.execute(
            "INSERT INTO delivery_circuits (task_id, consecutive_failures, open, updated_at)"
            " VALUES ('T-1', 3, 1, 'now')"
        )
    revised = record(
        "task_contract",
        "revise",
        {"id": "T-1", "expected_revision": 1, "patch": {"files_modified": ["src/a.py"]}},
    )["result"]["task"]
    assert revised["revision"] == 2
    assert revised["contract_digest"] != before["contract_digest"]
    circuit = project.store.connection().execute(
        "SELECT consecutive_failures, open FROM delivery_circuits WHERE task_id = 'T-1'"
    )
    assert circuit.fetchone() == (0, 0)
    event = project.store.connection().execute(
        "SELECT payload FROM journal WHERE kind = 'delivery.task_revised'"
    )
    assert '"circuit_reset":true' in event.fetchone()[0]


def test_revise_refusals(record: Any, project: IthacaProject) -> None:
    task(record, "T-1")
    with pytest.raises(Conflict) as stale:
        record("task_contract", "revise", {"id": "T-1", "patch": {}, "expected_revision": 2})
    assert stale.value.code == "REVISION_CONFLICT"
    with pytest.raises(InvalidInput) as required:
        record("task_contract", "revise", {"id": "T-1", "patch": {"verification": None}})
    assert required.value.details["pointer"] == "/entries/0/data/patch/verification"
    with project.store.write() as conn:
        conn.execute("UPDATE delivery_tasks SET status = 'in_progress'")
    with pytest.raises(Conflict) as running:
        record("task_contract", "revise", {"id": "T-1", "patch": {"title": "x"}})
    assert running.value.code == "TASK_RUNNING"


def test_remove_follows_the_status_machine(record: Any, project: IthacaProject) -> None:
    task(record, "T-1")
    removed = record("task_contract", "remove", {"id": "T-1", "reason": "not needed"})
    assert removed["result"]["task"]["status"] == "removed"
    with pytest.raises(Refused) as again:
        record("task_contract", "remove", {"id": "T-1", "reason": "twice"})
    assert again.value.code == "TASK_TRANSITION_INVALID"
    assert (again.value.details["from"], again.value.details["to"]) == ("removed", "removed")
    task(record, "T-2")
    with project.store.write() as conn:
        conn.execute("UPDATE delivery_tasks SET status = 'completed' WHERE id = 'T-2'")
    with pytest.raises(Refused):
        record("task_contract", "remove", {"id": "T-2", "reason": "done already"})


def test_an_expanded_parent_completes_when_its_remaining_children_are_completed(
    record: Any, project: IthacaProject, count_events: Any
) -> None:
    task(record, "T-1")
    task(record, "T-1.1", parent_id="T-1")
    task(record, "T-1.2", parent_id="T-1")
    with project.store.write() as conn:
        conn.execute("UPDATE delivery_tasks SET status = 'completed' WHERE id = 'T-1.1'")
    record("task_contract", "remove", {"id": "T-1.2", "reason": "merged into T-1.1"})
    assert status_of(project, "T-1") == "completed"
    assert count_events("delivery.task_completed") == 1
