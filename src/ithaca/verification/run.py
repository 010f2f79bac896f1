"""One verification run: the project's test runner, run by Ithaca in the validator sandbox.

The run is Ithaca's, not the agent's, so nothing the agent's shell set up reaches it:

- the view is the validators' (``validators.confine``): the project read-only, Ithaca's
  state and the hosts' wiring out of sight, no network, a fresh run folder the only
  writable place; ``overlay`` lays files read-only over the project (the runner's
  configuration as the turn found it; None hides a file the turn added behind an empty
  one);
- the environment is built, never inherited: ``LANG``/``TZ``, the ``PATH`` of
  ``validators.path`` or Ithaca's own, ``HOME`` and ``TMPDIR`` in the run folder, bytecode
  neither written nor read from the project (``PYTHONPYCACHEPREFIX`` points at the empty
  run folder, so a ``.pyc`` planted in ``__pycache__`` is never loaded), ``PYTEST_ADDOPTS``
  set by Ithaca alone, tools' caches and outputs redirected into the run folder, the
  toolchains' own homes (Rust's, Go's module cache) read-only, ``CI=1``; no
  ``PYTHONPATH``, ``PYTHONSTARTUP``, ``NODE_OPTIONS``, ``VIRTUAL_ENV``, ``LD_PRELOAD``;
- the counts come from a report Ithaca asked the runner for (``reports``): pytest's JUnit
  XML through ``PYTEST_ADDOPTS`` (which also reaches a pytest that tox, nox, make or a
  configured line start), ``python -m unittest`` run through Ithaca's reporter
  (``unittest_report``), ``go test -json``. What the tests print is only the failure
  message's tail.

Status: "timeout"; "passed" (exit 0, at least one test ran and none failed, or exit 0 of a
runner that gives no report: counts None, "not counted"); "no_tests" (the report shows no
test ran, every one skipped or none collected, whatever the exit status said); "failed";
"error" (Ithaca could not hold the run to its terms: a report it asked for and did not
get after exit 0, an overlay it cannot lay). A sandbox that cannot run raises as a
validator run does (``VALIDATOR_ISOLATION_UNAVAILABLE``, ``VALIDATOR_SPAWN_FAILED``), and
a runner's program that is not on the PATH raises ``VALIDATOR_RUNTIME_MISSING``.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import signal
from dataclasses import dataclass, replace
from pathlib import Path

from ithaca.kernel.errors import Refused, invalid_field
from ithaca.validators import confine, runtimes, sandbox
from ithaca.verification import bytecode, reports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ithaca.verification.runners import Runner

TAIL_LINES = 20
TAIL_CHARS = 1500
# pytest's exit status, and Ithaca's unittest reporter's, when no test was collected.
NO_TESTS_EXIT = 5
UNITTEST_REPORTER = Path(__file__).with_name("unittest_report.py")
JUNIT = "junit.xml"
REPORT_FILES = {"junit": JUNIT, "unittest": "unittest.json", "go-json": "go-test.json"}
PYTHON_RUNNERS = ("pytest", "unittest")


@dataclass(frozen=True)
class Outcome:
    """What one verification run showed."""

    status: str  # "passed" | "failed" | "no_tests" | "timeout" | "error"
    exit_code: int | None
    counts: dict[str, int] | None  # reports.COUNTS; None: the runner gave no report
    tests: dict[str, str]  # test id -> "passed" | "failed" | "error" | "skipped"
    duration_s: float
    tail: str  # the end of the output, for a failure message
    reason: str  # one sentence: why this status


def in_sandbox(
    root: str,
    runner: Runner,
    *,
    timeout_s: float,
    settings: Mapping[str, Any],
    overlay: Mapping[str, bytes | None] | None = None,
) -> Outcome:
    """Run ``runner`` on the project at ``root`` in the validator sandbox, for at most
    ``timeout_s`` (then its grace), and say what it showed.

    ``settings`` is ``config["validators"]``. ``overlay``: project-relative POSIX path ->
    the bytes the run sees there, or None for a file that must look empty (it did not
    exist when the turn began)."""
    root = os.path.abspath(root)
    values = dict(settings)
    laid = _check_overlay(root, overlay or {})
    if isinstance(laid, Outcome):
        return laid
    run_folder = sandbox.make_run_folder()
    stage = sandbox.make_run_folder()  # read-only to the run: nothing in it can be rewritten
    try:
        for name in ("home", "temp", "pycache"):
            os.mkdir(os.path.join(run_folder, name), 0o700)
        binds = _lay_overlay(stage, laid)
        env = environment(run_folder, values, os.path.realpath(root))
        command, report_path = _command(root, runner, run_folder, stage, env["PATH"])
        compiled = None
        if confine.bubblewrap() is not None:
            compiled = bytecode.cache_for(command[0], runner.name, root)
        if compiled is not None:  # read-only in the run: it reads it, and cannot write it
            seen_at = os.path.join(stage, "pycache")
            os.mkdir(seen_at)
            binds.append((compiled, seen_at))
            env["PYTHONPYCACHEPREFIX"] = seen_at
        confinement, unconfined = confine.confinement(run_folder, root, values, binds)
        if confinement is None and binds:
            return _error(
                "the runner configuration cannot be laid back without bubblewrap"
                " (validators.require_filesystem_isolation is false here), so the run"
                " would not be the turn's"
            )
        language = "python" if runner.name in PYTHON_RUNNERS else "verification"
        outcome = sandbox.execute(
            command,
            env=env,
            cwd=root,
            limits=_limits(language, timeout_s, values),
            timeout_s=timeout_s,
            grace_s=values["grace_s"],
            max_output_bytes=values["max_output_bytes"],
            require_network_isolation=values["require_network_isolation"],
            confinement=confinement,
        )
        report, problem, raw = _read_report(runner, run_folder, report_path)
    finally:
        sandbox.remove_run_folder(run_folder)
        sandbox.remove_run_folder(stage)
    output = outcome.stdout + outcome.stderr
    if runner.report == "go-json" and raw is not None:
        output = reports.go_output(raw, 64 * TAIL_CHARS) + outcome.stderr
    expected = report_path is not None
    judged = _judge(runner, outcome, report, problem, expected, timeout_s, _tail(output))
    if unconfined:
        judged = replace(judged, reason=f"{judged.reason} (run unconfined: {UNCONFINED})")
    return judged if report is None else replace(judged, tests=dict(report.tests))


UNCONFINED = "validators.require_filesystem_isolation is false and bubblewrap is missing"


def environment(
    run_folder: str, settings: Mapping[str, Any], root: str | None = None
) -> dict[str, str]:
    """The run's whole environment, built from nothing but Ithaca's choices (see the
    module's docstring); ``run_folder`` holds everything a tool writes. Its ``PATH`` keeps
    no folder of the project at ``root`` and no relative entry: the agent writes there."""
    env = {name: os.environ[name] for name in ("LANG", "TZ") if name in os.environ}
    junit = os.path.join(run_folder, JUNIT)
    env.update(
        {
            "PATH": _outside(runtimes.search_path(dict(settings)), root),
            "HOME": os.path.join(run_folder, "home"),
            "TMPDIR": os.path.join(run_folder, "temp"),
            "CI": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPYCACHEPREFIX": os.path.join(run_folder, "pycache"),
            "PYTHONNOUSERSITE": "1",
            "PYTEST_ADDOPTS": f"-p no:cacheprovider --junitxml={shlex.quote(junit)}",
            "TOX_WORK_DIR": os.path.join(run_folder, "tox"),
            "CARGO_TARGET_DIR": os.path.join(run_folder, "cargo-target"),
            "CARGO_NET_OFFLINE": "true",
            "GOCACHE": os.path.join(run_folder, "go-build"),
            "GOPATH": os.path.join(run_folder, "go"),
            "GOTOOLCHAIN": "local",
            "GOPROXY": "off",
            "GOTELEMETRY": "off",
            "NPM_CONFIG_UPDATE_NOTIFIER": "false",
            "NPM_CONFIG_FUND": "false",
            "NPM_CONFIG_AUDIT": "false",
            "NO_UPDATE_NOTIFIER": "1",
        }
    )
    env.update(_toolchain_homes())
    return env


def _outside(path: str, root: str | None) -> str:
    """``path`` without relative entries and, when ``root`` is given, its folders."""
    kept = []
    for entry in path.split(os.pathsep):
        if not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if root is not None and (real == root or real.startswith(root.rstrip(os.sep) + os.sep)):
            continue
        kept.append(entry)
    return os.pathsep.join(kept)


def _toolchain_homes() -> dict[str, str]:
    """Where Rust's toolchains and Go's module cache live for the user running Ithaca,
    read (never written) by the run: a fresh HOME would hide them, and without network
    nothing could fetch them again."""
    home = os.path.expanduser("~")
    found = {}
    for name, default in (
        ("RUSTUP_HOME", os.path.join(home, ".rustup")),
        ("CARGO_HOME", os.path.join(home, ".cargo")),
        (
            "GOMODCACHE",
            os.path.join(os.environ.get("GOPATH") or os.path.join(home, "go"), "pkg", "mod"),
        ),
    ):
        path = os.environ.get(name) or default
        if os.path.isdir(path):
            found[name] = path
    return found


def _check_overlay(
    root: str, overlay: Mapping[str, bytes | None]
) -> list[tuple[str, bytes | None]] | Outcome:
    """The overlay's (destination, bytes) pairs, or the error outcome of one that cannot
    be laid: a saved file whose path no longer holds a file, a hidden one replaced by
    something else than a file."""
    laid: list[tuple[str, bytes | None]] = []
    for relative, data in sorted(overlay.items()):
        parts = relative.split("/")
        if not relative or relative.startswith("/") or ".." in parts or "" in parts:
            raise invalid_field("/overlay", "NOT_A_RELATIVE_PATH", f"overlay path {relative!r}")
        target = os.path.join(root, *parts)
        if data is None and not os.path.lexists(target):
            continue
        if not os.path.isfile(target):
            what = "was removed" if not os.path.lexists(target) else "is no longer a file"
            return _error(
                f"{relative} {what} since the turn began, so the runner configuration"
                " cannot be laid back over it for the run"
            )
        laid.append((os.path.realpath(target), data))
    return laid


def _lay_overlay(stage: str, laid: list[tuple[str, bytes | None]]) -> list[tuple[str, str]]:
    """Write the overlay's files into ``stage``; the (source, destination) binds."""
    binds = []
    empty = os.path.join(stage, "empty")
    for number, (destination, data) in enumerate(laid):
        source = empty if data is None else os.path.join(stage, f"overlay-{number}")
        if not os.path.exists(source):
            with open(source, "wb") as handle:
                handle.write(data or b"")
            os.chmod(source, 0o444)
        binds.append((source, destination))
    return binds


def _command(
    root: str, runner: Runner, run_folder: str, stage: str, path: str
) -> tuple[list[str], str | None]:
    """The argv that runs ``runner`` asking for its report, and the report's path."""
    command = list(runner.command)
    kind = runner.report
    report = os.path.join(run_folder, REPORT_FILES[kind]) if kind else None
    if kind == "unittest":
        if len(command) >= 3 and command[1:3] == ["-m", "unittest"] and report is not None:
            reporter = os.path.join(stage, UNITTEST_REPORTER.name)
            shutil.copyfile(UNITTEST_REPORTER, reporter)
            command = [command[0], reporter, report, *command[3:]]
        else:  # not a ``python -m unittest`` line: no reporter can be put in
            report = None
    elif kind == "go-json" and report is not None:
        if "-json" not in command:
            command.insert(command.index("test") + 1 if "test" in command else 1, "-json")
        shell = sandbox.system_tool("sh") or "/bin/sh"
        wrapper = 'report=$1; shift; exec "$@" >"$report"'
        command = [shell, "-c", wrapper, "sh", report, _program(root, runner, command[0], path),
                   *command[1:]]  # fmt: skip
        return command, report
    command[0] = _program(root, runner, command[0], path)
    return command, report


def _program(root: str, runner: Runner, program: str, path: str) -> str:
    """The absolute path of the runner's program: on the run's PATH, or in the project
    (``.venv/bin/python``)."""
    found: str | None
    if "/" in program:
        found = os.path.join(root, program)
        if not (os.path.isfile(found) and os.access(found, os.X_OK)):
            found = None
    else:
        found = shutil.which(program, path=path)
    if found is None:
        raise Refused(
            "VALIDATOR_RUNTIME_MISSING",
            f"{program} (the {runner.name} runner) is not an executable"
            + (" in the project" if "/" in program else " on the PATH Ithaca runs tests with"),
            {"runner": runner.name, "program": program},
        )
    return os.path.abspath(found)


def _limits(language: str, timeout_s: float, settings: Mapping[str, Any]) -> list[sandbox.Limit]:
    """The validators' limits, with CPU time for every core over the whole wall clock
    (a test runner may keep several busy in one process)."""
    chosen = sandbox.resource_limits(language, timeout_s, dict(settings))
    cpu = math.ceil(timeout_s) * max(os.cpu_count() or 1, 1) + 1
    return [replace(lim, soft=cpu, hard=cpu + 1) if lim.name == "cpu" else lim for lim in chosen]


def _read_report(
    runner: Runner, run_folder: str, report_path: str | None
) -> tuple[reports.Report | None, str, bytes | None]:
    """(the report, why there is none, its bytes). A runner without a report of its own
    is read from the JUnit file ``PYTEST_ADDOPTS`` offered, when a pytest it ran wrote it."""
    kind, path = runner.report, report_path
    if kind is None or path is None:
        kind, path = "junit", os.path.join(run_folder, JUNIT)
        if not os.path.lexists(path):
            return None, "", None
    try:
        raw = reports.read_bytes(path)
        return reports.parse(kind, raw), "", raw
    except reports.ReportError as exc:
        return None, str(exc), None


def _judge(
    runner: Runner,
    outcome: sandbox.Outcome,
    report: reports.Report | None,
    problem: str,
    expected: bool,
    timeout_s: float,
    tail: str,
) -> Outcome:
    code = outcome.exit_code
    counts = dict(report.counts) if report is not None else None

    def said(status: str, reason: str) -> Outcome:
        return Outcome(status, code, counts, {}, outcome.duration_ms / 1000, tail, reason)

    if outcome.timed_out:
        return said("timeout", f"the run did not end within {timeout_s:g} s and was stopped")
    if code is None:
        why = "it ran out of CPU time" if outcome.cpu_exhausted else "it was killed"
        return said("failed", f"{why} (signal {_signal_name(outcome.signal)})")
    if report is not None:
        numbers = report.counts
        summary = (
            f"{numbers['passed']} passed, {numbers['failed']} failed, {numbers['errors']}"
            f" errors, {numbers['skipped']} skipped of {numbers['collected']} (from the report)"
        )
        if numbers["failed"] or numbers["errors"]:
            return said("failed", f"exit {code}; {summary}")
        if report.executed == 0:
            if code in (0, NO_TESTS_EXIT):
                return said("no_tests", f"no test ran: {summary}")
            return said("failed", f"exit {code} and no test ran: {summary}")
        if code == 0:
            return said("passed", summary)
        return said("failed", f"exit {code} although {summary}")
    if expected:
        if code == NO_TESTS_EXIT and runner.report in ("junit", "unittest"):
            return said("no_tests", f"exit {code}: no test was collected ({problem})")
        if code == 0:
            return said(
                "error",
                f"the runner exited 0 but {problem}, so no test is known to have run",
            )
        return said("failed", f"exit {code} ({problem})")
    if code == 0:
        note = f" ({problem})" if problem else ""
        return said(
            "passed",
            f"exit 0; {runner.name} gives no report Ithaca reads, so the tests were not"
            f" counted{note}",
        )
    return said("failed", f"exit {code}")


def _error(reason: str) -> Outcome:
    return Outcome("error", None, None, {}, 0.0, "", reason)


def _tail(output: str) -> str:
    lines = output.rstrip().splitlines()[-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:]


def _signal_name(number: int | None) -> str:
    try:
        return signal.Signals(number or 0).name
    except ValueError:
        return str(number)
