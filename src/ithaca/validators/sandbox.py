"""Where and how a validator process runs: its folder, environment, namespaces, limits
and the supervision that ends it.

A validator is code an agent wrote, run to decide whether the agent's step worked, so it
runs with as little of the machine as the platform allows. Each run gets a fresh private
folder and an environment built from an allow-list (a secret in the server's environment
never reaches it), and sees the filesystem through a ``Confinement`` (``confine``:
read-only, Ithaca's state out of sight, only the run folder writable). Where ``unshare``
works it runs without network, and in its own PID namespace as that namespace's init, so
its death takes every descendant with it, even one that left the process group. Resource
limits come from a ``prlimit`` prefix (set before the runtime starts), else
``resource.prlimit`` right after the spawn, else none, which is reported. The process
gets its own session (``start_new_session``, never ``preexec_fn``: the MCP server is
threaded), so the whole group can be signalled: SIGTERM when the wall clock runs out,
SIGKILL after the grace period, and SIGKILL again once the leader has ended to catch
what it left behind, or as soon as supervision itself fails.

Being a namespace's init has two visible effects. Signals the validator sends itself, and
a SIGTERM it does not trap, are ignored, so a timed-out validator usually ends with the
SIGKILL after the grace period; faults (SIGSEGV and the like) still kill it. And the
kernel ignores an init's SIGXCPU, so the CPU limit's hard SIGKILL ends it instead: the
CPU time in the leader's resource usage tells that kill from an out-of-memory kill.

Output is read from both pipes at once so a chatty validator never blocks on a full pipe,
and only the first ``max_output_bytes`` of each stream are kept.
"""

from __future__ import annotations

import functools
import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ithaca.kernel.errors import Refused

RUN_PREFIX = "ithaca-run-"
# After the leader has ended, how long pipes still held by a straggler are read.
DRAIN_S = 1.0
# How much of the end of stderr is kept apart from the capped head, to classify the run.
TAIL_BYTES = 4096
PROBE_TIMEOUT_S = 10
_MIB = 1024 * 1024
# Places system tools live when the server's own PATH is sparse.
_SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
# util-linux ``unshare --fork`` re-raises its child's fatal signal on itself, except that
# for SIGKILL it fails and exits 1, complaining about sigprocmask as stderr's last line.
_UNSHARE_SIGKILL_WORD = b"sigprocmask"
# A confinement wrapper's exit code for a child killed by signal n: 128 + n, n < NSIG.
_SHELL_SIGNAL_BASE = 128
_SHELL_SIGNAL_END = _SHELL_SIGNAL_BASE + signal.NSIG


@dataclass(frozen=True)
class Isolation:
    """The command prefix that isolates a validator, and what it isolates."""

    prefix: tuple[str, ...]
    network: bool
    pid_namespace: bool


@dataclass(frozen=True)
class Confinement:
    """The command prefix that gives a validator its filesystem view (``confine``), run
    outermost. Like a shell, its wrapper reports a child killed by signal n as exit code
    128 + n: the outcome reads that back as the signal."""

    prefix: tuple[str, ...]


@dataclass(frozen=True)
class Limit:
    """One resource limit, named as ``prlimit`` names it."""

    name: str
    resource: int
    soft: int
    hard: int


@dataclass
class Outcome:
    """What happened to one validator process."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    cpu_exhausted: bool
    duration_ms: int
    stdout: str
    stderr: str
    stderr_tail: str
    network_isolated: bool
    diagnostics: list[dict[str, Any]] = field(default_factory=list)


# Runtimes put Unix sockets in the run's temp folder (tsx: ``tsx-0/1.pipe``), whose paths
# may not exceed 104-108 bytes: a deep TMPDIR gives way to /tmp.
MAX_TEMP_ROOT = 60


def run_root() -> str:
    """Where run folders go: the temp folder, unless it is too deep for sockets."""
    root = tempfile.gettempdir()
    return "/tmp" if len(root) > MAX_TEMP_ROOT and os.path.isdir("/tmp") else root


def make_run_folder() -> str:
    """A fresh, private (0700) folder under an unguessable name, in a temp root short
    enough for the sockets a runtime makes inside it."""
    folder = tempfile.mkdtemp(prefix=RUN_PREFIX, dir=run_root())
    os.chmod(folder, 0o700)
    return folder


def remove_run_folder(folder: str) -> None:
    """Remove a run folder, including parts the validator made read-only."""

    def unlock_and_retry(function: Any, path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            function(path)
        except OSError:
            return

    if sys.version_info >= (3, 12):
        shutil.rmtree(folder, onexc=unlock_and_retry)
    else:
        shutil.rmtree(folder, onerror=unlock_and_retry)


def environment(
    run_folder: str,
    *,
    language: str,
    settings: dict[str, Any],
    project_root: str | None,
) -> dict[str, str]:
    """The validator's whole environment: the allow-list (docs/ulysses.md, "Validators"),
    nothing else."""
    env = {name: os.environ[name] for name in ("LANG", "TZ") if name in os.environ}
    path = settings.get("path") or os.environ.get("PATH")
    if path:
        env["PATH"] = path
    observed = os.path.join(run_folder, "observed.json")
    verdict = os.path.join(run_folder, "verdict.json")
    env.update(
        {
            "HOME": os.path.join(run_folder, "home"),
            "TMPDIR": os.path.join(run_folder, "temp"),
            "TB_OBSERVED_PATH": observed,
            "ITHACA_OBSERVED_PATH": observed,
            "TB_VERDICT_PATH": verdict,
            "ITHACA_VERDICT_PATH": verdict,
            "TB_VALIDATE": "1",
            "ITHACA_RUN_DIR": run_folder,
        }
    )
    if project_root is not None:
        env["ITHACA_PROJECT_ROOT"] = project_root
    if language in ("javascript", "typescript"):
        env["NODE_OPTIONS"] = f"--max-old-space-size={settings['limits']['js_heap_mb']}"
    return env


def resource_limits(language: str, timeout_s: float, settings: dict[str, Any]) -> list[Limit]:
    """The resource limits for one run.

    The CPU hard limit sits a second above the soft one so the soft limit's SIGXCPU
    arrives first where it can; an address-space limit is set for Python and shell only,
    as V8 reserves large virtual ranges and Node's heap is capped through NODE_OPTIONS."""
    configured = settings["limits"]
    cpu = math.ceil(timeout_s) + 1
    chosen = [Limit("cpu", resource.RLIMIT_CPU, cpu, cpu + 1)]
    if language in ("python", "shell"):
        space = configured["address_space_mb"] * _MIB
        chosen.append(Limit("as", resource.RLIMIT_AS, space, space))
    size = configured["file_size_mb"] * _MIB
    chosen += [
        Limit("fsize", resource.RLIMIT_FSIZE, size, size),
        Limit("nofile", resource.RLIMIT_NOFILE, configured["open_files"], configured["open_files"]),
        Limit("core", resource.RLIMIT_CORE, 0, 0),
        Limit("nproc", resource.RLIMIT_NPROC, configured["processes"], configured["processes"]),
    ]
    return chosen


@functools.cache
def isolation() -> Isolation:
    """The first ``unshare`` prefix that works here, probed once per process.

    Root needs no user namespace; anyone else maps themselves to root inside one. A PID
    namespace is tried first, then network isolation alone."""
    unshare = system_tool("unshare")
    if unshare is None:
        return Isolation((), network=False, pid_namespace=False)
    base = (unshare, "-n") if os.geteuid() == 0 else (unshare, "-rn")
    true = system_tool("true") or "true"
    for extra, pid_namespace in ((("--pid", "--fork", "--kill-child"), True), ((), False)):
        prefix = (*base, *extra)
        if _succeeds([*prefix, true]):
            return Isolation(prefix, network=True, pid_namespace=pid_namespace)
    return Isolation((), network=False, pid_namespace=False)


@functools.cache
def system_tool(name: str) -> str | None:
    """The absolute path of a system utility, or None."""
    found = shutil.which(name) or shutil.which(name, path=_SYSTEM_PATH)
    return os.path.abspath(found) if found else None


def execute(
    command: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    limits: list[Limit],
    timeout_s: float,
    grace_s: float,
    max_output_bytes: int,
    require_network_isolation: bool,
    confinement: Confinement | None = None,
) -> Outcome:
    """Run ``command`` isolated, confined and limited, until it ends or the wall clock
    runs out.

    Raises ``VALIDATOR_ISOLATION_UNAVAILABLE`` (network isolation required but missing)
    and ``VALIDATOR_SPAWN_FAILED`` (the system refused to start the process)."""
    isolated = isolation()
    diagnostics = []
    if not isolated.network:
        if require_network_isolation:
            raise Refused(
                "VALIDATOR_ISOLATION_UNAVAILABLE",
                "validators.require_network_isolation is set and this machine cannot run a "
                "validator without network (unshare -n is unavailable or not permitted)",
            )
        diagnostics.append(
            {
                "code": "network_not_isolated",
                "message": "unshare could not create a network namespace here; the validator "
                "ran with this machine's network",
            }
        )
    prlimit = system_tool("prlimit")
    prefix = [*(confinement.prefix if confinement else ()), *isolated.prefix]
    if prlimit is not None:
        prefix += [prlimit, *(f"--{lim.name}={lim.soft}:{lim.hard}" for lim in limits), "--"]
    try:
        process = subprocess.Popen(
            [*prefix, *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise Refused(
            "VALIDATOR_SPAWN_FAILED",
            f"the system refused to start the validator: {exc.strerror or exc}",
            {"errno": exc.errno},
        ) from exc
    if prlimit is None and not _limit_after_spawn(process.pid, limits):
        diagnostics.append(
            {
                "code": "limits_not_enforced",
                "message": "neither prlimit nor resource.prlimit could limit the validator; "
                "it ran without CPU, memory, file or process limits",
            }
        )
    outcome = _supervise(
        process, limits, timeout_s, grace_s, max_output_bytes, isolated, confinement is not None
    )
    outcome.diagnostics = diagnostics
    return outcome


def _succeeds(argv: list[str]) -> bool:
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _limit_after_spawn(pid: int, chosen: list[Limit]) -> bool:
    """Apply the limits to a running process; False where the platform cannot.

    Only the fallback: a child that a namespace wrapper forked before this call keeps
    the old limits, which the ``prlimit`` prefix never allows."""
    apply = getattr(resource, "prlimit", None)
    if apply is None:
        return False
    try:
        for lim in chosen:
            apply(pid, lim.resource, (lim.soft, lim.hard))
    except ProcessLookupError:
        return True
    except (OSError, ValueError):
        return False
    return True


class _Capture:
    """One output stream: its first ``cap`` bytes, how many more came, and its end."""

    def __init__(self, cap: int):
        self.cap = cap
        self.head = bytearray()
        self.dropped = 0
        self.tail = bytearray()

    def add(self, chunk: bytes) -> None:
        room = max(self.cap - len(self.head), 0)
        self.head += chunk[:room]
        self.dropped += max(len(chunk) - room, 0)
        self.tail = (self.tail + chunk)[-TAIL_BYTES:]

    def drop_last_line(self) -> None:
        """Forget the final line (a wrapper's own complaint, not the validator's)."""
        buffers = (self.tail,) if self.dropped else (self.head, self.tail)
        for buffer in buffers:
            cut = buffer.rstrip(b"\n").rfind(b"\n") + 1
            del buffer[cut:]

    def last_line(self) -> bytes:
        return bytes(self.tail.rstrip(b"\n").rpartition(b"\n")[2])

    def text(self) -> str:
        text = self.head.decode("utf-8", "replace")
        if self.dropped:
            text += f"\n[ithaca: truncated {self.dropped} bytes]"
        return text


def _supervise(
    process: subprocess.Popen[bytes],
    chosen: list[Limit],
    timeout_s: float,
    grace_s: float,
    cap: int,
    isolated: Isolation,
    confined: bool,
) -> Outcome:
    assert process.stdout is not None and process.stderr is not None
    stdout, stderr = _Capture(cap), _Capture(cap)
    captures = {process.stdout.fileno(): stdout, process.stderr.fileno(): stderr}
    ended_r, ended_w = os.pipe()
    reaped: list[tuple[int, int, Any]] = []

    def reap() -> None:
        try:
            reaped.append(os.wait4(process.pid, 0))
        except ChildProcessError:
            return  # reaped elsewhere (SIGCHLD ignored by the host): its end is unknown
        finally:
            os.write(ended_w, b".")
            os.close(ended_w)

    started = time.monotonic()
    waiter = threading.Thread(target=reap, name="ithaca-validator-wait", daemon=True)
    waiter.start()
    selector = selectors.DefaultSelector()
    for fd in captures:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    selector.register(ended_r, selectors.EVENT_READ)
    term_at, kill_at = started + timeout_s, started + timeout_s + grace_s
    timed_out = killed = False
    ended_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if ended_at is None:
                if not timed_out and now >= term_at:
                    timed_out = True
                    _signal_group(process.pid, signal.SIGTERM)
                if not killed and now >= kill_at:
                    killed = True
                    _signal_group(process.pid, signal.SIGKILL)
                wake: float | None = None if killed else (kill_at if timed_out else term_at)
            else:
                if now >= ended_at + DRAIN_S or not selector.get_map():
                    break
                wake = ended_at + DRAIN_S
            for key, _ in selector.select(None if wake is None else max(wake - now, 0)):
                if key.fd == ended_r:
                    selector.unregister(ended_r)
                    ended_at = time.monotonic()
                    _signal_group(process.pid, signal.SIGKILL)
                    continue
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if chunk:
                    captures[key.fd].add(chunk)
                else:
                    selector.unregister(key.fd)
    finally:
        if ended_at is None:  # leaving early (an error, an interrupt): leave nothing running
            _signal_group(process.pid, signal.SIGKILL)
        waiter.join()
        selector.close()
        os.close(ended_r)
        process.stdout.close()
        process.stderr.close()
    assert ended_at is not None
    exit_code, signalled, cpu_seconds = _status(reaped)
    if confined and exit_code is not None and _SHELL_SIGNAL_BASE < exit_code < _SHELL_SIGNAL_END:
        signalled, exit_code = exit_code - _SHELL_SIGNAL_BASE, None
    process.returncode = -signalled if signalled else exit_code
    if (
        isolated.pid_namespace
        and exit_code == 1
        and stderr.last_line().startswith(b"unshare: ")
        and _UNSHARE_SIGKILL_WORD in stderr.last_line()
    ):
        stderr.drop_last_line()
        exit_code, signalled = None, signal.SIGKILL
    cpu_limit = next(lim.soft for lim in chosen if lim.name == "cpu")
    return Outcome(
        exit_code=exit_code,
        signal=signalled,
        timed_out=timed_out,
        cpu_exhausted=cpu_seconds >= cpu_limit,
        duration_ms=round((ended_at - started) * 1000),
        stdout=stdout.text(),
        stderr=stderr.text(),
        stderr_tail=stderr.tail.decode("utf-8", "replace"),
        network_isolated=isolated.network,
    )


def _status(reaped: list[tuple[int, int, Any]]) -> tuple[int | None, int | None, float]:
    """(exit code, signal, CPU seconds) of the reaped leader; an unknown end is exit 255."""
    if not reaped:
        return 255, None, 0.0
    _, status, usage = reaped[0]
    cpu = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status), cpu
    return os.WEXITSTATUS(status), None, cpu


def _signal_group(group: int, number: int) -> None:
    try:
        os.killpg(group, number)
    except (ProcessLookupError, PermissionError):
        return
