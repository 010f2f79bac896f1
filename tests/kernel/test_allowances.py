"""Write allowances count only for the calls their holder acts for, as the owning part
says; an owner whose part said nothing counts for no call."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ithaca.kernel import allowances
from ithaca.kernel.gates import GateContext
from ithaca.kernel.project import find_project


@pytest.fixture
def conn() -> sqlite3.Connection:
    found = sqlite3.connect(":memory:")
    found.execute("CREATE TABLE write_allowances (path TEXT, owner TEXT, created_at TEXT)")
    found.executemany(
        "INSERT INTO write_allowances VALUES (?, ?, 'x')",
        [
            ("/abs/mine", "testpart:alice"),
            ("rel/theirs", "testpart:bob"),
            ("/abs/unowned", "nopart:carol"),
            ("/abs/odd", "no-colon"),
        ],
    )
    return found


def context(project_dir: Path, conn: sqlite3.Connection, acting: str) -> GateContext:
    return GateContext(
        host="claude",
        event="PreToolUse",
        payload={"acting": acting},
        project=find_project(project_dir),
        config={},
        conn=conn,
        session_id="s1",
    )


def test_only_the_acting_holders_allowances_count(project_dir, conn, monkeypatch):
    asked = []

    def acting(ctx: GateContext) -> list[str]:
        asked.append(ctx.payload["acting"])
        return [ctx.payload["acting"]]

    monkeypatch.setitem(allowances._ACTING, "testpart", acting)
    for_alice = context(project_dir, conn, "alice")
    assert allowances.counted(for_alice) == ["/abs/mine"]
    assert allowances.counted(for_alice) == ["/abs/mine"]
    assert asked == ["alice"]  # asked once a call
    assert allowances.counted(context(project_dir, conn, "bob")) == [
        str(Path(find_project(project_dir).root, "rel", "theirs"))
    ]
    assert allowances.counted(context(project_dir, conn, "carol")) == []


def test_without_a_registered_part_nothing_counts(project_dir, conn):
    assert "testpart" not in allowances._ACTING
    assert allowances.counted(context(project_dir, conn, "alice")) == []
