"""``ithaca run-plan CHANGE``: a resumable dispatcher over a change's accepted plan
(docs/delivery.md, "ithaca run-plan").

Run-plan is not a second authority: it only runs the waves of the accepted ``plan``
checkpoint, and only while the plan's contract digests still match the tasks
(``PLAN_NOT_ACCEPTED``, ``PLAN_STALE``). It needs a worker command the user configured
(``WORKER_NOT_CONFIGURED``; see ``run_plan_config``).

Work is merged into an integration branch ``ithaca/plan/<change>``, started at the main
HEAD in its own worktree (``.ithaca-work/worktrees/plan-<change>/``, sparse like a
session's, with no ``.ithaca`` link; one an older run made under ``.runtime/worktrees/``
is used where it is); merging that branch into the user's branch is left to the user. Wave
by wave, each open task is admitted and skipped with a recorded reason when its circuit
is open, another session holds it, it is blocked or its dependencies are unfinished;
otherwise a session is acquired from the integration branch (pinned to the contract the
plan selected) and the worker launched in its worktree (``run_plan_worker``).

When a worker ends — whatever its exit status, or on timeout — the task is read again.
Only a ``completed`` task counts: its branch is merged with ``--no-ff`` into the
integration branch (a conflict is aborted and pauses the run,
``WAVE_INTEGRATION_CONFLICT``) and its worktree removed once merged and clean. A worker
that ended before its task converged fails its session (a circuit count) and pauses the
wave and the run; so does a skipped task. Authority changing between selection and
spawn (a new plan, a revised contract) pauses with ``AUTHORITY_CHANGED`` and counts no
failure. Running the command again resumes the open run at its first unfinished wave.

Each step is reported as it happens (``run_plan_progress``: a wave starting, a task
starting, skipped or finished with its outcome and its worker log), and a pause names the
worker log to read. SIGINT and SIGTERM stop a run cleanly: the first asks the runner to
stop at its next safe point (at once while it waits for workers), a second one stops it
where it is. Every running worker's whole process group then gets SIGTERM, and SIGKILL
after a short grace (``run_plan_worker.stop_all``); their sessions close ``abandoned``
(no failure counted; a worktree holding work is kept), and the run is recorded as paused
with the reason ``INTERRUPTED`` and the command that resumes it
(``delivery.plan_interrupted``). Signals are handled only where Python can (the main
thread); elsewhere they keep their usual effect.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any

from ithaca.delivery.checkpoints import rows as checkpoints
from ithaca.delivery.contract import validation_error
from ithaca.delivery.ledger import driver_setup
from ithaca.delivery.records import changes, tasks
from ithaca.delivery.run_plan import config as run_plan_config
from ithaca.delivery.run_plan import progress as run_plan_progress
from ithaca.delivery.run_plan import runs as run_plan_runs
from ithaca.delivery.run_plan import worker as run_plan_worker
from ithaca.delivery.sessions import leases, packets, worktrees
from ithaca.delivery.sessions import rows as sessions_rows
from ithaca.delivery.sessions.acquire import AcquireRequest, acquire_session
from ithaca.delivery.sessions.admission import Caller, admit, plan_document
from ithaca.delivery.sessions.close import CloseRequest, close_session
from ithaca.delivery.units import owners as processes
from ithaca.kernel.errors import IthacaError, Refused
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

RUNTIME = "run-plan"
WORKER_LOG = "worker.log"
# The signals that stop a run cleanly.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class AcceptedPlan:
    checkpoint: Row
    document: dict[str, Any]

    def contract_digest(self, task_id: str) -> str:
        digest: str = next(
            task["contract_digest"] for task in self.document["tasks"] if task["id"] == task_id
        )
        return digest


def run_plan(
    project: Project,
    store: Store,
    config: dict[str, Any],
    change_id: str,
    *,
    max_parallel: int | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Run (or resume) the change's accepted plan; ``dry_run`` only says what would run."""
    settings = run_plan_config.worker(config)
    if max_parallel is not None:
        if max_parallel < 1:
            raise validation_error("/max_parallel", "OUT_OF_RANGE", "must be at least 1")
        settings = replace(settings, max_parallel=max_parallel)
    with store.read() as conn:
        plan = accepted_plan(conn, project, change_id)
        if dry_run:
            return _dry_run(conn, project, change_id, plan)
    worktrees.require_git()
    resume = resume_command(change_id, max_parallel)
    with _Signals() as signals:
        base = worktrees.main_head(project)
        branch = f"ithaca/plan/{change_id}"
        existed = _existing_integration(project, change_id) is not None
        integration = _integration_worktree(project, change_id, branch, base)
        try:
            run, how = run_plan_runs.begin(
                store, change_id, plan.checkpoint, plan.document, branch, integration
            )
        except BaseException:
            if not existed:  # refused (another run holds the change): leave nothing behind
                worktrees.discard(project, integration, branch)
            raise
        runner = _Runner(project, store, config, settings, run, plan, signals, resume)
        return runner.run_waves(how)


def resume_command(change_id: str, max_parallel: int | None = None) -> str:
    """The command that resumes the change's run (from inside the project)."""
    command = f"ithaca run-plan {change_id}"
    return command if max_parallel is None else f"{command} --max-parallel {max_parallel}"


def worker_log(project: Project, session_id: str) -> str:
    """Where the worker of ``session_id`` writes: ``.runtime/sessions/<sid>/worker.log``."""
    return os.path.join(packets.session_folder(project, session_id), WORKER_LOG)


class Interrupted(KeyboardInterrupt):
    """A stop signal reached the runner; ``signum`` says which. A KeyboardInterrupt, so
    only code that cleans up on every exit sees it (never a handler of ``Exception``)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Signals:
    """SIGINT and SIGTERM while run-plan works: the first is noted, for the runner to stop
    at its next safe point; a second one raises ``Interrupted`` where the runner is,
    unless it is already stopping. The previous handlers come back on exit."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.stopping = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for number in STOP_SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
        elif not self.stopping:
            raise Interrupted(signum)

    def requested(self) -> bool:
        return self.received is not None

    def check(self) -> None:
        """Raise ``Interrupted`` if a stop signal arrived."""
        if self.received is not None:
            raise Interrupted(self.received)


def accepted_plan(conn: sqlite3.Connection, project: Project, change_id: str) -> AcceptedPlan:
    """The change's accepted plan and its plan.json, provided they still match the tasks."""
    changes.writable(conn, change_id)
    checkpoint = checkpoints.read(conn, "plan", "change", change_id)
    document = None if checkpoint is None else plan_document(conn, project, change_id)
    if (
        checkpoint is None
        or document is None
        or document.get("checkpoint_revision") != checkpoint["revision"]
    ):
        raise Refused(
            "PLAN_NOT_ACCEPTED",
            f"change {change_id} has no accepted plan; accept a `plan` checkpoint first",
            {"change_id": change_id},
        )
    stale = []
    listed = {task["id"] for task in document["tasks"]}
    for task in document["tasks"]:
        row = tasks.find(conn, task["id"])
        if row is None or row["contract_digest"] != task["contract_digest"]:
            stale.append(task["id"])
    for task_id, status in conn.execute(
        "SELECT id, status FROM delivery_tasks WHERE change_id = ? ORDER BY id", (change_id,)
    ):
        if task_id not in listed and status in ("pending", "in_progress", "blocked"):
            stale.append(task_id)
    if stale:
        raise Refused(
            "PLAN_STALE",
            f"the accepted plan of {change_id} no longer matches tasks {', '.join(stale)};"
            " accept a new plan checkpoint",
            {"change_id": change_id, "tasks": stale},
        )
    return AcceptedPlan(checkpoint, document)


def _integration_worktree(project: Project, change_id: str, branch: str, base: str) -> str:
    existing = _existing_integration(project, change_id)
    if existing is not None:
        return existing
    return worktrees.create(project, f"plan-{change_id}", branch, base, link=False)


def _existing_integration(project: Project, change_id: str) -> str | None:
    """The change's integration worktree when it exists: in the work folder, or where a
    run from before the work folder made it (``.runtime/worktrees/``), which stays."""
    name = f"plan-{change_id}"
    for path in (worktrees.path_for(project, name), worktrees.legacy_path_for(project, name)):
        if os.path.isdir(path):
            return path
    return None


def _dry_run(
    conn: sqlite3.Connection, project: Project, change_id: str, plan: AcceptedPlan
) -> dict[str, Any]:
    at_ms = leases.now_ms()
    waves = []
    for wave in plan.document["waves"]:
        listed = []
        for task_id in wave["tasks"]:
            verdict = admit(conn, project, task_id, Caller(), at_ms, git_ready=True)
            listed.append(
                {
                    "id": task_id,
                    "status": None if verdict.task is None else verdict.task["status"],
                    "verdict": verdict.verdict,
                    "blockers": [error.code for error in verdict.blockers],
                }
            )
        waves.append({"index": wave["index"], "tasks": listed})
    return {
        "dry_run": True,
        "change_id": change_id,
        "checkpoint_id": plan.checkpoint["id"],
        "waves": waves,
        "diagnostics": [],
        "journal_seq": None,
    }


class _Pause(Exception):
    """A reason the wave (and the run) stops after the workers already running end."""

    def __init__(self, reason: str, details: dict[str, Any] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.details = details or {}


class _Runner:
    def __init__(
        self,
        project: Project,
        store: Store,
        config: dict[str, Any],
        settings: run_plan_config.Worker,
        run: Row,
        plan: AcceptedPlan,
        signals: _Signals,
        resume: str,
    ):
        self.project = project
        self.store = store
        self.ttl_s = leases.ttl_s(config)
        self.settings = settings
        self.run = run
        self.plan = plan
        self.signals = signals
        self.resume = resume
        self.last_seq: int | None = None
        self.running: list[run_plan_worker.Launched] = []
        self.wave = 1

    def run_waves(self, how: str) -> dict[str, Any]:
        waves = self.plan.document["waves"]
        run_plan_progress.emit(
            "run_started",
            run_id=self.run["id"],
            change_id=self.run["change_id"],
            how=how,
            integration_branch=self.run["integration_branch"],
            waves=[{"index": wave["index"], "tasks": wave["tasks"]} for wave in waves],
        )
        try:
            for wave in waves:
                self.wave = wave["index"]
                self.signals.check()
                pause = self._wave(wave["index"], wave["tasks"])
                if pause is not None:
                    self.last_seq = run_plan_runs.pause(
                        self.store, self.run, wave["index"], pause.reason, pause.details
                    )
                    self._wave_finished("paused", pause)
                    return self._summary(how, "paused", pause)
                self.last_seq = run_plan_runs.wave_completed(self.store, self.run, wave["index"])
                self._wave_finished("completed", None)
        except Interrupted as stop:
            return self._interrupted(how, stop.signum)
        self.last_seq = run_plan_runs.complete(self.store, self.run)
        return self._summary(how, "completed", None)

    def _wave_finished(self, outcome: str, pause: _Pause | None) -> None:
        run_plan_progress.emit(
            "wave_finished",
            wave=self.wave,
            waves=len(self.plan.document["waves"]),
            outcome=outcome,
            reason=None if pause is None else pause.reason,
        )

    def _interrupted(self, how: str, signum: int) -> dict[str, Any]:
        """Stop every running worker's process group, close their sessions (abandoned:
        the user stopped them, no failure counted), record the run as interrupted."""
        self.signals.stopping = True
        name = signal.Signals(signum).name
        stopped = [launched.task_id for launched in self.running]
        run_plan_progress.emit("stopping", signal=name, tasks=stopped)
        run_plan_worker.stop_all(self.running)
        for launched in self.running:
            with self.store.read() as conn:
                session = sessions_rows.find(conn, launched.session_id)
            if session is not None and session["status"] == "running":
                try:
                    self._close(launched.session_id, "abandoned")
                except IthacaError:
                    pass  # its owner is gone: doctor's LEASE_ORPHANED ends it
        self.running = []
        self.last_seq = run_plan_runs.interrupt(
            self.store, self.run, self.wave, name, stopped, self.resume
        )
        details = {"signal": name, "wave": self.wave, "tasks": stopped, "resume": self.resume}
        return self._summary(how, "interrupted", _Pause("INTERRUPTED", details))

    # --- one wave ----------------------------------------------------------------------

    def _wave(self, index: int, task_ids: list[str]) -> _Pause | None:
        queue: list[str] = []
        pause: _Pause | None = None
        skipped: list[str] = []
        with self.store.read() as conn:
            states = run_plan_runs.run_tasks(conn, self.run["id"])
        run_plan_progress.emit(
            "wave_started",
            wave=index,
            waves=len(self.plan.document["waves"]),
            tasks=task_ids,
            integrated=[t for t in task_ids if states[t]["status"] == "integrated"],
        )
        for task_id in task_ids:
            try:
                if self._needs_work(task_id):
                    queue.append(task_id)
            except _Pause as stop:
                pause = pause or stop
        while queue or self.running:
            while queue and pause is None and len(self.running) < self.settings.max_parallel:
                self.signals.check()
                task_id = queue.pop(0)
                try:
                    launched = self._launch(task_id)
                except _Pause as stop:
                    pause = stop
                    continue
                if launched is None:
                    skipped.append(task_id)
            if not self.running:
                break
            ended = run_plan_worker.wait_any(
                self.running,
                self._heartbeat,
                stop_requested=self.signals.requested,
                tick=self._tick,
            )
            self.signals.check()  # None: asked to stop; else settle, then look again
            assert ended is not None
            self.running.remove(ended)
            try:
                self._settle(ended)
            except _Pause as stop:
                pause = pause or stop
        if pause is None and skipped:
            pause = _Pause("TASKS_SKIPPED", {"tasks": skipped})
        return pause

    def _needs_work(self, task_id: str) -> bool:
        """False for a task already integrated; one completed meanwhile is integrated now
        (its session's branch, when this run's session completed it)."""
        with self.store.read() as conn:
            state = run_plan_runs.run_tasks(conn, self.run["id"])[task_id]
            task = tasks.find(conn, task_id)
            session = None
            if state["session_id"] is not None:
                session = sessions_rows.find(conn, state["session_id"])
        if state["status"] == "integrated":
            return False
        if task is None or task["status"] != "completed":
            return True
        if session is not None and session["status"] == "completed":
            self._integrate(task_id, session)
        else:
            self._mark(task_id, "integrated", reason="COMPLETED_OUTSIDE_RUN")
        return False

    def _launch(self, task_id: str) -> run_plan_worker.Launched | None:
        """Start a worker for the task, or record why it is skipped (None)."""
        skip = self._admit(task_id)
        if skip is not None:
            self._mark(task_id, "skipped", reason=skip)
            return None
        request = AcquireRequest(
            task_id=task_id,
            strategy="spawn",
            runtime=RUNTIME,
            ttl_s=self.ttl_s,
            plan_run_id=self.run["id"],
            base=worktrees.head(self.run["worktree_path"]),
            expected_contract=self.plan.contract_digest(task_id),
            actor="system",
        )
        try:
            answer, _ = acquire_session(self.project, self.store, request, None)
        except IthacaError as exc:
            self.signals.check()  # a Git step the terminal's SIGINT stopped is no skip
            if exc.code == "AUTHORITY_CHANGED":
                self._mark(task_id, "paused", reason=exc.code)
                raise _Pause(exc.code, {"task_id": task_id}) from exc
            self._mark(task_id, "skipped", reason=exc.code)
            return None
        session_id = answer["session"]["id"]
        log_path = worker_log(self.project, session_id)
        try:
            launched = run_plan_worker.launch(
                self.settings.argv,
                run_plan_config.environment(self.settings, answer["env"]),
                answer["worktree"],
                log_path,
                session_id=session_id,
                task_id=task_id,
                timeout_s=self.settings.timeout_s,
            )
        except OSError as exc:
            self._fail(session_id)
            self._mark(task_id, "paused", session_id=session_id, reason="WORKER_LAUNCH_FAILED")
            raise _Pause("WORKER_LAUNCH_FAILED", {"task_id": task_id, "error": str(exc)}) from exc
        self.running.append(launched)  # from here on, a stop signal stops it too
        pid = launched.process.pid
        self._mark(
            task_id,
            "running",
            session_id=session_id,
            worker=(pid, processes.start_time(pid)),
        )
        run_plan_progress.emit(
            "task_started",
            wave=self.wave,
            task_id=task_id,
            session_id=session_id,
            pid=pid,
            log=log_path,
        )
        return launched

    def _admit(self, task_id: str) -> str | None:
        """Why the task cannot start now, or None. Also ends this run's own session that
        a dead worker left running (a crash, counted), so the task can start again; and
        pauses on a plan that is no longer the accepted one."""
        with self.store.read() as conn:
            current = checkpoints.read(conn, "plan", "change", self.run["change_id"])
            verdict = admit(conn, self.project, task_id, Caller(), leases.now_ms(), git_ready=True)
        if current is None or current["id"] != self.run["checkpoint_id"]:
            self._mark(task_id, "paused", reason="AUTHORITY_CHANGED")
            raise _Pause("AUTHORITY_CHANGED", {"task_id": task_id})
        running = verdict.running
        if running is not None and running["plan_run_id"] == self.run["id"]:
            owner = running["owner_pid"]
            if owner is not None and processes.is_alive(owner, running["owner_start"]):
                return "WORKER_STILL_RUNNING"
            self._fail(running["id"], "crashed")
            return self._admit(task_id)
        if verdict.blockers:
            return verdict.blockers[0].code
        if running is not None:
            return "LEASED_ELSEWHERE"
        assert verdict.task is not None
        if verdict.task["status"] == "blocked":
            return "TASK_BLOCKED"
        if any(note["code"] == "TASK_DEPENDENCIES_INCOMPLETE" for note in verdict.warnings):
            return "TASK_DEPENDENCIES_INCOMPLETE"
        return None

    def _settle(self, ended: run_plan_worker.Launched) -> None:
        """Judge a worker that ended by its task's state, never by its exit status."""
        with self.store.read() as conn:
            task = tasks.find(conn, ended.task_id)
            session = sessions_rows.find(conn, ended.session_id)
        assert session is not None
        if task is not None and task["status"] == "completed" and session["status"] == "completed":
            self._integrate(ended.task_id, session, ended.exit_code)
            return
        if session["status"] == "running":
            self._fail(session["id"])
        reason = "WORKER_TIMED_OUT" if ended.timed_out else "TASK_NOT_CONVERGED"
        self._mark(
            ended.task_id,
            "paused",
            session_id=session["id"],
            reason=reason,
            exit_code=ended.exit_code,
        )
        log = worker_log(self.project, session["id"])
        raise _Pause(
            reason,
            {
                "task_id": ended.task_id,
                "session_id": session["id"],
                "exit_code": ended.exit_code,
                "log": log,
            },
        )

    def _integrate(self, task_id: str, session: Row, exit_code: int | None = None) -> None:
        """Merge the completed session's branch into the integration branch, then remove
        its worktree when clean; a conflicting merge is aborted and pauses the run."""
        # Ithaca's Git obeys no program the repository's settings name (kernel.git), so
        # the merge names the ledger's driver itself, as Ithaca would register it.
        driver = f"merge.{driver_setup.DRIVER}.driver={driver_setup.default_command()}"
        merged = worktrees.git(
            self.run["worktree_path"],
            "-c",
            driver,
            "merge",
            "--no-ff",
            "--no-edit",
            "-m",
            f"ithaca: integrate task {task_id} ({session['id']})",
            session["branch"],
            check=False,
        )
        if merged.returncode != 0:
            worktrees.git(self.run["worktree_path"], "merge", "--abort", check=False)
            self.signals.check()  # the terminal's SIGINT stopped the merge: resume merges
            self._mark(
                task_id,
                "paused",
                session_id=session["id"],
                reason="WAVE_INTEGRATION_CONFLICT",
                exit_code=exit_code,
            )
            raise _Pause(
                "WAVE_INTEGRATION_CONFLICT",
                {
                    "task_id": task_id,
                    "session_id": session["id"],
                    "log": worker_log(self.project, session["id"]),
                },
            )
        close_session(
            self.project,
            self.store,
            CloseRequest(
                session["id"],
                remove_worktree=True,
                by_run=True,
                target=self.run["integration_branch"],
                actor="system",
            ),
            None,
        )
        self._mark(task_id, "integrated", session_id=session["id"], exit_code=exit_code)

    # --- helpers -------------------------------------------------------------------------

    def _fail(self, session_id: str, reason: str = "failed") -> None:
        """End this run's session as failed (or crashed): one more circuit count."""
        self._close(session_id, reason)

    def _close(self, session_id: str, reason: str) -> None:
        """End this run's session; its worktree goes only when nothing in it is lost
        (clean, and its HEAD already in the integration branch), else it is kept."""
        request = CloseRequest(
            session_id,
            reason=reason,
            remove_worktree=True,
            by_run=True,
            target=self.run["integration_branch"],
            actor="system",
        )
        close_session(self.project, self.store, request, None)

    def _report(self, task_id: str, outcome: str, **found: Any) -> None:
        """A task's outcome in this wave, for whoever follows the run."""
        session_id = found.get("session_id")
        run_plan_progress.emit(
            "task_skipped" if outcome == "skipped" else "task_finished",
            wave=self.wave,
            task_id=task_id,
            outcome=outcome,
            reason=found.get("reason"),
            session_id=session_id,
            exit_code=found.get("exit_code"),
            log=None if session_id is None else worker_log(self.project, session_id),
        )

    def _tick(self) -> None:
        run_plan_progress.emit(
            "waiting", wave=self.wave, running=[launched.task_id for launched in self.running]
        )

    def _mark(self, task_id: str, status: str, **found: Any) -> None:
        """Record a task's state in the run and, once it has an outcome in this wave,
        report it (a task starting is reported by ``_launch``, with its worker)."""
        self.last_seq = run_plan_runs.mark_task(
            self.store, self.run["id"], task_id, status, **found
        )
        if status != "running":
            self._report(task_id, status, **found)

    def _heartbeat(self, session_ids: list[str]) -> None:
        with self.store.write() as tx:
            at_ms = leases.now_ms()
            for session_id in session_ids:
                leases.renew(tx, session_id, at_ms)

    def _summary(self, how: str, status: str, pause: _Pause | None) -> dict[str, Any]:
        with self.store.read() as conn:
            states = run_plan_runs.run_tasks(conn, self.run["id"])
        waves = [
            {
                "index": wave["index"],
                "tasks": [
                    {
                        "id": task_id,
                        "status": states[task_id]["status"],
                        "reason": states[task_id]["reason"],
                        "session_id": states[task_id]["session_id"],
                        "exit_code": states[task_id]["exit_code"],
                        "log": None
                        if states[task_id]["session_id"] is None
                        else worker_log(self.project, states[task_id]["session_id"]),
                    }
                    for task_id in wave["tasks"]
                ],
            }
            for wave in self.plan.document["waves"]
        ]
        return {
            "run": {
                "id": self.run["id"],
                "change_id": self.run["change_id"],
                "checkpoint_id": self.run["checkpoint_id"],
                "integration_branch": self.run["integration_branch"],
                "worktree": self.run["worktree_path"],
                "how": how,
            },
            "status": status,
            "pause": None if pause is None else {"reason": pause.reason, **pause.details},
            "waves": waves,
            "diagnostics": [],
            "journal_seq": self.last_seq,
        }
