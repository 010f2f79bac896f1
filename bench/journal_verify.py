"""What ``ithaca doctor`` pays for the journal chain: all of it, or only what is new.

The journal is hash-chained, and the doctor used to recompute the whole chain on every
check. With the anchor (``kernel.anchor``) it keeps the last point it verified and a
routine check recomputes only the rows appended since; ``--full`` still recomputes all.
A project's journal is filled with ``EVENTS`` events in batches of 10,000 (one transaction
each, as ordinary writes would make them), then ``ithaca doctor``'s check is timed as a
whole (integrity check and every part included): with ``--full``, then as a routine check
after 100 more events. Targets are not set by a
reference; the ratio shows what a routine check saves.

    .venv/bin/python bench/journal_verify.py [--quick]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import new_project, parser, scratch  # noqa: E402
from ithaca.kernel import doctor, journal  # noqa: E402

EVENTS = 1_000_000
BATCH = 10_000
NEW = 100


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    total = EVENTS // 10 if args.quick else EVENTS
    with scratch() as root:
        project = new_project(root)
        append(project, total)
        report, full_s = timed(lambda: doctor.check(project.project, project.store, full=True))
        assert report["ok"], report["findings"]
        append(project, NEW)
        routine, routine_s = timed(lambda: doctor.check(project.project, project.store))
        assert routine["ok"], routine["findings"]
        project.close()
    print(f"journal of {total:,} events (+{NEW} for the routine check)")
    print(f"  ithaca doctor --full  {full_s:8.2f} s")
    print(f"  ithaca doctor         {routine_s:8.2f} s   ({full_s / routine_s:,.1f}x less)")
    return 0


def append(project, count: int) -> None:
    done = 0
    while done < count:
        with project.store.write() as connection:
            for _ in range(min(BATCH, count - done)):
                journal.append(
                    connection,
                    actor="system",
                    kind="bench.event",
                    subject=None,
                    payload={"n": done},
                )
                done += 1


def timed(action):
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
