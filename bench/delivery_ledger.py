"""What publishing and importing a team ledger of 10,000 tasks costs.

The delivery reference (§14): ``sync`` publish, and import, of 10,000 tasks with digest
checks; target ≤ 1 s each. A teammate's ledger of 10,000 tasks is written into a fresh
checkout, which imports it (every record digest and the state digest verified, 10,000
rows written in one transaction); one task is then revised through ``record`` and the
checkout publishes (10,000 records projected, numbered, rendered and written). The
no-op cases (the same file imported again, nothing new to publish) are shown too.

    .venv/bin/python bench/delivery_ledger.py [--quick]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import new_project, parser, scratch, verdict  # noqa: E402
from ithaca.delivery import ledger_format, sync  # noqa: E402
from ithaca.kernel.files import write_atomic  # noqa: E402

TASKS = 10_000
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
    count = 1000 if options.quick else TASKS
    with scratch() as root:
        project = new_project(root)
        service = project.delivery
        data = teammate_ledger(count)
        write_atomic(project.project.state_root, ledger_format.LEDGER_PATH, data)
        print(f"ledger of {count} tasks: {len(data) / 1e6:.1f} MB")

        def run(action: str, key: str) -> dict[str, Any]:
            request = {"action": action, "idempotency_key": key}
            return sync.sync(
                project.project, project.store, project.config, request, units=service.units
            )

        imported, answer = timed(lambda: run("import", "bench-import"))
        print(f"import: {answer['status']}, {answer['applied']} records applied")
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
        print(
            f"publish: {answer['status']}, generation {answer['generation']},"
            f" {answer['records']} records, {answer['changed']} changed"
        )
        unchanged, _ = timed(lambda: run("publish", "bench-publish-again"))
        for name, seconds in (("import", imported), ("publish", published)):
            print(
                f"{name} of {count} tasks: {seconds:.3f} s; target ≤ {TARGET_S:.0f} s;"
                f" ratio {seconds / TARGET_S:.2f} {verdict(seconds <= TARGET_S)}"
            )
        print(f"no-op import {again * 1000:.1f} ms, no-op publish {unchanged * 1000:.1f} ms")
        project.close()


if __name__ == "__main__":
    main()
