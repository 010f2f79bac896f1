"""The hooks of two installs of Ithaca side by side: instructions executed and wall time.

A restructuring must not make the hooks slower, and the difference it makes is often a
few tenths of a millisecond, below what a median of wall times on a shared machine can
show. So each hook is also run under ``valgrind --tool=callgrind``, which counts the
instructions the whole process executes: the same count every run (hash seed fixed),
whatever the machine is doing meanwhile. Both installs run on the same project and the
same sessions (set up by this tree, as ``hooks.py`` does) against a bare start of their
own interpreter; wall times alternate between the two, call by call.

    .venv/bin/python bench/hooks_ab.py --before /path/to/other/venv/bin [--quick]

``--before`` is the ``bin`` folder of the other install (its ``python`` and its
``ithaca-hook``), for instance a virtual environment with a worktree of an older commit
installed in it. Needs ``valgrind`` on ``PATH``.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import BIN, parser, scratch
from hooks import _prepare
from ithaca import open_project

COLLECTED = re.compile(r"Collected : (\d+)")


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--before", type=Path, required=True, help="bin folder of the other")
    args = options.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not on PATH (apt-get install valgrind)", file=sys.stderr)
        return 2
    installs = {"before": args.before, "after": BIN}
    for name, folder in installs.items():
        if not (folder / "python").is_file() or not (folder / "ithaca-hook").is_file():
            print(f"{name}: {folder} has no python and ithaca-hook", file=sys.stderr)
            return 2
    runs = 20 if args.quick else 100
    with scratch() as root:
        prompt, edit, bash = _prepare(root, BIN / "ithaca-hook")
        kept = open_project(root / "project")  # the MCP server's connection, as in hooks.py
        cases = {
            "UserPromptSubmit": ("UserPromptSubmit", prompt),
            "PreToolUse (Edit)": ("PreToolUse", edit),
            "PreToolUse (Bash)": ("PreToolUse", bash),
        }
        try:
            _print_instructions(installs, cases)
            _print_wall(installs, cases, runs)
        finally:
            kept.close()
    return 0


def _print_instructions(installs: dict[str, Path], cases: dict[str, tuple[str, bytes]]) -> None:
    bare = {
        name: _instructions([str(folder / "python"), "-c", "pass"])
        for name, folder in installs.items()
    }
    print(
        f"\ninstructions (callgrind), bare interpreter: {bare['before'] / 1e6:.2f} M before,"
        f" {bare['after'] / 1e6:.2f} M after"
    )
    for case, (event, stdin) in cases.items():
        counted = {
            name: _instructions(_hook(folder, event), stdin) for name, folder in installs.items()
        }
        before, after = counted["before"], counted["after"]
        print(
            f"  {case:18} before {before / 1e6:6.2f} M ({before / bare['before']:.3f}x)"
            f"  after {after / 1e6:6.2f} M ({after / bare['after']:.3f}x)"
            f"  {(after - before) / before * 100:+.2f}%"
        )


def _print_wall(installs: dict[str, Path], cases: dict[str, tuple[str, bytes]], runs: int) -> None:
    timings: dict[str, list[float]] = {"bare": []}
    for run in range(runs):
        timings["bare"].append(_wall([sys.executable, "-c", "pass"], b""))
        order = ("before", "after") if run % 2 else ("after", "before")
        for case, (event, stdin) in cases.items():
            for name in order:
                timings.setdefault(f"{case} {name}", []).append(
                    _wall(_hook(installs[name], event), stdin)
                )
    bare = statistics.median(timings["bare"])
    print(f"\nwall time, medians of {runs} alternating runs; bare interpreter {bare:.2f} ms")
    for case in cases:
        before = statistics.median(timings[f"{case} before"])
        after = statistics.median(timings[f"{case} after"])
        print(
            f"  {case:18} before {before:6.2f} ms ({before / bare:.2f}x)"
            f"  after {after:6.2f} ms ({after / bare:.2f}x)  {after - before:+.2f} ms"
        )


def _hook(folder: Path, event: str) -> list[str]:
    return [str(folder / "python"), str(folder / "ithaca-hook"), "claude", event]


def _instructions(command: list[str], stdin: bytes = b"") -> int:
    """Instructions the process executes, counted once its bytecode cache is warm."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(command, input=stdin, capture_output=True, env=env, check=False)
    counted = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        input=stdin,
        capture_output=True,
        env=env,
        check=False,
    )
    found = COLLECTED.search(counted.stderr.decode())
    if found is None:
        raise SystemExit(f"valgrind gave no count for {command}: {counted.stderr[-400:]!r}")
    return int(found.group(1))


def _wall(command: list[str], stdin: bytes) -> float:
    started = time.perf_counter()
    subprocess.run(command, input=stdin, capture_output=True, check=False)
    return (time.perf_counter() - started) * 1e3


if __name__ == "__main__":
    sys.exit(main())
