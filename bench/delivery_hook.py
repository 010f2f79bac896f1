"""Whole-process cost of the SessionStart breadcrumb against a bare interpreter (delivery §14).

A session start with delivery work in flight runs the hook command ``ithaca install
claude`` writes (the interpreter with ``-S -P`` and only Ithaca's folder on the path),
which opens the store, reads the current change, task, checkpoints and decisions and
prints the breadcrumb. Target: a median of at most 2x a bare ``python -c pass`` started by
the same interpreter, over 30 runs that alternate with the baseline so that background
load hits both alike. As in a Claude Code session, the MCP server's connection stays open.

    .venv/bin/python bench/delivery_hook.py [--quick]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import new_project, parser, percentile, scratch, verdict

TARGET_RATIO = 2.0
TASKS = 40
DECISIONS = 20


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    runs = 10 if args.quick else 30
    with scratch() as root:
        stdin = _prepare(root)
        hook = _installed("SessionStart")
        answer = _run(hook, stdin)[1]
        if "[Ithaca delivery] change add-login" not in answer:
            raise SystemExit(f"SessionStart gave no delivery breadcrumb: {answer!r}")
        print(json.loads(answer)["hookSpecificOutput"]["additionalContext"], end="\n\n")
        from ithaca import open_project

        server_side = open_project(root / "project")
        server_side.store.connection()  # what the MCP server holds during a session
        commands = {
            "baseline": ([sys.executable, "-c", "pass"], b""),
            "SessionStart": (hook, stdin),
        }
        for command in commands.values():  # warm the page and bytecode caches
            for _ in range(3):
                _run(*command)
        timings: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, command in commands.items():
                timings[name].append(_run(*command)[0])
        server_side.close()
    base = statistics.median(timings["baseline"])
    print(f"{runs} runs each, alternating; baseline: {sys.executable} -c pass")
    print(f"{'':14}{'median ms':>10}{'p90 ms':>9}{'ratio':>8}")
    for name, values in timings.items():
        median = statistics.median(values)
        line = f"{name:14}{median:10.1f}{percentile(values, 90):9.1f}{median / base:8.2f}"
        if name != "baseline":
            line += f"   target <= {TARGET_RATIO:.1f}x  {verdict(median / base <= TARGET_RATIO)}"
        print(line)
    return 0


def _prepare(root: Path) -> bytes:
    """A change with tasks, decisions and checkpoints; returns the SessionStart input."""
    project = new_project(root)
    keys = iter(range(1_000_000))

    def record(kind: str, action: str, data: dict[str, Any]) -> None:
        entry = {"kind": kind, "action": action, "data": data, "idempotency_key": f"b-{next(keys)}"}
        project.delivery.record({"entries": [entry]})

    intent = "# Add login\n\nUsers sign in with email.\n"
    record(
        "change_contract",
        "open",
        {"id": "add-login", "kind": "standard", "title": "Add login", "intent": intent},
    )
    for n in range(TASKS):
        task = {"id": f"T-{n}", "title": f"Task {n}", "verification": {"argv": ["pytest"]}}
        record("task_contract", "define", {**task, "change_id": "add-login"})
    for n in range(DECISIONS):
        decision = {
            "scope": {"change_id": "add-login"},
            "question": f"Question {n}?",
            "recommendation": "the simple one",
            "owner": "maria",
        }
        if n % 5:
            decision["selection"] = {"choice": "simple", "rationale": "fewer parts"}
            record("decision", "accept", decision)
        else:
            record("decision", "defer", {**decision, "consequence": "decide before release"})
    conn = project.store.connection()
    now = "2030-01-01T00:00:00.000Z"
    conn.execute("UPDATE delivery_tasks SET status = 'in_progress' WHERE id = 'T-7'")
    for stage, status, revision in (("plan", "accepted", 2), ("test", "draft", None)):
        conn.execute(
            "INSERT INTO delivery_checkpoints (id, stage, scope_type, scope_id, revision, status,"
            " payload, evidence, diagnostics, created_at, updated_at)"
            " VALUES (?, ?, 'change', 'add-login', ?, ?, '{}', '[]', '[]', ?, ?)",
            (f"cp-{stage}", stage, revision, status, now, now),
        )
    project.close()
    payload = {
        "session_id": "bench-session",
        "cwd": str(root / "project"),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    return json.dumps(payload).encode()


def _installed(event: str) -> list[str]:
    """The hook command ``ithaca install claude`` writes for ``event``, as argv."""
    from ithaca.hosts.claude.installer import hook_command

    return ["/bin/sh", "-c", hook_command(event)]


def _run(command: list[str], stdin: bytes) -> tuple[float, str]:
    """Wall time of one process in milliseconds, and what it printed."""
    started = time.perf_counter_ns()
    done = subprocess.run(command, input=stdin, capture_output=True, check=False)
    return (time.perf_counter_ns() - started) / 1e6, done.stdout.decode()


if __name__ == "__main__":
    sys.exit(main())
