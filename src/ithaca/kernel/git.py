"""Git, run: the one module that starts the ``git`` binary, and only with Ithaca's settings.

Every part of Ithaca that asks Git something asks through ``run`` (or ``run_text``), so
how Git starts, how long it may take, what it may obey and what a caller learns when it
cannot answer are decided in one place. ``git`` is looked up on this process's ``PATH``
and started with ``os.posix_spawnp``, never through a shell, with the signals Python
ignores (``SIGPIPE``, ``SIGXFSZ``) back at their defaults, as ``subprocess`` starts it. Its
standard input is ``input`` through a pipe (``/dev/null`` without one); both outputs are
read through pipes with ``select.poll``, under one time cap for the whole run. Hooks ask
Git too (the end-of-turn critic's working-tree fingerprint, the team files' blobs), and
``subprocess`` would cost a hook process the import of ``signal``, ``threading`` and
their dependencies (hook path: standard library only, and little of it).

Ithaca's hooks and its MCP server run as the user, outside the agent's sandbox, in a
repository the agent writes. Git obeys settings that start programs (a file-system
monitor, hooks, filters, diff drivers, pagers, signing programs), and a repository the
agent made or configured would otherwise choose them. So no setting that starts a
program comes from the repository:

- the inherited ``GIT_*`` variables are dropped (a caller names the few it sets);
- ``FORCED`` settings are given on the command line, which outranks every file: no
  file-system monitor, no hooks, no pager, editor, external diff, credential helper,
  signing, automatic maintenance or transport, and no recursion into submodules;
- status and the diff commands are told ``--ignore-submodules=dirty`` (a ``.gitmodules``
  entry would otherwise send them into an embedded repository, whose settings are its
  own), and the diff commands, log and show ``--no-ext-diff --no-textconv``. ``git add``
  has no such option: a caller excludes the submodules from its pathspec;
- before a command that reads the working tree through attributes (``CONTENT_FREE``
  lists the ones that do not), the settings Git would read are listed with their scope,
  and every program a *named* driver would start (``filter.<name>.clean``, ``smudge``,
  ``process``, ``diff.<name>.textconv``, ``merge.<name>.driver``, …) that comes from the
  repository (``local``, ``worktree``) is given back on the command line as the user's
  own files (``system``, ``global``) set it, or empty, which switches it off. The user's
  own filters, such as Git LFS's, keep working.

The repository's ``.git/config`` and ``.git/hooks`` are read-only to the agent in the
sandboxed profiles (``hosts/install/sandbox.py``), so what the listing reads is what the
command then reads. A caller learns the exit code and what Git wrote (``Result``, bytes;
``TextResult``, decoded as ``subprocess`` decodes in text mode); ``OSError`` when Git
cannot start (``FileNotFoundError`` without one on the ``PATH``; ``UnsafeSettings`` when a
setting cannot be neutralised); ``TimedOut``, an ``OSError`` too, when Git outlasted its
time cap and was killed.
"""

from __future__ import annotations

import _signal  # the C module behind ``signal``, which would import ``enum``
import io
import os
import select
import time

from ithaca.kernel import deadline as hook_deadline

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

CHUNK = 65536
# The signals Python ignores and ``subprocess`` restores for its children (SIGXFZ where
# the platform has it).
RESTORED_SIGNALS = tuple(
    getattr(_signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(_signal, name)
)
# Given on every command line, which outranks every file Git reads.
FORCED = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=:",
    "sequence.editor=:",
    "core.alternateRefsCommand=",
    "credential.helper=",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "status.submoduleSummary=false",
    "diff.ignoreSubmodules=dirty",
    "protocol.allow=never",  # no transport: no ssh command, proxy or remote helper
    "protocol.file.allow=always",  # but a local clone or fetch (the demo's team step)
)
FORCED_ARGS = ("--no-pager", *(arg for setting in FORCED for arg in ("-c", setting)))
# What Ithaca itself sets in Git's environment; every inherited GIT_* variable is dropped.
ENVIRONMENT = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",  # a status never rewrites the user's index
    "GIT_NO_REPLACE_OBJECTS": "1",  # objects are what they are, not what refs/replace says
    "GIT_NO_LAZY_FETCH": "1",  # a partial clone fetches nothing behind Ithaca's back
}
# Commands that read no working-tree file through its attributes, so no named driver.
CONTENT_FREE = frozenset(
    {
        "branch", "bundle", "check-attr", "check-ignore", "commit-tree", "config",
        "for-each-ref", "init", "ls-tree", "merge-base", "mktree", "rev-list", "rev-parse",
        "show-ref", "symbolic-ref", "update-ref", "var", "write-tree",
    }
)  # fmt: skip
# Flags a command is given unless its caller chose otherwise.
SUBMODULES_DIRTY = "--ignore-submodules=dirty"
NO_DRIVERS = ("--no-ext-diff", "--no-textconv")
ADDED = {
    "status": (SUBMODULES_DIRTY,),
    "diff": (SUBMODULES_DIRTY, *NO_DRIVERS),
    "diff-index": (SUBMODULES_DIRTY, *NO_DRIVERS),
    "diff-files": (SUBMODULES_DIRTY, *NO_DRIVERS),
    "log": NO_DRIVERS,
    "show": NO_DRIVERS,
}
# Global options that take the next argument.
GLOBAL_WITH_VALUE = frozenset({"-c", "-C", "--git-dir", "--work-tree", "--namespace"})
# Settings whose value is a program a named driver starts: (section, last part of the
# key), the section and key lower-cased as Git lists them.
DRIVER_PROGRAMS = frozenset(
    {
        ("filter", "clean"), ("filter", "smudge"), ("filter", "process"),
        ("diff", "textconv"), ("diff", "command"), ("merge", "driver"),
        ("gpg", "program"), ("gpg", "defaultkeycommand"), ("credential", "helper"),
    }
)  # fmt: skip
PROTECTED_SCOPES = frozenset({"system", "global", "command"})


class UnsafeSettings(OSError):
    """A setting from the repository that starts a program cannot be given back on the
    command line (its name holds ``=``): Git is not run."""


class TimedOut(TimeoutError):
    """Git outlasted its time cap and was killed; worded as ``subprocess`` words it."""


class Result:
    """A finished ``git``: its exit code and what it wrote, as bytes."""

    __slots__ = ("returncode", "stdout", "stderr")
    returncode: int
    stdout: bytes
    stderr: bytes

    def __init__(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


class TextResult:
    """A finished ``git`` with its output decoded (see ``decode``)."""

    __slots__ = ("returncode", "stdout", "stderr")
    returncode: int
    stdout: str
    stderr: str

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def run(
    args: Sequence[str],
    *,
    cwd: str | None = None,
    timeout: float | None,
    input: bytes = b"",
    env: Mapping[str, str] | None = None,
    git_env: Mapping[str, str] | None = None,
) -> Result:
    """Run ``git ARGS`` (``git -C cwd ARGS`` with ``cwd``) with Ithaca's settings, in
    ``env`` (this process's environment by default) without its ``GIT_*`` variables,
    plus the Git variables ``git_env`` names; ``input`` on its standard input; killed
    after ``timeout`` seconds for the whole run (``TimedOut``), never when it is None.
    In a hook, the hook's own deadline (``kernel.deadline``) bounds ``timeout`` too, and
    Git killed at it is recorded there (the hook then fails closed)."""
    cut_by_deadline = hook_deadline.shortens(timeout)
    timeout = hook_deadline.bounded(timeout)
    try:
        return _run(args, cwd, timeout, input, env, git_env)
    except TimedOut:
        if cut_by_deadline:
            hook_deadline.mark_cut_short()
        raise


def _run(
    args: Sequence[str],
    cwd: str | None,
    timeout: float | None,
    input: bytes,
    env: Mapping[str, str] | None,
    git_env: Mapping[str, str] | None,
) -> Result:
    deadline = None if timeout is None else time.monotonic() + timeout
    environment = {
        name: value
        for name, value in (os.environ if env is None else env).items()
        if not name.startswith("GIT_")
    }
    environment.update(ENVIRONMENT)
    environment.update(git_env or {})
    where = ("-C", cwd) if cwd is not None else ()
    given = list(args)
    at = _subcommand_at(given)
    overrides: list[str] = []
    if at is not None:
        name, rest = given[at], given[at + 1 :]
        given[at + 1 : at + 1] = [flag for flag in ADDED.get(name, ()) if not _chosen(flag, rest)]
        if not _content_free(name, rest):
            overrides = _driver_overrides(where, environment, deadline, timeout)
    return _spawn(
        ["git", *where, *FORCED_ARGS, *overrides, *given], environment, input, deadline, timeout
    )


def run_text(
    args: Sequence[str],
    *,
    cwd: str | None = None,
    timeout: float | None,
    input: bytes = b"",
    env: Mapping[str, str] | None = None,
    git_env: Mapping[str, str] | None = None,
) -> TextResult:
    """``run``, both outputs decoded (``decode``)."""
    done = run(args, cwd=cwd, timeout=timeout, input=input, env=env, git_env=git_env)
    return TextResult(done.returncode, decode(done.stdout), decode(done.stderr))


def decode(data: bytes) -> str:
    """``data`` as ``subprocess`` decodes a text-mode output: in the locale's encoding,
    strictly (``UnicodeDecodeError``), with ``\\r\\n`` and ``\\r`` read as ``\\n``."""
    encoding = io.TextIOWrapper(io.BytesIO()).encoding  # the locale's, as text mode finds it
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


def _subcommand_at(args: list[str]) -> int | None:
    """Where the Git command's name stands in ``args``, past the global options."""
    at = 0
    while at < len(args):
        if args[at] in GLOBAL_WITH_VALUE:
            at += 2
        elif args[at].startswith("-"):
            at += 1
        else:
            return at
    return None


def _chosen(flag: str, rest: list[str]) -> bool:
    """Whether the caller already decides what ``flag`` decides."""
    if flag == SUBMODULES_DIRTY:
        return any(arg.startswith("--ignore-submodules") for arg in rest)
    return flag in rest


def _content_free(name: str, rest: list[str]) -> bool:
    """Whether ``git NAME REST`` reads no working-tree file through its attributes."""
    if name in CONTENT_FREE:
        return True
    if name == "ls-files":  # only --modified compares contents
        return not any(
            arg == "--modified" or (arg[:1] == "-" and arg[1:2] != "-" and "m" in arg)
            for arg in rest
        )
    if name == "cat-file":
        return "--filters" not in rest and "--textconv" not in rest
    if name == "hash-object":
        return "--no-filters" in rest or (
            "--stdin" in rest and not any(arg.startswith("--path") for arg in rest)
        )
    if name == "worktree":
        return rest[:1] in (["list"], ["prune"])
    return False


def _driver_overrides(
    where: tuple[str, ...],
    environment: dict[str, str],
    deadline: float | None,
    timeout: float | None,
) -> list[str]:
    """``-c KEY=VALUE`` for each program a named driver would start that the repository's
    settings (not the user's own files) choose: the user's value, or empty (none)."""
    listing = ["git", *where, *FORCED_ARGS, "config", "--list", "-z"]
    done = _spawn([*listing, "--show-scope"], environment, b"", deadline, timeout)
    scoped = done.returncode == 0 or b"show-scope" not in done.stderr
    if not scoped:  # Git before 2.26: every such setting is taken as the repository's
        done = _spawn(listing, environment, b"", deadline, timeout)
    if done.returncode != 0:
        raise UnsafeSettings(f"git config --list failed: {_lossy(done.stderr)}")
    fields = done.stdout.split(b"\0")[:-1]
    pairs = (
        zip(fields[0::2], fields[1::2], strict=False)
        if scoped
        else ((b"", field) for field in fields)
    )
    protected: dict[str, str] = {}
    exposed: list[str] = []
    for scope, entry in pairs:
        raw_key, _, raw_value = entry.partition(b"\n")
        key = os.fsdecode(raw_key)
        if not _starts_program(key):
            continue
        if os.fsdecode(scope) in PROTECTED_SCOPES:
            protected[key] = os.fsdecode(raw_value)
        elif key not in exposed:
            exposed.append(key)
    unsafe = [key for key in exposed if "=" in key]
    if unsafe:
        raise UnsafeSettings(f"the repository sets {unsafe[0]!r}, which Ithaca cannot switch off")
    return [arg for key in exposed for arg in ("-c", f"{key}={protected.get(key, '')}")]


def _starts_program(key: str) -> bool:
    """Whether the setting ``key`` names a program a named driver starts."""
    section = key[: key.find(".")].lower()
    return (section, key[key.rfind(".") + 1 :].lower()) in DRIVER_PROGRAMS


def _lossy(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip()


def _spawn(
    argv: list[str],
    environment: Mapping[str, str],
    input: bytes,
    deadline: float | None,
    timeout: float | None,
) -> Result:
    """Start ``argv``, exchange its input and outputs until ``deadline``, reap it."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    in_read, in_write = os.pipe() if input else (-1, -1)
    stdin = (
        (os.POSIX_SPAWN_DUP2, in_read, 0)
        if input
        else (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)
    )
    actions = [stdin, (os.POSIX_SPAWN_DUP2, out_write, 1), (os.POSIX_SPAWN_DUP2, err_write, 2)]
    try:
        pid = os.posix_spawnp(
            "git", argv, environment, file_actions=actions, setsigdef=RESTORED_SIGNALS
        )
    except OSError:
        _close(out_read, err_read, in_write)
        raise
    finally:
        _close(out_write, err_write, in_read)
    try:
        written = _exchange(out_read, err_read, in_write, input, deadline)
    except BaseException:
        _kill(pid)
        raise
    if written is None:
        _kill(pid)
        raise TimedOut(f"Command '{argv}' timed out after {timeout} seconds")
    _, status = os.waitpid(pid, 0)
    return Result(os.waitstatus_to_exitcode(status), *written)


def _exchange(
    out_read: int, err_read: int, in_write: int, input: bytes, deadline: float | None
) -> tuple[bytes, bytes] | None:
    """Feed ``input`` and read both outputs until Git closes them, then close the pipes;
    None when the deadline came first. Input Git stops reading is dropped."""
    chunks: dict[int, list[bytes]] = {out_read: [], err_read: []}
    waiting = select.poll()
    waiting.register(out_read, select.POLLIN)
    waiting.register(err_read, select.POLLIN)
    open_ends = [out_read, err_read]
    if input:
        waiting.register(in_write, select.POLLOUT)
        open_ends.append(in_write)
    pending = memoryview(input)
    try:
        while open_ends:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            ready = waiting.poll(None if left is None else left * 1000)
            if not ready:
                return None
            for fd, _ in ready:
                if fd == in_write:
                    pending = _feed(in_write, pending)
                    done = not pending
                else:
                    chunk = os.read(fd, CHUNK)
                    chunks[fd].append(chunk)
                    done = not chunk
                if done:
                    waiting.unregister(fd)
                    open_ends.remove(fd)
                    os.close(fd)
    finally:
        _close(*open_ends)
    return b"".join(chunks[out_read]), b"".join(chunks[err_read])


def _feed(in_write: int, pending: memoryview) -> memoryview:
    """What is left of ``pending`` after one write that cannot block; nothing when Git
    closed its input."""
    try:
        return pending[os.write(in_write, pending[: select.PIPE_BUF]) :]
    except BrokenPipeError:
        return pending[:0]


def _kill(pid: int) -> None:
    os.kill(pid, _signal.SIGKILL)
    os.waitpid(pid, 0)


def _close(*fds: int) -> None:
    """Close the pipe ends among ``fds`` (-1 stands for none)."""
    for fd in fds:
        if fd >= 0:
            os.close(fd)
