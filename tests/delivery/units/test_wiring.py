"""A unit hashes each file it writes once: the ledger it publishes can be megabytes."""

from __future__ import annotations

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.units.plans import Outcome, Plan, TrackedWrite
from ithaca.kernel import canon


def test_a_published_file_is_hashed_once(
    project: IthacaProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b'{"a ledger": "of many tasks"}\n'
    hashed: list[bytes] = []
    real = canon.digest_bytes

    def counting(value: bytes) -> str:
        if value == data:
            hashed.append(value)
        return real(value)

    monkeypatch.setattr(canon, "digest_bytes", counting)
    write = TrackedWrite("reports/once.json", data, "template", "project", None)
    plan = Plan("test.once", lambda conn: Outcome({}, None), (write,))
    project.delivery.units.run(plan, None)

    assert len(hashed) == 1
    row = project.store.connection().execute(
        "SELECT digest FROM delivery_files WHERE path = ?", ("reports/once.json",)
    )
    assert row.fetchone()[0] == real(data) == write.digest


def test_equal_writes_still_compare_equal() -> None:
    first = TrackedWrite("a.json", b"{}", "template", "project", None)
    assert first == TrackedWrite("a.json", b"{}", "template", "project", None)
    assert first != TrackedWrite("a.json", b"[]", "template", "project", None)
