"""What a validator run costs, and what an active Ulysses session adds to a hook.

Two measurements of the ulysses reference (§7), in one throwaway project:

1. **Python judge vs Node judge.** The same judge (read observed, compare, write the
   verdict) as a Python cell and as a JavaScript cell, each bound once like a plan binds
   it, then run through ``validators.bindings.run`` — snapshot check against the journal,
   fresh run folder, sandbox (namespaces and limits where the machine has them), verdict —
   interleaved. Prints ``p50(python) / p50(node)``; target ≤ 0.6. Skipped with a message
   when ``node`` is missing.
2. **PreToolUse with a session in PRIMARY.** The hook command ``ithaca install claude``
   writes, with Claude Code's JSON for an Edit, in a session whose protocols are loaded
   and whose Ulysses step is planned (so the gate reads its record and allows), against
   ``python -c pass`` of the same interpreter, interleaved. Prints the median ratio;
   target ≤ 2.0.

    .venv/bin/python bench/validators.py [--quick]
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import new_project, parser, percentile, scratch, verdict
from ithaca.hosts.claude.installer import hook_command
from ithaca.kernel import journal
from ithaca.kernel.blobs import BlobStore
from ithaca.validators import bindings, snapshot

PYTHON_JUDGE = """\
from tb_validate import observed, pass_, fail
data = observed()
if data["errors"] == 0 and data["status"] == "ok":
    pass_("healthy")
else:
    fail("unhealthy", data)
"""
NODE_JUDGE = """\
import { observed, pass, fail } from "./tb-validate.js";
const data = observed();
if (data.errors === 0 && data.status === "ok") pass("healthy"); else fail("unhealthy", data);
"""
OBSERVED = {"errors": 0, "status": "ok", "samples": list(range(50))}
RATIO_TARGET = 0.6
HOOK_TARGET = 2.0
SESSION = "bench-ulysses"


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    runs = 8 if args.quick else 30
    with scratch() as root:
        project = new_project(root)
        try:
            _judges(project, runs)
            _hook(project, root / "project", runs)
        finally:
            project.close()
    return 0


def _judges(project: Any, runs: int) -> None:
    if shutil.which("node") is None:
        print("python vs node judge: skipped, `node` is not on PATH")
        return
    notebooks = project.notebooks
    python_nb = notebooks.create({"title": "python judge"})["notebookId"]
    node_nb = notebooks.create({"title": "node judge", "language": "javascript"})["notebookId"]
    cells = {
        "python": _bind(
            project,
            python_nb,
            notebooks.add_cell({"notebookId": python_nb, "source": PYTHON_JUDGE})["cellId"],
        ),
        "node": _bind(
            project,
            node_nb,
            notebooks.add_cell({"notebookId": node_nb, "source": NODE_JUDGE})["cellId"],
        ),
    }
    blobs = BlobStore(project.project.blobs_dir)
    settings = project.config["validators"]
    conn = project.store.connection()
    timings: dict[str, list[float]] = {name: [] for name in cells}
    isolated = set()
    for _ in range(runs + 2):
        for name, binding_id in cells.items():
            started = time.perf_counter_ns()
            result = bindings.run(
                conn, blobs, binding_id, OBSERVED, settings, project_root=project.project.root
            )
            timings[name].append((time.perf_counter_ns() - started) / 1e6)
            if not result["pass"]:
                raise SystemExit(f"the {name} judge did not pass: {result}")
            isolated.add(result["network_isolated"])
    for values in timings.values():
        del values[:2]  # warm-up: page cache, runtime measurement, namespace probe
    python_p50, node_p50 = (statistics.median(timings[name]) for name in ("python", "node"))
    print(
        f"judge runs through validators.run, {runs} each, interleaved"
        f" (network isolated: {sorted(isolated)})"
    )
    print(f"{'':10}{'p50 ms':>9}{'p90 ms':>9}")
    for name, values in timings.items():
        print(f"{name:10}{statistics.median(values):9.1f}{percentile(values, 90):9.1f}")
    ratio = python_p50 / node_p50
    print(
        f"p50(python) / p50(node) = {ratio:.2f}   target <= {RATIO_TARGET}  "
        f"{verdict(ratio <= RATIO_TARGET)}\n"
    )


def _bind(project: Any, notebook_id: str, cell_id: str) -> str:
    """Bind a cell the way a plan does: snapshot, binding, an event naming it."""
    blobs = BlobStore(project.project.blobs_dir)
    with project.store.write() as conn:
        built, origin = snapshot.build(conn, notebook_id, cell_id, project.config["validators"])
        view = bindings.bind(
            conn, blobs, built, owner_kind="bench", owner_id="bench", role="judge", cell=origin
        )
        seq = journal.append(
            conn,
            actor="system",
            kind="bench.judge_bound",
            subject="bench",
            payload={
                "role": "judge",
                "binding_id": view["binding_id"],
                "snapshotHash": view["snapshotHash"],
            },
        )
        bindings.attach_event(conn, [view["binding_id"]], seq)
    return str(view["binding_id"])


def _hook(project: Any, project_dir: Path, runs: int) -> None:
    event = project.protocols.admit_event(
        connector="test", workflow="coding", host_session_id=SESSION
    )
    project.protocols.load_protocols({"eventId": event["id"], "session": SESSION})
    ulysses = project.ulysses
    ulysses.dispatch({"operation": "init", "problem": "the parser drops the first field"})
    nb = project.notebooks.create({"title": "checks"})["notebookId"]
    cell = project.notebooks.add_cell({"notebookId": nb, "source": PYTHON_JUDGE})["cellId"]
    ref = {"notebookId": nb, "cellId": cell}
    ulysses.dispatch(
        {
            "operation": "plan",
            "primary": "fix the split",
            "recovery": "revert",
            "primaryValidator": ref,
            "recoveryValidator": ref,
        }
    )
    payload = json.dumps(
        {
            "session_id": SESSION,
            "cwd": str(project_dir),
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": {
                "file_path": str(project_dir / "parser.py"),
                "old_string": "a",
                "new_string": "b",
            },
        }
    ).encode()
    commands = {
        "baseline": ([sys.executable, "-c", "pass"], b""),
        "PreToolUse": (["/bin/sh", "-c", hook_command("PreToolUse")], payload),
    }
    for command, stdin in commands.values():
        for _ in range(3):
            _timed(command, stdin)
    timings: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (command, stdin) in commands.items():
            elapsed, answer = _timed(command, stdin)
            if name == "PreToolUse" and answer.strip():
                raise SystemExit(f"PreToolUse did not allow the Edit in PRIMARY: {answer}")
            timings[name].append(elapsed)
    base = statistics.median(timings["baseline"])
    hook = statistics.median(timings["PreToolUse"])
    print(f"PreToolUse (Edit) with a Ulysses session in PRIMARY, {runs} runs, interleaved")
    print(f"baseline {sys.executable} -c pass: median {base:.1f} ms")
    print(
        f"PreToolUse: median {hook:.1f} ms, p90 {percentile(timings['PreToolUse'], 90):.1f}"
        f" ms, ratio {hook / base:.2f}   target <= {HOOK_TARGET}  "
        f"{verdict(hook / base <= HOOK_TARGET)}"
    )


def _timed(command: list[str], stdin: bytes) -> tuple[float, str]:
    started = time.perf_counter_ns()
    done = subprocess.run(command, input=stdin, capture_output=True, check=False)
    return (time.perf_counter_ns() - started) / 1e6, done.stdout.decode()


if __name__ == "__main__":
    sys.exit(main())
