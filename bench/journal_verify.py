"""What ``ithaca doctor`` pays to check a journal of a million events, every row every time.

A project's journal is filled with ``EVENTS`` events shaped like the hooks' decisions, in
batches of 10,000 (one transaction each, as ordinary writes would make them). Then the
doctor's whole check (SQLite's integrity check, the journal, every part) is timed in
process: ``--full`` first (every row's hash re-derived; it seals the full pages), then a
routine check after 100 more events, three times. The journal's part is also timed
alone, and ``ithaca doctor`` as the process a user starts. Finally an old row (seq
1,000) is edited behind Ithaca's back, as ``sqlite3 state.db`` would edit it, and two
routine checks must each report it. Target: a routine check, and the detection of the
edit, under 1 s at a million events.

    .venv/bin/python bench/journal_verify.py [--quick]
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import BIN, new_project, parser, scratch, verdict  # noqa: E402
from ithaca.kernel import doctor, journal, journal_check  # noqa: E402

EVENTS = 1_000_000
BATCH = 10_000
NEW = 100
EDITED = 1_000
TARGET_S = 1.0
ROUNDS = 3


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    total = EVENTS // 10 if args.quick else EVENTS
    with scratch() as root:
        project = new_project(root)
        began = time.perf_counter()
        append(project, total)
        filled_s = time.perf_counter() - began
        size_mb = os.path.getsize(project.project.db_path) / 1e6
        full, full_s = timed(lambda: doctor.check(project.project, project.store, full=True))
        assert full["ok"], full["findings"]
        append(project, NEW)
        routine_s = []
        for _ in range(ROUNDS):
            report, seconds = timed(lambda: doctor.check(project.project, project.store))
            assert report["ok"], report["findings"]
            routine_s.append(seconds)
        rows = report["journalRows"]
        part_s = [timed(lambda: journal_part(project))[1] for _ in range(ROUNDS)]
        process_s = [timed(lambda: cli_doctor(root))[1] for _ in range(ROUNDS)]
        edit(project.project.db_path)
        found = []
        for _ in range(2):
            report, seconds = timed(lambda: doctor.check(project.project, project.store))
            broken = [f["seq"] for f in report["findings"] if f["code"] == "JOURNAL_CHAIN_BROKEN"]
            found.append((not report["ok"] and EDITED in broken, seconds))
        project.close()
    routine = statistics.median(routine_s)
    detect = max(seconds for _, seconds in found)
    print(f"journal of {total:,} events (+{NEW}), state.db {size_mb:,.0f} MB,"
          f" filled in {filled_s:,.0f} s")  # fmt: skip
    print(f"  ithaca doctor --full (in process)        {full_s:8.2f} s")
    print(
        f"  ithaca doctor, routine (in process)      {routine:8.3f} s   median of {ROUNDS}"
        f" ({', '.join(f'{s:.3f}' for s in routine_s)}); {full_s / routine:,.1f}x less"
    )
    print(f"    rows read by sealed pages / re-derived {rows['byPages']:,} / {rows['derived']:,}")
    print(f"    the journal part alone                 {statistics.median(part_s):8.3f} s")
    print(f"  `ithaca doctor` as a process             {statistics.median(process_s):8.3f} s")
    print(
        f"  row {EDITED:,} edited: reported by two routine checks"
        f" {'yes' if all(ok for ok, _ in found) else 'NO'},"
        f" in {', '.join(f'{s:.3f}' for _, s in found)} s"
    )
    passed = routine <= TARGET_S and detect <= TARGET_S and all(ok for ok, _ in found)
    print(f"  target: routine and detection <= {TARGET_S:.0f} s: {verdict(passed)}")
    return 0


def append(project, count: int) -> None:
    done = 0
    digest = "ab" * 32
    while done < count:
        with project.store.write() as connection:
            for _ in range(min(BATCH, count - done)):
                journal.append(
                    connection,
                    actor="hook",
                    kind="protocols.decision",
                    subject=f"evt_{done:026d}",
                    payload={
                        "n": done,
                        "tool": "Bash",
                        "effect": "allow",
                        "actionDigest": digest,
                    },  # fmt: skip
                )
                done += 1


def journal_part(project) -> None:
    """The journal's check and seal alone, as the doctor runs them."""
    conn = project.store.connection()
    checked = journal_check.check(conn, project.project.db_path)
    try:
        assert checked.ok, checked.problems
        journal_check.seal(conn, checked)
    finally:
        checked.close()


def cli_doctor(root: Path) -> None:
    done = subprocess.run(
        [str(BIN / "ithaca"), "doctor", "--json"],
        cwd=root / "project",
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(done.stdout)["ok"], done.stdout + done.stderr


def edit(db_path: str) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute(
            "UPDATE journal SET payload = replace(payload, 'allow', 'deny') WHERE seq = ?",
            (EDITED,),
        )
    finally:
        conn.close()


def timed(action):
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
