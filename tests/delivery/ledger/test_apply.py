"""Ledger records written back as rows (reference §8.2 import): tasks go in many rows per
statement, and every row must come out as it would one by one, across batch edges, for
new rows, updated rows and removed ones."""

from __future__ import annotations

from typing import Any

from ithaca.app import IthacaProject
from ithaca.delivery.ledger import apply as ledger_apply
from ithaca.delivery.ledger import intake as ledger_intake
from ithaca.delivery.ledger.format import Key, Record, record
from ithaca.kernel import canon

COUNT = 250  # more than two full statements and a short last one


def task(n: int, title: str | None = None, status: str = "pending", **extra: Any) -> Record:
    task_id = f"T-{n}"
    body = {
        "id": task_id,
        "title": title or f"task {n}",
        "status": status,
        "verification": {"argv": ["pytest", "-q", f"tests/test_{n}.py"]},
        **extra,
    }
    return record("task", task_id, body, exact=True)


def apply_taken(project: IthacaProject, taken: dict[Key, Record | None]) -> None:
    prepared = ledger_intake.prepare(project.project.state_root, taken)
    with project.store.write() as tx:
        ledger_apply.apply_taken(tx, prepared)


def rows(project: IthacaProject) -> dict[str, tuple[Any, ...]]:
    found = project.store.connection().execute(
        "SELECT id, status, published_status, contract, contract_digest, outcome, revision,"
        " removed_reason FROM delivery_tasks"
    )
    return {row[0]: row[1:] for row in found}


def expected_row(found: Record, revision: int = 1) -> tuple[Any, ...]:
    body = found.body
    contract = {name: value for name, value in body.items() if name not in ("status", "outcome")}
    outcome = body.get("outcome")
    return (
        body["status"],
        body["status"],
        canon.canonical_text(contract),
        canon.digest(contract),
        None if outcome is None else canon.canonical_text(outcome),
        revision,
        None,
    )


def test_hundreds_of_new_tasks_become_exactly_their_rows(project: IthacaProject):
    taken: dict[Key, Record | None] = {("task", f"T-{n}"): task(n) for n in range(COUNT)}
    apply_taken(project, taken)
    found = rows(project)
    assert len(found) == COUNT
    for key, item in taken.items():
        assert item is not None
        assert found[key[1]] == expected_row(item)


def test_a_later_import_updates_rows_and_revises_only_changed_contracts(project: IthacaProject):
    apply_taken(project, {("task", f"T-{n}"): task(n) for n in range(COUNT)})
    retitled = {("task", f"T-{n}"): task(n, title=f"task {n}, revised") for n in range(0, COUNT, 7)}
    completed = {
        ("task", f"T-{n}"): task(n, status="completed", outcome={"summary": f"done {n}"})
        for n in range(3, COUNT, 7)
    }
    removed: dict[Key, Record | None] = {("task", "T-5"): None, ("task", "T-200"): None}
    apply_taken(project, {**retitled, **completed, **removed})

    found = rows(project)
    for key, item in retitled.items():
        assert found[key[1]] == expected_row(item, revision=2)
    for key, item in completed.items():
        assert found[key[1]] == expected_row(item)  # the contract is the same: no revision
    for key in removed:
        status, *_, reason = found[key[1]]
        assert (status, reason) == ("removed", ledger_apply.REMOVED_REASON)
    untouched = set(range(COUNT)) - {int(key[1][2:]) for key in (*retitled, *completed, *removed)}
    for n in untouched:
        assert found[f"T-{n}"] == expected_row(task(n))
