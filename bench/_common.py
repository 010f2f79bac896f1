"""Shared pieces of the benchmark scripts: a throwaway project, varied records, percentiles.

A benchmark must not read the user's real settings or leave files behind, so each script
runs inside ``scratch()``: one temporary folder holding ``ITHACA_HOME`` and the project,
removed on exit, with this Ithaca's commands first on ``PATH`` (the hook wiring names
``ithaca-hook``). Child processes also keep their bytecode there (``PYTHONPYCACHEPREFIX``,
with writing switched on): an installed package has its ``.pyc`` files, and timing a hook
that recompiles its modules on every start would measure the compiler, not the hook.

Records and events are drawn from the same small value pools with a fixed seed, so runs
are comparable and a fair share of records match each event.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ithaca.protocols.validate import BUILTIN_WORKFLOWS, CONNECTORS, MESSAGE_KINDS

BIN = Path(sys.executable).parent
BENCH_USER = "user-00"
BENCH_CLIENT = "client-00"
BENCH_PROJECT = "project-00"
POOLS: dict[str, tuple[str, ...]] = {
    "connector": CONNECTORS,
    "messageKind": MESSAGE_KINDS,
    "userId": tuple(f"user-{n:02d}" for n in range(12)),
    "clientId": tuple(f"client-{n:02d}" for n in range(6)),
    "projectId": tuple(f"project-{n:02d}" for n in range(8)),
    "workflow": BUILTIN_WORKFLOWS,
    "task": tuple(f"task-{n:02d}" for n in range(20)),
}
# None of these fires on the benchmarks' own calls (an Edit of src/app.py).
CONSTRAINTS = (
    {"kind": "deny_command", "commands": ["git push --force"], "reason": "No force pushes."},
    {"kind": "deny_path", "paths": ["secrets/**"], "reason": "Secrets stay untouched."},
    {"kind": "deny_tool", "tools": ["WebFetch"], "effect": "ask"},
    {"kind": "require_approval", "commands": ["npm publish"]},
)


def parser(description: str) -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(description=description)
    found.add_argument("--quick", action="store_true", help="fewer iterations")
    return found


@contextmanager
def scratch() -> Iterator[Path]:
    """A temporary root with ``home/`` (``ITHACA_HOME``), ``project/`` and ``pycache/``."""
    root = Path(tempfile.mkdtemp(prefix="ithaca-bench-"))
    names = ("ITHACA_HOME", "ITHACA_DIR", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "PATH")
    saved = {name: os.environ.get(name) for name in names}
    os.environ["ITHACA_HOME"] = str(root / "home")
    # Ithaca's commands on PATH, as the installed hook wiring expects them.
    os.environ["PATH"] = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
    os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    os.environ.pop("ITHACA_DIR", None)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    (root / "home").mkdir()
    (root / "project").mkdir()
    try:
        yield root
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)


def new_project(root: Path) -> Any:
    """An initialised project under ``root`` whose events carry the bench user and ids."""
    import ithaca

    (root / "home" / "config.toml").write_text(f'user_id = "{BENCH_USER}"\n', encoding="utf-8")
    state = root / "project" / ".ithaca"
    state.mkdir(parents=True)
    # A repository of its own: a stray .git in /tmp (a Codex sandbox leaves one there
    # while it runs) would otherwise make /tmp the project.
    subprocess.run(["git", "init", "-q", str(root / "project")], check=True)
    (state / "config.toml").write_text(
        f'[protocols]\nproject_id = "{BENCH_PROJECT}"\nclient_id = "{BENCH_CLIENT}"\n',
        encoding="utf-8",
    )
    project, _ = ithaca.init_project(root / "project")
    return project


def protocol_records(count: int, *, seed: int = 7) -> list[dict[str, Any]]:
    """``count`` valid user records: wildcards, single values and any-of lists on every key,
    a few disabled, one in ten with a typed constraint."""
    rng = random.Random(seed)
    made = []
    for n in range(count):
        selector: dict[str, Any] = {}
        for key, pool in POOLS.items():
            roll = rng.random()
            if roll < 0.5:
                continue
            if roll < 0.8:
                selector[key] = rng.choice(pool)
            else:
                selector[key] = rng.sample(pool, k=min(len(pool), rng.randint(2, 3)))
        record: dict[str, Any] = {
            "id": f"bench.rule-{n:04d}",
            "name": f"Bench rule {n}",
            "description": "A generated rule for the benchmarks.",
            "priority": rng.randint(-100, 100),
            "selector": selector,
            "rules": [f"Follow bench rule {n}.", "Report what you changed."],
            "enabled": rng.random() >= 0.05,
            "tags": ["bench"],
        }
        if n % 10 == 3:
            record["constraints"] = [CONSTRAINTS[(n // 10) % len(CONSTRAINTS)]]
        made.append(record)
    return made


def run_together(
    target: Callable[..., None],
    worker_args: Sequence[tuple[Any, ...]],
    *,
    start_timeout_s: float = 120,
    run_timeout_s: float = 600,
) -> tuple[list[Any], float] | None:
    """Start one spawned process per ``worker_args`` entry, release them together and
    collect what each puts on the queue: ``(reports, wall seconds)``, or None (said on
    stdout) when a worker died or hung. ``target`` gets ``(*args, start, results)``."""
    import multiprocessing
    import time

    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(len(worker_args) + 1)
    results = spawn.Queue()
    processes = [spawn.Process(target=target, args=(*args, start, results)) for args in worker_args]
    for process in processes:
        process.start()
    try:
        start.wait(start_timeout_s)
        began = time.perf_counter()
        reports = [results.get(timeout=run_timeout_s) for _ in processes]
        seconds = time.perf_counter() - began
    except Exception as exc:  # a worker died or hung: say so and stop the ones we started
        print(f"{len(processes)} workers did not finish ({type(exc).__name__}: {exc}); FAIL")
        for process in processes:
            process.terminate()
        return None
    finally:
        for process in processes:
            process.join(30)
    return reports, seconds


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of unsorted values."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"
