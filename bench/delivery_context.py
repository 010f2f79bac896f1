"""What a ``context`` summary costs on a busy project, with the server warm.

The delivery reference (§14): 1,000 tasks, 200 decisions and 50 changes, ``context``
summary called the way the MCP server calls it (same process, store open, stat cache
filled), median of 50 calls; target ≤ 50 ms. The data goes in through the ``record``
service in batches of 50 entries, so every row and decision file is what an agent would
have produced.

    .venv/bin/python bench/delivery_context.py [--quick]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import new_project, parser, scratch, verdict  # noqa: E402
from ithaca.delivery.context.tool import context  # noqa: E402

CHANGES, DECISIONS, TASKS = 50, 200, 1000
TARGET_MS = 50.0


def batches(entries: list[dict[str, Any]], size: int = 50) -> list[list[dict[str, Any]]]:
    return [entries[start : start + size] for start in range(0, len(entries), size)]


def entry(kind: str, action: str, data: dict[str, Any], key: str) -> dict[str, Any]:
    return {"kind": kind, "action": action, "data": data, "idempotency_key": key}


def fill(service: Any) -> None:
    entries = [entry("baseline", "initialize", {"project_name": "bench"}, "b-0")]
    for number in range(CHANGES):
        change = {
            "id": f"change-{number:03d}",
            "kind": "standard",
            "title": f"Change {number}",
            "intent": f"# Change {number}\n\nWhat it is for.\n",
            "contract": {"outcome": "it works", "acceptance": [{"id": "A1", "criterion": "ok"}]},
        }
        entries.append(entry("change_contract", "open", change, f"c-{number}"))
    for number in range(DECISIONS):
        scope = (
            {"change_id": f"change-{number % CHANGES:03d}"} if number % 5 else {"baseline": True}
        )
        decision = {
            "scope": scope,
            "question": f"Question {number}?",
            "recommendation": "the simple option",
            "owner": "bench",
            "selection": {"choice": "simple", "rationale": "fewer moving parts"},
        }
        entries.append(entry("decision", "accept", decision, f"d-{number}"))
    for number in range(TASKS):
        change_number = number % CHANGES
        task = {
            "id": f"T-{number}",
            "change_id": f"change-{change_number:03d}",
            "title": f"Task {number}",
            "verification": {"argv": ["pytest", "-q"]},
            "files_modified": [f"src/module_{number}.py"],
            "deps": [f"T-{number - CHANGES}"] if number >= CHANGES else [],
        }
        entries.append(entry("task_contract", "define", task, f"t-{number}"))
    for batch in batches(entries):
        service.record({"entries": batch})


def main() -> None:
    options = parser(__doc__.splitlines()[0]).parse_args()
    calls = 10 if options.quick else 50
    with scratch() as root:
        project = new_project(root)
        started = time.perf_counter()
        fill(project.delivery)
        print(
            f"filled {CHANGES} changes, {DECISIONS} decisions, {TASKS} tasks"
            f" in {time.perf_counter() - started:.1f} s"
        )
        arguments: dict[str, Any] = {"detail": "summary"}
        for _ in range(5):
            context(project.project, project.store, project.config, arguments)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            answer = context(project.project, project.store, project.config, arguments)
            times.append((time.perf_counter() - started) * 1000)
        median = statistics.median(times)
        scope = answer["scope"]
        print(
            f"scope {scope['type']} {scope['change_id']} {scope['task_id']},"
            f" {len(answer['decisions'])} decisions shown"
        )
        print(
            f"context summary: median {median:.2f} ms over {calls} calls;"
            f" target ≤ {TARGET_MS:.0f} ms; ratio {median / TARGET_MS:.2f}"
            f" {verdict(median <= TARGET_MS)}"
        )
        project.close()


if __name__ == "__main__":
    main()
