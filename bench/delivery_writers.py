"""Sixteen processes recording at once: every record committed, none lost, nothing busy.

Delivery's writers are separate processes (the MCP server, CLI calls, hooks' commits)
sharing one SQLite file; ``BEGIN IMMEDIATE``, the busy timeout and delivery's retry of a
busy ``BEGIN`` are meant to make them queue rather than fail. Sixteen spawned processes
each open the project and make 200 ``record`` calls (``event append``, one journal event
and one idempotency row each). Every error is counted by code; ``STORE_BUSY``,
``CONFLICT`` or a raw ``sqlite3.OperationalError`` is a busy store surfacing. Afterwards
the journal must hold each worker's 200 events at the sequence numbers the calls
returned, one idempotency row per call, ``PRAGMA integrity_check`` must say ``ok`` and
the journal's hash chain must verify (delivery §14).

    .venv/bin/python bench/delivery_writers.py [--quick]
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import new_project, parser, percentile, run_together, scratch, verdict

START_TIMEOUT_S = 120
RUN_TIMEOUT_S = 600
EVENT_TYPE = "bench_note"
BUSY_CODES = ("STORE_BUSY", "CONFLICT", "sqlite3.OperationalError")


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    workers, per_worker = (4, 50) if args.quick else (16, 200)
    with scratch() as root:
        new_project(root).close()
        project_dir = root / "project"
        ran = run_together(
            _worker,
            [(str(project_dir), f"w{n}", per_worker) for n in range(workers)],
            run_timeout_s=RUN_TIMEOUT_S,
        )
        if ran is None:
            return 1
        reports, seconds = ran
        return _report(project_dir, workers * per_worker, reports, seconds)


def _worker(project_dir: str, name: str, count: int, start: Any, results: Any) -> None:
    """One process: open the project, wait for the others, record ``count`` events."""
    errors: Counter[str] = Counter()
    messages: dict[str, str] = {}
    committed: list[int] = []
    latencies: list[float] = []
    try:
        import ithaca
        from ithaca.kernel.errors import IthacaError

        project = ithaca.open_project(project_dir)
        service = project.delivery
        start.wait(START_TIMEOUT_S)
        for i in range(count):
            entry = {
                "kind": "event",
                "action": "append",
                "data": {"type": EVENT_TYPE, "payload": {"worker": name, "n": i}},
                "idempotency_key": f"{name}-{i}",
            }
            began = time.perf_counter()
            try:
                answer = service.record({"entries": [entry]})
            except (IthacaError, sqlite3.Error) as exc:
                code = getattr(exc, "code", None)
                key = code if isinstance(code, str) else f"sqlite3.{type(exc).__name__}"
                errors[key] += 1
                messages.setdefault(key, str(exc))
                continue
            finally:
                latencies.append((time.perf_counter() - began) * 1000)
            committed.append(answer["results"][0]["journal_seq"])
        project.close()
    except Exception as exc:  # the worker's outer edge: report whatever stopped it
        start.abort()
        key = f"UNEXPECTED {type(exc).__name__}"
        errors[key] += 1
        messages.setdefault(key, str(exc))
    results.put(
        {
            "name": name,
            "committed": committed,
            "errors": dict(errors),
            "messages": messages,
            "latencies": latencies,
        }
    )


def _report(project_dir: Path, expected: int, reports: list[dict[str, Any]], seconds: float) -> int:
    from ithaca.kernel import journal_check
    from ithaca.kernel.connection import connect

    conn = connect(project_dir / ".ithaca" / ".runtime" / "state.db")
    try:
        stored = dict(
            conn.execute(
                "SELECT seq, json_extract(payload, '$.worker') FROM journal WHERE kind = ?",
                (f"observation.{EVENT_TYPE}",),
            ).fetchall()
        )
        keys = conn.execute("SELECT count(*) FROM delivery_idempotency").fetchone()[0]
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        chain = journal_check.verify(conn)
    finally:
        conn.close()
    errors: Counter[str] = Counter()
    for report in reports:
        errors.update(report["errors"])
    committed = sum(len(report["committed"]) for report in reports)
    lost = sum(
        stored.get(seq) != report["name"] for report in reports for seq in report["committed"]
    )
    busy = sum(count for code, count in errors.items() if code in BUSY_CODES)
    latencies = [ms for report in reports for ms in report["latencies"]]
    print(
        f"{len(reports)} processes x {expected // len(reports)} record calls:"
        f" {committed} committed in {seconds:.2f} s ({committed / seconds:.0f} records/s)"
    )
    print(
        f"record latency: p50 {percentile(latencies, 50):.1f} ms, p99"
        f" {percentile(latencies, 99):.1f} ms, max {max(latencies):.0f} ms"
    )
    print(f"errors: {dict(errors) or 'none'}")
    for report in reports:
        for code, message in report["messages"].items():
            print(f"  {code}: {message}")
    checks = {
        f"committed {committed} of {expected}": committed == expected,
        f"journal holds {len(stored)} events, {lost} returned seqs lost": (
            len(stored) == expected and lost == 0
        ),
        f"idempotency rows {keys} of {expected}": keys == expected,
        f"no SQLITE_BUSY surfaced ({busy})": busy == 0,
        f"PRAGMA integrity_check: {integrity}": integrity == "ok",
        f"journal chain verifies ({len(chain)} problems)": not chain,
    }
    for label, passed in checks.items():
        print(f"  {verdict(passed)}  {label}")
    print(f"verdict: {verdict(all(checks.values()))}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
