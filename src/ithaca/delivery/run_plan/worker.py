"""Launching run-plan workers and watching them until they end
(docs/delivery.md, "ithaca run-plan").

A worker is launched without a shell, in its session's worktree, in a process group of
its own (so a timeout stops everything it started), with standard input closed and its
output copied to ``sessions/<sid>/worker.log`` up to 8 MiB (the rest is drained and
dropped, so a chatty worker never blocks on a full pipe). While workers run, the runner
renews their leases every 30 seconds; a worker past its timeout gets SIGTERM, then
SIGKILL 10 seconds later, and so does whatever a worker that ended left running in its
group, until no process of the group is left. When the runner itself is asked to stop
(SIGINT, SIGTERM), ``wait_any`` returns at once and ``stop_all`` signals every worker's
group together: SIGTERM, then SIGKILL for the groups still alive after a short grace.

How a worker ended — its exit status, or a timeout — is recorded, never trusted: the
runner reads the task's state afterwards, and only a completed task counts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import IO

from ithaca.delivery.units import owners as processes

LOG_CAP_BYTES = 8 * 1024 * 1024
HEARTBEAT_EVERY_S = 30.0
TERM_GRACE_S = 10.0
# How long the workers of an interrupted run get between SIGTERM and SIGKILL.
INTERRUPT_GRACE_S = 5.0
# How often ``wait_any`` reports that it is still waiting (the live progress line).
TICK_EVERY_S = 1.0
POLL_S = 0.05
TRUNCATED = b"\n[ithaca: worker.log stops here: 8 MiB reached]\n"


@dataclass
class Launched:
    session_id: str
    task_id: str
    process: subprocess.Popen[bytes]
    log: threading.Thread
    deadline: float
    timed_out: bool = False

    @property
    def exit_code(self) -> int | None:
        return self.process.returncode


def launch(
    argv: tuple[str, ...],
    env: dict[str, str],
    cwd: str,
    log_path: str,
    *,
    session_id: str,
    task_id: str,
    timeout_s: float,
) -> Launched:
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None
    log = threading.Thread(target=_copy_capped, args=(process.stdout, log_path), daemon=True)
    log.start()
    return Launched(session_id, task_id, process, log, time.monotonic() + timeout_s)


def wait_any(
    running: list[Launched],
    heartbeat: Callable[[list[str]], None],
    *,
    every_s: float = HEARTBEAT_EVERY_S,
    stop_requested: Callable[[], bool] | None = None,
    tick: Callable[[], None] | None = None,
) -> Launched | None:
    """The first of ``running`` to end (a timed-out one is stopped first), or None as soon
    as ``stop_requested`` says so; the others' leases are renewed through ``heartbeat``
    every ``every_s`` meanwhile, and ``tick`` is called about once a second."""
    next_beat = time.monotonic() + every_s
    next_tick = time.monotonic() + TICK_EVERY_S
    while True:
        if stop_requested is not None and stop_requested():
            return None
        for worker in running:
            if worker.process.poll() is not None:
                stop(worker)  # what it left running in its group, so its log closes
                return worker
            if time.monotonic() >= worker.deadline:
                stop(worker)
                worker.timed_out = True
                return worker
        if time.monotonic() >= next_beat:
            heartbeat([worker.session_id for worker in running])
            next_beat = time.monotonic() + every_s
        if tick is not None and time.monotonic() >= next_tick:
            tick()
            next_tick = time.monotonic() + TICK_EVERY_S
        time.sleep(POLL_S)


def stop_all(workers: list[Launched], *, grace_s: float | None = None) -> None:
    """Stop every worker's whole process group at once: SIGTERM, then SIGKILL for the
    groups still alive after ``grace_s`` (``INTERRUPT_GRACE_S``); returns once no process
    of any group is left (or, for a process that left its group, after one more grace),
    each worker reaped and its log closed."""
    grace = INTERRUPT_GRACE_S if grace_s is None else grace_s
    alive = [worker for worker in workers if _signal_group(worker, signal.SIGTERM)]
    alive = _groups_left(alive, time.monotonic() + grace)
    for worker in alive:
        _signal_group(worker, signal.SIGKILL)
    _groups_left(alive, time.monotonic() + max(grace, TERM_GRACE_S))
    for worker in workers:
        with suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=TERM_GRACE_S)
        worker.log.join(TERM_GRACE_S)  # bounded: a process that left the group may hold it


def _groups_left(workers: list[Launched], deadline: float) -> list[Launched]:
    """The workers whose group still has a live process at ``deadline`` (or sooner, none)."""
    while True:
        for worker in workers:
            worker.process.poll()  # reap the leader, so it stops counting
        workers = [worker for worker in workers if processes.group_is_alive(worker.process.pid)]
        if not workers or time.monotonic() >= deadline:
            return workers
        time.sleep(POLL_S)


def stop(worker: Launched) -> None:
    """SIGTERM the worker's process group, SIGKILL whatever is left after the grace
    period; returns once every process of the group is gone (a left-over that closed
    its output would otherwise outlive the run), the worker reaped and its log closed."""
    if _signal_group(worker, signal.SIGTERM):
        deadline = time.monotonic() + TERM_GRACE_S
        with suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=TERM_GRACE_S)
        worker.log.join(max(0.0, deadline - time.monotonic()))
        if not _group_ends_by(worker, deadline) or worker.log.is_alive():
            _signal_group(worker, signal.SIGKILL)
            _group_ends_by(worker, time.monotonic() + TERM_GRACE_S)
    worker.process.wait()
    worker.log.join()


def _group_ends_by(worker: Launched, deadline: float) -> bool:
    """Wait until the worker's group has no live process, or ``deadline``."""
    while processes.group_is_alive(worker.process.pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def _signal_group(worker: Launched, sent: signal.Signals) -> bool:
    """Signal the worker's process group; False when nothing of it is left."""
    try:
        os.killpg(worker.process.pid, sent)
    except ProcessLookupError:
        return False
    return True


def _copy_capped(stream: IO[bytes], log_path: str) -> None:
    written = 0
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as log, stream:
        while chunk := os.read(stream.fileno(), 65536):
            if written >= LOG_CAP_BYTES:
                continue
            part = chunk[: LOG_CAP_BYTES - written]
            log.write(part)
            written += len(part)
            if written >= LOG_CAP_BYTES:
                log.write(TRUNCATED)
            log.flush()
