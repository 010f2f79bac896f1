"""Many processes admitting events and loading bundles at once: nothing lost, nothing busy.

Hooks, the MCP server and the CLI are separate processes writing one SQLite file. WAL,
``busy_timeout`` and ``BEGIN IMMEDIATE`` are meant to make writers queue instead of
failing; this bench checks that under load. Sixteen spawned processes each open the
project and, 200 times, admit an event for a session of their own and load its bundle.
Every error is counted by code (a ``CONFLICT`` or any ``sqlite3.OperationalError`` is a
busy store surfacing to the caller). Afterwards every admitted id must be stored, the
journal must hold one ``event_admitted`` and one ``bundle_loaded`` per operation,
``PRAGMA integrity_check`` must say ``ok`` and the journal's hash chain must verify.

The baseline is one process doing the same 200 operations alone; the ratio shows what
running sixteen at once costs or gains in throughput on this machine.

    .venv/bin/python bench/concurrency.py [--quick]
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import new_project, parser, percentile, run_together, scratch, verdict

START_TIMEOUT_S = 120
RUN_TIMEOUT_S = 300


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    workers, per_worker = (4, 50) if args.quick else (16, 200)
    with scratch() as root:
        new_project(root).close()
        project_dir = root / "project"
        baseline = _run_workers(project_dir, 1, per_worker, prefix="base")
        if baseline is None:
            return 0
        before = _counts(project_dir)
        loaded = _run_workers(project_dir, workers, per_worker, prefix="w")
        if loaded is None:
            return 0
        _report(project_dir, workers, per_worker, before, baseline, loaded)
    return 0


def _worker(project_dir: str, name: str, count: int, start: Any, results: Any) -> None:
    """One process: open the project, wait for the others, then admit and load ``count``
    times. Reports ids, errors, per-operation latencies and seconds through ``results``."""
    errors: Counter[str] = Counter()
    messages: dict[str, str] = {}
    latencies: dict[str, list[float]] = {"admit_event": [], "load_protocols": []}
    admitted: list[str] = []
    loads = 0
    seconds = 0.0
    try:
        import ithaca
        from ithaca.kernel.errors import IthacaError

        def timed(operation: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            except (IthacaError, sqlite3.Error) as exc:
                key = f"{operation} {_code(exc)}"
                errors[key] += 1
                messages.setdefault(key, str(exc))
                return None
            finally:
                latencies[operation].append((time.perf_counter() - started) * 1000)

        project = ithaca.open_project(project_dir)
        service = project.protocols
        start.wait(START_TIMEOUT_S)
        began = time.perf_counter()
        for i in range(count):
            event = timed(
                "admit_event", service.admit_event, connector="test", host_session_id=f"{name}-{i}"
            )
            if event is None:
                continue
            admitted.append(event["id"])
            if timed("load_protocols", service.load_protocols, {"eventId": event["id"]}):
                loads += 1
        seconds = time.perf_counter() - began
        project.close()
    except Exception as exc:  # the worker's outer edge: report whatever stopped it
        start.abort()  # nobody waits for a worker that will never arrive
        key = f"worker UNEXPECTED {type(exc).__name__}"
        errors[key] += 1
        messages.setdefault(key, str(exc))
    results.put(
        {
            "admitted": admitted,
            "loads": loads,
            "errors": dict(errors),
            "messages": messages,
            "latencies": latencies,
            "seconds": seconds,
        }
    )


def _code(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else f"sqlite3.{type(exc).__name__}"


def _surfaced_busy(key: str) -> bool:
    code = key.split(" ", 1)[1]
    return code == "CONFLICT" or code == "sqlite3.OperationalError"


def _run_workers(
    project_dir: Path, workers: int, per_worker: int, *, prefix: str
) -> dict[str, Any] | None:
    """Start the workers together; returns their merged results and the wall time."""
    ran = run_together(
        _worker,
        [(str(project_dir), f"{prefix}{n}", per_worker) for n in range(workers)],
        start_timeout_s=START_TIMEOUT_S,
        run_timeout_s=RUN_TIMEOUT_S,
    )
    if ran is None:
        return None
    reports, seconds = ran
    errors: Counter[str] = Counter()
    messages: dict[str, str] = {}
    for report in reports:
        errors.update(report["errors"])
        messages.update(report["messages"])
    return {
        "admitted": [event_id for report in reports for event_id in report["admitted"]],
        "loads": sum(report["loads"] for report in reports),
        "errors": errors,
        "messages": messages,
        "latencies": {
            operation: [ms for report in reports for ms in report["latencies"][operation]]
            for operation in ("admit_event", "load_protocols")
        },
        "seconds": seconds,
        "slowest": max(report["seconds"] for report in reports),
    }


def _counts(project_dir: Path) -> dict[str, int]:
    conn = _connect(project_dir)
    try:
        events = conn.execute("SELECT count(*) FROM protocol_events").fetchone()[0]
        kinds = dict(
            conn.execute(
                "SELECT kind, count(*) FROM journal WHERE kind IN"
                " ('protocols.event_admitted', 'protocols.bundle_loaded') GROUP BY kind"
            ).fetchall()
        )
    finally:
        conn.close()
    return {
        "events": events,
        "admitted": kinds.get("protocols.event_admitted", 0),
        "loaded": kinds.get("protocols.bundle_loaded", 0),
    }


def _connect(project_dir: Path) -> sqlite3.Connection:
    from ithaca.kernel.connection import connect

    return connect(project_dir / ".ithaca" / ".runtime" / "state.db")


def _report(
    project_dir: Path,
    workers: int,
    per_worker: int,
    before: dict[str, int],
    baseline: dict[str, Any],
    loaded: dict[str, Any],
) -> None:
    from ithaca.kernel import journal_check

    expected = workers * per_worker
    after = _counts(project_dir)
    conn = _connect(project_dir)
    try:
        stored = {row[0] for row in conn.execute("SELECT id FROM protocol_events")}
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        chain = journal_check.verify(conn)
    finally:
        conn.close()
    missing = [event_id for event_id in loaded["admitted"] if event_id not in stored]
    failures = sum(loaded["errors"].values())
    busy = sum(count for key, count in loaded["errors"].items() if _surfaced_busy(key))
    operations = len(loaded["admitted"]) + loaded["loads"]
    throughput = operations / loaded["seconds"]
    alone = (len(baseline["admitted"]) + baseline["loads"]) / baseline["seconds"]
    print(
        f"{workers} processes x {per_worker} admissions and loads:"
        f" {operations} operations in {loaded['seconds']:.2f} s"
        f" (slowest worker {loaded['slowest']:.2f} s)"
    )
    print(
        f"throughput {throughput:.0f} ops/s; one process alone {alone:.0f} ops/s;"
        f" ratio {throughput / alone:.2f}"
    )
    for operation, values in loaded["latencies"].items():
        alone_ms = percentile(baseline["latencies"][operation], 50)
        print(
            f"{operation}: p50 {percentile(values, 50):.1f} ms, p99 {percentile(values, 99):.1f}"
            f" ms, max {max(values):.0f} ms (alone: p50 {alone_ms:.1f} ms)"
        )
    print(
        f"errors: {dict(loaded['errors']) or 'none'}"
        f" (baseline run: {dict(baseline['errors']) or 'none'})"
    )
    for key, message in loaded["messages"].items():
        print(f"  {key}: {message}")
    added = {key: after[key] - before[key] for key in after}
    checks = {
        f"events stored +{added['events']} of {expected}": (
            added["events"] == expected and not missing
        ),
        f"journal event_admitted +{added['admitted']} of {expected}": added["admitted"] == expected,
        f"journal bundle_loaded +{added['loaded']} of {expected}": added["loaded"] == expected,
        f"no SQLITE_BUSY or CONFLICT surfaced ({busy})": busy == 0,
        f"no other errors ({failures - busy})": failures == busy,
        f"PRAGMA integrity_check: {integrity}": integrity == "ok",
        f"journal chain verifies ({len(chain)} problems)": not chain,
    }
    for label, passed in checks.items():
        print(f"  {verdict(passed)}  {label}")
    print(f"verdict: {verdict(all(checks.values()))}")


if __name__ == "__main__":
    sys.exit(main())
