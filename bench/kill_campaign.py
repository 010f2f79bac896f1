"""Kill campaign: a real writer killed with SIGKILL at random moments; nothing lost or half-written.

Each round starts a separate writer process that records delivery work through the
public API: open a change, accept a decision, define a task, start it, complete it with
an outcome, append an event, bind a research artifact, admit a protocols event and load
its bundle, several times over; each record call also publishes the team ledger. After
each call returns, the writer prints an acknowledgement. Rounds share a project, a fresh
one every 50 rounds (the ledger every record call rewrites grows with each task).

The campaign kills the writer with SIGKILL at a moment drawn uniformly over an unkilled
writer's measured life (spawn to exit, timed on each project); every other round is
*aimed*: from that moment it stops and resumes the writer until it is caught inside a
write. A kill is *mid-write* when the writer held SQLite's WAL write lock (``BEGIN
IMMEDIATE`` to the end of ``COMMIT``, read from ``/proc/locks``) or had an atomic write's
temp file open.

After each kill ``ithaca doctor --json`` runs first; when it has findings,
``doctor --repair`` runs. Then the store is read: *lost* counts acknowledged operations
that are absent; *half-written* counts kills after which a reader can see a partial
state that doctor did not flag or repair did not settle (a row without its journal
event or the reverse, a chain that does not verify, a completed task without its
outcome, a registered file missing or different, a file nobody registered, a tracked
JSON file that does not parse, an unsettled write, a temp file left); *false
completions* counts completed tasks that no writer asked to complete. The definitions
are in ``tests/reliability/kill_harness.py``, which ``tests/reliability/test_kills.py``
shares.

    .venv/bin/python bench/kill_campaign.py [--quick] [--rounds N] [--seed S] [--units U]
                                            [--per-project N]
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from _common import parser, scratch, verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))
import kill_harness  # noqa: E402


def main() -> int:
    found = parser(__doc__.splitlines()[0])
    found.add_argument("--rounds", type=int, default=400, help="kills to attempt (400)")
    found.add_argument("--seed", type=int, default=25, help="random seed (25)")
    found.add_argument("--units", type=int, default=3, help="units of work per writer (3)")
    found.add_argument(
        "--per-project", type=int, default=50, help="rounds on one project before a fresh one (50)"
    )
    args = found.parse_args()
    rounds = 20 if args.quick else args.rounds
    rng = random.Random(args.seed)
    totals = kill_harness.Totals()
    lives: list[float] = []
    began = time.perf_counter()
    with scratch() as root:
        attempted = 0
        while attempted < rounds:
            project_dir = kill_harness.make_project(root / f"project-{len(lives) + 1:02d}")
            # The first writer after init is slow (cold caches); time the second.
            kill_harness.calibrate(project_dir, 0, args.units, totals)
            duration = kill_harness.calibrate(project_dir, 1, args.units, totals)
            lives.append(duration)
            for number in range(2, args.per_project + 2):
                if attempted == rounds:
                    break
                attempted += 1
                aim = attempted % 2 == 0
                kill_harness.kill_round(
                    project_dir, number, args.units, duration, rng, totals, aim=aim
                )
            print(
                f"  {project_dir.name}: writer life {duration * 1000:.0f} ms;"
                f" {attempted} rounds so far, {totals.kills} kills, lost {totals.lost},"
                f" half-written {totals.half_written}",
                flush=True,
            )
    totals.seconds = time.perf_counter() - began
    print(
        f"writer: {args.units} units x 9 operations; unkilled life (spawn to exit)"
        f" {min(lives) * 1000:.0f}-{max(lives) * 1000:.0f} ms over {len(lives)} projects"
        f" of up to {args.per_project} rounds"
    )
    return report(totals, args.seed)


def report(totals: kill_harness.Totals, seed: int) -> int:
    random_kills = totals.kills_random
    rows = [
        ("writers started (2 per project run unkilled, to time)", f"{totals.rounds}"),
        ("writers that finished before their kill moment", f"{totals.finished_first}"),
        ("kills (SIGKILL while the writer ran)", f"{totals.kills}"),
        (
            "  random moment",
            f"{random_kills}, mid-write {totals.mid_write_random}"
            f" ({_share(totals.mid_write_random, random_kills)})",
        ),
        (
            "  aimed at a write",
            f"{totals.aimed}, mid-write {totals.mid_write - totals.mid_write_random}"
            f" ({_share(totals.mid_write - totals.mid_write_random, totals.aimed)})",
        ),
        ("mid-write share, all kills", _share(totals.mid_write, totals.kills)),
        ("  holding the WAL write lock", f"{totals.in_db_write}"),
        ("  with an atomic write's temp file open", f"{totals.in_file_write}"),
        ("kills inside an operation (begun, not acknowledged)", f"{totals.in_operation}"),
        ("kills while the writer was opening the project", f"{totals.in_startup}"),
        ("operations acknowledged", f"{totals.acked}"),
        ("lost (acknowledged, absent)", f"{totals.lost}"),
        ("half-written (rounds that left a new partial state)", f"{totals.half_written}"),
        ("false completions", f"{totals.false_completions}"),
        ("doctor findings right after the kill", f"{totals.doctor_findings}"),
        ("rounds that needed doctor --repair", f"{totals.repairs}"),
        ("  still unhealthy after it", f"{totals.unhealthy_rounds}"),
        ("interrupted file writes found (settled by recovery)", f"{totals.pending_intents}"),
    ]
    width = max(len(label) for label, _ in rows)
    print(f"\nkill campaign, seed {seed}, {totals.seconds:.0f} s")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    if totals.half_kinds:
        print(f"half-written by kind: {dict(totals.half_kinds)}")
    if totals.finding_codes:
        print(f"doctor findings by code: {dict(totals.finding_codes)}")
    for problem in totals.problems:
        print(f"  problem: {problem}")
    checks = {
        "nothing acknowledged was lost": totals.lost == 0,
        "nothing half-written was visible": totals.half_written == 0,
        "no false completion": totals.false_completions == 0,
        "healthy after every round": totals.unhealthy_rounds == 0,
        "some kills landed mid-write": totals.mid_write > 0,
    }
    for label, passed in checks.items():
        print(f"  {verdict(passed)}  {label}")
    print(f"verdict: {verdict(all(checks.values()))}")
    return 0


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "-"


if __name__ == "__main__":
    sys.exit(main())
