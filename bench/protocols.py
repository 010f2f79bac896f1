"""Bundle computation over 1,000 stored protocols, and a warm ``load_protocols`` over MCP.

The PreToolUse hook and the MCP server ask for a bundle on every call, so the protocols
reference (§12) sets p50 <= 20 us and p99 <= 100 us for computing one in process. The
bench stores 1,000 protocols (the base set plus generated user records with wildcards,
single values and any-of lists on all seven selector keys), then times ``bundle.compute``
on pre-fetched events: 1,000 warm-up calls, then 10,000 varied events. It uses one
connection, so the compiled index is cached by revision as in a long-lived process; the
figure includes the revision check. ``BundleIndex.match`` alone is timed too, to show
where the time goes, and ``matcher.naive_match`` over the same records is the baseline.

The MCP figure is one ``ithaca --project DIR mcp`` server over stdio: one call to warm
it, then timed ``load_protocols`` calls, compared with the same call made in process.

    .venv/bin/python bench/protocols.py [--quick] [--no-mcp]
"""

from __future__ import annotations

import asyncio
import copy
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import BIN, POOLS, new_project, parser, percentile, protocol_records, scratch, verdict
from ithaca.protocols import bundle, matcher, records

STORED = 1_000
EVENT_SHAPES = 500
TARGET_P50_US = 20.0
TARGET_P99_US = 100.0
MCP_TIMEOUT_S = 60


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--no-mcp", action="store_true", help="skip the MCP round trip")
    args = options.parse_args()
    with scratch() as root:
        project = new_project(root)
        service = project.protocols
        base = len(service.list_protocols())
        for record in protocol_records(STORED - base):
            service.create_protocol(record, actor="user")
        _bundle_figures(service, base, quick=args.quick)
        if not args.no_mcp:
            event = service.admit_event(connector="test", workflow="coding")
            _mcp_figures(root / "project", service, event["id"], 20 if args.quick else 50)
        project.close()
    return 0


def _bundle_figures(service: Any, base: int, *, quick: bool) -> None:
    event_count, warmup, naive_count, fresh_count = (
        (2_000, 200, 200, 500) if quick else (10_000, 1_000, 1_000, 2_000)
    )
    conn = service.store.connection()
    template = service.admit_event(connector="test")
    events = _event_population(template, EVENT_SHAPES, event_count)
    fresh = _event_population(template, fresh_count, fresh_count, seed=13)

    def compute(event: dict[str, Any]) -> dict[str, Any]:
        return bundle.compute(conn, event, service.workflows, service.bundles)

    started = time.perf_counter_ns()
    compute(events[0])
    compile_ms = (time.perf_counter_ns() - started) / 1e6
    for event in events[:warmup]:
        compute(event)
    compute_us = _time_each(compute, events)
    fresh_us = _time_each(compute, fresh)
    check_us = _time_each(lambda _: service.bundles.compiled(conn, service.workflows), events)

    seeds = records.seed_records(conn)
    shaped = [records.bundle_shape(record, seeds) for record in records.read_all(conn)]
    index = matcher.BundleIndex(shaped)  # an empty memo, warmed like compute's
    values = [matcher.selector_values(event) for event in events]
    for selected in values[:warmup]:
        index.match(selected)
    match_us = _time_each(index.match, values)
    naive_us = _time_each(
        lambda selected: matcher.naive_match(shaped, selected), values[:naive_count]
    )
    differing = sum(
        matcher.naive_match(shaped, selected)[1] != index.match(selected)[1]
        for selected in values[:naive_count]
    )
    timer_us = percentile(_time_each(lambda _: None, events[:1000]), 50)

    found = [index.match(selected) for selected in values]
    sizes = [len(protocols) for protocols, _ in found]
    print(
        f"setup: {STORED} stored protocols ({base} base, {len(index)} enabled);"
        f" {event_count} events over {EVENT_SHAPES} selector combinations,"
        f" {len({digest for _, digest in found})} distinct bundles of"
        f" {statistics.mean(sizes):.1f} protocols on average (max {max(sizes)})"
    )
    print(
        f"first compute after the last write (verify rows, compile index):"
        f" {compile_ms:.1f} ms; timer overhead {timer_us:.2f} us per call (included)"
    )
    _report_compute(
        {
            "bundle.compute, warm (target)": compute_us,
            "bundle.compute, each event new": fresh_us,
            "cache check only (data_version)": check_us,
            "BundleIndex.match only, warm": match_us,
            "naive_match (baseline)": naive_us,
        },
        differing,
    )


def _event_population(
    template: dict[str, Any], shapes: int, count: int, *, seed: int = 11
) -> list[dict[str, Any]]:
    """``count`` copies of an admitted event, each with one of ``shapes`` selector-value
    combinations drawn from the record pools (some values unknown to every record, some
    context values missing). ``shapes == count`` makes every event's bundle new."""
    rng = random.Random(seed)

    def pick(key: str, missing: float) -> str | None:
        roll = rng.random()
        if roll < missing:
            return None
        if roll < missing + 0.1:
            return f"other-{rng.randint(0, 99)}"
        return rng.choice(POOLS[key])

    combinations = [
        (
            rng.choice(POOLS["connector"]),
            rng.choice(POOLS["messageKind"]),
            pick("userId", 0.0),
            {
                "clientId": pick("clientId", 0.2),
                "projectId": pick("projectId", 0.2),
                "workflow": rng.choice(POOLS["workflow"]),
                "task": pick("task", 0.4),
            },
        )
        for _ in range(shapes)
    ]
    made = []
    for n in range(count):
        connector, kind, user, context = (
            combinations[n] if shapes == count else rng.choice(combinations)
        )
        event = copy.deepcopy(template)
        event.update(connector=connector, kind=kind, context=dict(context))
        event["actor"]["id"] = user
        made.append(event)
    return made


def _time_each(call: Callable[[Any], Any], inputs: list[Any]) -> list[float]:
    """Microseconds per call, one timing per input."""
    clock = time.perf_counter_ns
    timings = []
    for item in inputs:
        started = clock()
        call(item)
        timings.append((clock() - started) / 1000)
    return timings


def _report_compute(figures: dict[str, list[float]], differing: int) -> None:
    print(f"\n{'':38}{'p50 us':>9}{'p99 us':>9}{'mean us':>9}{'calls':>7}")
    for name, values in figures.items():
        print(
            f"{name:38}{percentile(values, 50):9.1f}{percentile(values, 99):9.1f}"
            f"{statistics.mean(values):9.1f}{len(values):7}"
        )
    compute_us = figures["bundle.compute, warm (target)"]
    match_us = figures["BundleIndex.match only, warm"]
    naive_us = figures["naive_match (baseline)"]
    naive_p50 = percentile(naive_us, 50)
    print(
        f"speedup over naive at p50: compute {naive_p50 / percentile(compute_us, 50):.0f}x,"
        f" match alone {naive_p50 / percentile(match_us, 50):.0f}x"
    )
    print(f"index digest equals naive digest on {len(naive_us) - differing}/{len(naive_us)} events")
    p50, p99 = percentile(compute_us, 50), percentile(compute_us, 99)
    print(
        f"target compute p50 <= {TARGET_P50_US:.0f} us: {verdict(p50 <= TARGET_P50_US)};"
        f" p99 <= {TARGET_P99_US:.0f} us: {verdict(p99 <= TARGET_P99_US)}"
    )


def _mcp_figures(project_dir: Path, service: Any, event_id: str, calls: int) -> None:
    service.load_protocols({"eventId": event_id})
    in_process = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        service.load_protocols({"eventId": event_id})
        in_process.append((time.perf_counter_ns() - started) / 1e6)
    try:
        over_mcp = asyncio.run(
            asyncio.wait_for(_mcp_round_trips(project_dir, event_id, calls), MCP_TIMEOUT_S)
        )
    except Exception as exc:  # the bench's outer edge: report, do not crash
        print(f"\nMCP round trip: not run ({type(exc).__name__}: {exc})")
        return
    print(f"\nwarm load_protocols, {calls} calls{'':6}{'p50 ms':>9}{'p99 ms':>9}")
    for name, values in (("over MCP stdio", over_mcp), ("in process (baseline)", in_process)):
        print(f"{name:34}{percentile(values, 50):9.2f}{percentile(values, 99):9.2f}")
    ratio = percentile(over_mcp, 50) / percentile(in_process, 50)
    print(f"MCP / in process at p50: {ratio:.1f}x (no target; the figure is for reference)")


async def _mcp_round_trips(project_dir: Path, event_id: str, calls: int) -> list[float]:
    from mcp import Client, StdioServerParameters

    env = dict(os.environ)
    # The server's start is not timed: let it use the installed bytecode, write none.
    env.pop("PYTHONPYCACHEPREFIX", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    server = StdioServerParameters(
        command=str(BIN / "ithaca"),
        args=["--project", str(project_dir), "mcp"],
        env=env,
        cwd=str(project_dir),
    )
    arguments = {"eventId": event_id}
    async with Client(server) as client:
        first = await client.call_tool("load_protocols", arguments)
        if first.is_error:
            raise RuntimeError(f"load_protocols failed: {first.content}")
        timings = []
        for _ in range(calls):
            started = time.perf_counter_ns()
            result = await client.call_tool("load_protocols", arguments)
            timings.append((time.perf_counter_ns() - started) / 1e6)
            if result.is_error:
                raise RuntimeError(f"load_protocols failed: {result.content}")
    return timings


if __name__ == "__main__":
    sys.exit(main())
