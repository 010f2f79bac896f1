"""``ithaca run-plan CHANGE [--max-parallel N] [--dry-run] [--json]``.

Runs the change's accepted plan wave by wave with the worker the user configured
(``[run_plan] worker`` in ``.ithaca/.runtime/config.toml``), or resumes the run a
previous invocation paused. The exit status says whether the plan converged: 0 when
every wave completed (or for ``--dry-run``), 1 when the run paused (the reason is
printed, with the worker log to read; fix it and run the command again) or was refused,
128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM) when a signal stopped it:
its workers' process groups are stopped, the run is recorded as interrupted and the
command that resumes it is printed.

While it works, it shows each wave and each task as they start and finish, on standard
error: on a terminal, one live status line rewritten in place, with each task's outcome
printed above it as it comes; elsewhere, plain one-line events (no control characters).
``--json`` prints only the final JSON answer. The runner reports its steps as ``logging``
records of its progress logger (``ithaca.delivery.run_plan.progress``), which this
command listens to.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import sys
import time
from typing import Any, TextIO

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, fail, json_option, show
from ithaca.delivery import PROGRESS_ATTRIBUTE, PROGRESS_LOGGER
from ithaca.kernel import IthacaError


@click.command("run-plan")
@click.argument("change_id")
@click.option("--max-parallel", type=click.IntRange(min=1), help="Workers at once (default 4).")
@click.option("--dry-run", is_flag=True, help="Show what would run; change nothing.")
@json_option
@click.pass_context
def command(
    ctx: click.Context, change_id: str, max_parallel: int | None, dry_run: bool, as_json: bool
) -> None:
    """Run (or resume) CHANGE_ID's accepted plan with the configured worker."""
    project = opened(ctx, as_json)
    resume = _resume_command(ctx, change_id, max_parallel)
    progress = None if as_json or dry_run else Progress.attach(sys.stderr)
    try:
        answer = project.delivery.run_plan(change_id, max_parallel=max_parallel, dry_run=dry_run)
    except IthacaError as exc:
        _detach(progress)
        fail(exc, as_json)
    except KeyboardInterrupt as exc:  # a signal before the run began: nothing runs
        _detach(progress)
        number = int(getattr(exc, "signum", signal.SIGINT))
        click.echo(
            f"run-plan {change_id} was interrupted ({signal.Signals(number).name}) before any"
            f" worker started; nothing is running. Run it again: {resume}",
            err=True,
        )
        sys.exit(128 + number)
    _detach(progress)
    if answer.get("status") in ("paused", "interrupted"):
        answer["resume"] = resume
    show(answer, as_json, _render)
    if answer.get("status") == "paused":
        sys.exit(1)
    if answer.get("status") == "interrupted":
        sys.exit(128 + signal.Signals[answer["pause"]["signal"]].value)


def _resume_command(ctx: click.Context, change_id: str, max_parallel: int | None) -> str:
    """The exact command that resumes this run, as the user would type it here."""
    words = ["ithaca"]
    project_path = ctx.obj["project_path"]
    if os.path.realpath(project_path) != os.path.realpath("."):
        words += ["--project", project_path]
    words += ["run-plan", change_id]
    if max_parallel is not None:
        words += ["--max-parallel", str(max_parallel)]
    return shlex.join(words)


def _detach(progress: Progress | None) -> None:
    if progress is not None:
        progress.detach()


def shown_path(path: str) -> str:
    """``path`` relative to the current folder when it lies inside it, else absolute."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def printable(text: str) -> str:
    """``text`` without control characters (each becomes ``?``)."""
    return "".join(char if char.isprintable() else "?" for char in text)


class Progress(logging.Handler):
    """Shows run-plan's progress events on ``stream``: a live line rewritten in place on a
    terminal, plain lines elsewhere. Never raises: a display problem never stops a run."""

    def __init__(self, stream: TextIO, live: bool):
        super().__init__(logging.INFO)
        self.stream = stream
        self.live = live
        self.started = time.monotonic()
        self.drawn = 0  # the width of the live line on screen
        self.change = ""
        self.wave = ""
        self.running: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    @classmethod
    def attach(cls, stream: TextIO) -> Progress:
        handler = cls(stream, live=_is_terminal(stream))
        logger = logging.getLogger(PROGRESS_LOGGER)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        return handler

    def detach(self) -> None:
        logger = logging.getLogger(PROGRESS_LOGGER)
        logger.removeHandler(self)
        if not logger.handlers:
            logger.setLevel(logging.NOTSET)
            logger.propagate = True
        try:
            self._erase()
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, PROGRESS_ATTRIBUTE, None)
        if not isinstance(event, dict):
            return
        try:
            line = self._follow(event)
            if self.live:
                if line is not None:
                    self._erase()
                    self.stream.write(printable(line) + "\n")
                self._draw()
            elif line is not None:
                self.stream.write(printable(line) + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stream: the run goes on

    def handleError(self, record: logging.LogRecord) -> None:
        pass  # never a traceback for a display problem

    # --- the events ---------------------------------------------------------------------

    def _follow(self, event: dict[str, Any]) -> str | None:
        """Keep the state the live line shows; the event's permanent line, if any."""
        kind = event["event"]
        if kind == "run_started":
            self.change = event["change_id"]
            waves = event["waves"]
            tasks = sum(len(wave["tasks"]) for wave in waves)
            how = {"started": "started", "resumed": "resumed", "superseded": "started anew"}
            return (
                f"run-plan {self.change}: {how.get(event['how'], event['how'])} run"
                f" {event['run_id']} ({len(waves)} wave{'s' * (len(waves) != 1)},"
                f" {tasks} task{'s' * (tasks != 1)}) on {event['integration_branch']}"
            )
        if kind == "wave_started":
            self.wave = f"wave {event['wave']}/{event['waves']}"
            done = event["integrated"]
            earlier = f" ({', '.join(done)} integrated earlier)" if done else ""
            return f"{self.wave}: {', '.join(event['tasks'])}{earlier}"
        if kind == "task_started":
            self.running[event["task_id"]] = time.monotonic()
            line = f"  {event['task_id']} started (session {event['session_id']});"
            line += f" log: {shown_path(event['log'])}"
            return None if self.live else line
        if kind in ("task_finished", "task_skipped"):
            self.running.pop(event["task_id"], None)
            outcome = event["outcome"]
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            return "  " + _outcome(event)
        if kind == "wave_finished":
            reason = f": {event['reason']}" if event["reason"] else ""
            return f"{self.wave} {event['outcome']}{reason}"
        if kind == "stopping":
            tasks = event["tasks"]
            named = f" the workers of {', '.join(tasks)}" if tasks else " (no worker was running)"
            return (
                f"{event['signal']}: stopping{named}; their process groups get SIGTERM,"
                " then SIGKILL"
            )
        return None  # ``waiting``: only the live line moves

    # --- the live line ------------------------------------------------------------------

    def _draw(self) -> None:
        now = time.monotonic()
        parts = [f"run-plan {self.change}"]
        if self.wave:
            parts.append(self.wave)
        if self.running:
            parts.append(
                "running "
                + ", ".join(f"{task} {_clock(now - at)}" for task, at in self.running.items())
            )
        parts += [f"{count} {outcome}" for outcome, count in sorted(self.counts.items())]
        parts.append(_clock(now - self.started))
        width = max(shutil.get_terminal_size((80, 24)).columns - 1, 10)
        line = printable(" | ".join(parts))
        if len(line) > width:
            line = line[: width - 3] + "..."
        self.stream.write("\r" + line.ljust(self.drawn))
        self.drawn = len(line)

    def _erase(self) -> None:
        if self.live and self.drawn:
            self.stream.write("\r" + " " * self.drawn + "\r")
            self.drawn = 0


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    minutes, second = divmod(int(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}:{minute:02d}:{second:02d}" if hours else f"{minute}:{second:02d}"


def _outcome(event: dict[str, Any]) -> str:
    """One task's outcome: integrated, skipped with its reason, or paused with the log."""
    line = f"{event['task_id']} {event['outcome']}"
    if event["reason"]:
        line += f": {event['reason']}"
    if event["exit_code"] is not None:
        line += f" (worker exit {event['exit_code']})"
    if event["outcome"] == "paused" and event["log"]:
        line += f"; read its worker log: {shown_path(event['log'])}"
    return line


def _render(answer: dict[str, Any]) -> None:
    out = console()
    if answer.get("dry_run"):
        out.print(f"plan of {answer['change_id']} ({answer['checkpoint_id']}):", markup=False)
        for wave in answer["waves"]:
            listed = ", ".join(
                f"{task['id']} {task['status']} → {task['verdict']}"
                + (f" (blocked: {', '.join(task['blockers'])})" if task["blockers"] else "")
                for task in wave["tasks"]
            )
            out.print(f"  wave {wave['index']}: {listed}", markup=False)
        return
    run = answer["run"]
    out.print(
        f"run {run['id']} ({run['how']}) on {run['integration_branch']}: {answer['status']}",
        markup=False,
    )
    for wave in answer["waves"]:
        for task in wave["tasks"]:
            reason = f" ({task['reason']})" if task["reason"] else ""
            out.print(
                f"  wave {wave['index']} {task['id']}: {task['status']}{reason}", markup=False
            )
    pause = answer["pause"]
    if answer["status"] == "interrupted":
        stopped = pause["tasks"]
        workers = (
            f"the workers of {', '.join(stopped)} were stopped (their whole process groups)"
            if stopped
            else "no worker was running"
        )
        out.print(
            f"interrupted by {pause['signal']}: {workers}; the run is recorded as interrupted",
            markup=False,
        )
        out.print(f"resume with: {answer['resume']}", markup=False)
    elif pause is not None:
        task = f" (task {pause['task_id']})" if pause.get("task_id") else ""
        out.print(f"paused: {pause['reason']}{task}", markup=False)
        if pause.get("log"):
            out.print(f"  read the worker log: {shown_path(pause['log'])}", markup=False)
        out.print(f"  fix it, then run again: {answer['resume']}", markup=False)
    else:
        out.print(
            f"merge {run['integration_branch']} into your branch when you are ready", markup=False
        )
