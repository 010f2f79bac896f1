"""``ithaca doctor`` reads the whole journal on every routine run: after a run that found it
whole (and sealed its pages), an edit, a deletion or a reordering of an old row is
reported by the next routine run, and by every run after it; never OK. The doctor and
the hooks run as the user runs them, as processes of their own."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.command_line import claude_hook, ithaca

from ithaca.kernel import Store, journal

SESSION = "33333333-3333-4333-8333-333333333333"
OLD_ROW = 10
# Each an edit made behind Ithaca's back, as `sqlite3 state.db` would make it.
EDITS = {
    "edited": [f'UPDATE journal SET payload = \'{{"effect":"deny"}}\' WHERE seq = {OLD_ROW}'],
    "deleted": [f"DELETE FROM journal WHERE seq = {OLD_ROW}"],
    "reordered": [
        f"UPDATE journal SET seq = -1 WHERE seq = {OLD_ROW}",
        f"UPDATE journal SET seq = {OLD_ROW} WHERE seq = {OLD_ROW + 1}",
        f"UPDATE journal SET seq = {OLD_ROW + 1} WHERE seq = -1",
    ],
}


def doctor(root: Path) -> dict[str, Any]:
    done = ithaca(root, "doctor", "--json")
    report: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if report["ok"] else 1)
    return report


def hook(root: Path, command: str) -> None:
    """One PreToolUse and one PostToolUse of Claude Code, through the installed hook."""
    for event in ("PreToolUse", "PostToolUse"):
        claude_hook(root, event, "Bash", {"command": command}, SESSION)


def broken_rows(report: dict[str, Any]) -> set[int]:
    return {f["seq"] for f in report["findings"] if f["code"] == "JOURNAL_CHAIN_BROKEN"}


@pytest.fixture
def busy_project(project_dir: Path) -> Path:
    """A project whose journal holds a few hundred events (some from the hooks), and a
    first routine doctor run that found it whole and sealed its full pages."""
    store = Store(project_dir / ".ithaca/.runtime/state.db")
    try:
        with store.write() as conn:
            for n in range(300):
                journal.append(
                    conn, actor="system", kind="test.event", subject=str(n), payload={"n": n}
                )
    finally:
        store.close()
    hook(project_dir, "git status")
    first = doctor(project_dir)
    assert first["ok"], first["findings"]
    return project_dir


def test_a_run_after_a_verified_one_reads_old_rows_by_their_sealed_pages(busy_project):
    again = doctor(busy_project)
    assert again["ok"] and again["journalRows"]["byPages"] > OLD_ROW + 1
    assert sum(again["journalRows"].values()) == again["journalEvents"]
    hook(busy_project, "ls")  # the hooks keep appending after the seal
    assert doctor(busy_project)["ok"]


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_old_row_changed_after_a_verified_run_is_reported_by_every_routine_run(
    busy_project, edit
):
    assert doctor(busy_project)["journalRows"]["byPages"] > OLD_ROW + 1
    conn = sqlite3.connect(busy_project / ".ithaca/.runtime/state.db", isolation_level=None)
    for statement in EDITS[edit]:
        conn.execute(statement)
    conn.close()
    for _ in range(2):
        report = doctor(busy_project)
        assert not report["ok"] and report["status"] == "corrupt"
        assert broken_rows(report) & {OLD_ROW, OLD_ROW + 1}, report["findings"]
    shown = ithaca(busy_project, "doctor")
    assert shown.returncode == 1 and "Problems found" in shown.stdout
    assert "JOURNAL_CHAIN_BROKEN" in shown.stdout and "OK" not in shown.stdout.split()
    hook(busy_project, "ls")
    assert broken_rows(doctor(busy_project)) & {OLD_ROW, OLD_ROW + 1}
    full = json.loads(ithaca(busy_project, "doctor", "--full", "--json").stdout)
    assert broken_rows(full) & {OLD_ROW, OLD_ROW + 1}
