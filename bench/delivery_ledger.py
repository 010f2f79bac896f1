"""What publishing and importing a team ledger of 10,000 tasks costs.

The delivery reference (§14): ``sync`` publish, and import, of 10,000 tasks with digest
checks; target ≤ 1 s each. A teammate's ledger of 10,000 tasks is written into a fresh
checkout, which imports it (every record digest and the state digest verified, 10,000
rows written in one transaction); one task is then revised through ``record`` and the
checkout publishes (10,000 records projected, numbered, rendered and written). The
no-op cases (the same file imported again, nothing new to publish) are shown too. Each
round starts from a fresh checkout; the verdict is on the median round, as a shared
machine slows single rounds at random.

    .venv/bin/python bench/delivery_ledger.py [--quick]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import new_project, parser, scratch, verdict  # noqa: E402
from ithaca.delivery.ledger import format as ledger_format
from ithaca.delivery.sync import tool as sync
from ithaca.kernel.files import write_atomic  # noqa: E402

TASKS = 10_000
ROUNDS = 5
TARGET_S = 1.0


def teammate_ledger(count: int) -> bytes:
    """A published ledger of ``count`` tasks, as another checkout would have written it."""
    records = [
        ledger_format.record(
            "task",
            f"T-{number}",
            {
                "id": f"T-{number}",
                "title": f"Task {number}: make module {number} do its part",
                "verification": {"argv": ["pytest", "-q", f"tests/test_module_{number}.py"]},
                "deps": [f"T-{number - 1}"] if number else [],
                "files_modified": [f"src/module_{number}.py"],
                "acceptance": [{"id": "A1", "criterion": f"module {number} passes its tests"}],
                "status": "pending",
            },
        )
        for number in range(count)
    ]
    ledger = ledger_format.document(
        "prj-0123456789ab", tuple(records), generation=0, parent_digest=None, ancestors=()
    )
    return ledger_format.render(ledger)


def timed(call: Callable[[], dict[str, Any]]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    answer = call()
    return time.perf_counter() - started, answer


def main() -> None:
    options = parser(__doc__.splitlines()[0]).parse_args()
    count, rounds = (1000, 1) if options.quick else (TASKS, ROUNDS)
    data = teammate_ledger(count)
    print(f"ledger of {count} tasks: {len(data) / 1e6:.1f} MB; {rounds} round(s)")
    seconds: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, value in one_round(data).items():
            seconds.setdefault(name, []).append(value)
    for name in ("import", "publish"):
        median = statistics.median(seconds[name])
        print(
            f"{name} of {count} tasks: median {median:.3f} s (rounds"
            f" {', '.join(f'{value:.3f}' for value in seconds[name])}); target ≤"
            f" {TARGET_S:.0f} s; ratio {median / TARGET_S:.2f} {verdict(median <= TARGET_S)}"
        )
    print(
        f"no-op import {statistics.median(seconds['no-op import']) * 1000:.1f} ms,"
        f" no-op publish {statistics.median(seconds['no-op publish']) * 1000:.1f} ms (medians)"
    )


def one_round(data: bytes) -> dict[str, float]:
    """Import ``data`` into a fresh checkout, revise one task, publish; seconds of each."""
    with scratch() as root:
        project = new_project(root)
        service = project.delivery
        write_atomic(project.project.state_root, ledger_format.LEDGER_PATH, data)

        def run(action: str, key: str) -> dict[str, Any]:
            request = {"action": action, "idempotency_key": key}
            return sync.sync(
                project.project, project.store, project.config, request, units=service.units
            )

        imported, answer = timed(lambda: run("import", "bench-import"))
        assert answer["status"] == "imported", answer
        again, _ = timed(lambda: run("import", "bench-import-again"))
        service.record(
            {
                "entries": [
                    {
                        "kind": "task_contract",
                        "action": "revise",
                        "data": {"id": "T-0", "patch": {"title": "Task 0, revised"}},
                        "idempotency_key": "bench-revise",
                    }
                ]
            }
        )
        published, answer = timed(lambda: run("publish", "bench-publish"))
        assert (answer["status"], answer["changed"]) == ("published", 1), answer
        unchanged, _ = timed(lambda: run("publish", "bench-publish-again"))
        project.close()
    return {
        "import": imported,
        "publish": published,
        "no-op import": again,
        "no-op publish": unchanged,
    }


if __name__ == "__main__":
    main()
