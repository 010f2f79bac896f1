"""A real writer killed with SIGKILL at random moments loses nothing it acknowledged and
leaves nothing half-written (issue 25, item 7).

The machinery and the definitions are in ``kill_harness.py`` (``bench/kill_campaign.py``
runs the same at full scale). Here: two unkilled writers, then 15 kills on one project:
a third at random moments, a third aimed at a database write (the writer holds SQLite's
write lock) and a third aimed at a file write (an atomic write's temp file is open), so
that both kinds of interrupted write are certain to be among them.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tests.reliability import kill_harness

KILLS = 15
UNITS = 2


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ITHACA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ITHACA_DIR", raising=False)
    (tmp_path / "home").mkdir()
    return kill_harness.make_project(tmp_path / "repo")


@pytest.mark.slow
def test_kills_lose_nothing_acknowledged_and_leave_nothing_half_written(project_dir: Path):
    totals = kill_harness.Totals()
    kill_harness.calibrate(project_dir, 0, UNITS, totals)  # the first writer is the slow one
    duration = kill_harness.calibrate(project_dir, 1, UNITS, totals)
    rng = random.Random(7)
    for n in range(2, KILLS + 2):
        target = ("any", "db", "file")[n % 3]
        aim = target != "any"
        kill_harness.kill_round(
            project_dir, n, UNITS, duration, rng, totals, aim=aim, target=target
        )
    assert totals.problems == []
    assert totals.kills >= KILLS // 2, "the writer kept finishing before the kill"
    assert totals.acked > 0
    assert totals.lost == 0
    assert totals.half_written == 0
    assert totals.false_completions == 0
    assert totals.unhealthy_rounds == 0
    # the aimed kills make sure the writes themselves were interrupted
    assert totals.in_db_write >= 2
    assert totals.in_file_write >= 2
