"""Git, run: the one module that starts the ``git`` binary.

Every part of Ithaca that asks Git something asks through ``run`` (or ``run_text``), so
how Git starts, how long it may take and what a caller learns when it cannot answer are
decided in one place. ``git`` is looked up on this process's ``PATH`` and started with
``os.posix_spawnp``, never through a shell, with the signals Python ignores (``SIGPIPE``,
``SIGXFSZ``) back at their defaults, as ``subprocess`` starts it. Its standard input is
``input`` through a pipe (``/dev/null`` without one); both outputs are read through pipes
with ``select.poll``, under one time cap for the whole run. Hooks ask Git too (the end-of-turn
critic's working-tree fingerprint, the team files' blobs), and ``subprocess`` would cost a
hook process the import of ``signal``, ``threading`` and their dependencies (hook path:
standard library only, and little of it).

A caller learns the exit code and what Git wrote (``Result``, bytes; ``TextResult``,
decoded as ``subprocess`` decodes in text mode); ``OSError`` when Git cannot start
(``FileNotFoundError`` without one on the ``PATH``); ``TimedOut``, an ``OSError`` too,
when Git outlasted its time cap and was killed.
"""

from __future__ import annotations

import _signal  # the C module behind ``signal``, which would import ``enum``
import io
import os
import select
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

CHUNK = 65536
# The signals Python ignores and ``subprocess`` restores for its children (SIGXFZ where
# the platform has it).
RESTORED_SIGNALS = tuple(
    getattr(_signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(_signal, name)
)


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
) -> Result:
    """Run ``git ARGS`` (``git -C cwd ARGS`` with ``cwd``) in ``env`` (this process's
    environment by default), ``input`` on its standard input; killed after ``timeout``
    seconds (``TimedOut``), never when it is None."""
    argv = ["git", *(("-C", cwd) if cwd is not None else ()), *args]
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
            "git",
            argv,
            os.environ if env is None else env,
            file_actions=actions,
            setsigdef=RESTORED_SIGNALS,
        )
    except OSError:
        _close(out_read, err_read, in_write)
        raise
    finally:
        _close(out_write, err_write, in_read)
    deadline = None if timeout is None else time.monotonic() + timeout
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


def run_text(
    args: Sequence[str],
    *,
    cwd: str | None = None,
    timeout: float | None,
    input: bytes = b"",
    env: Mapping[str, str] | None = None,
) -> TextResult:
    """``run``, both outputs decoded (``decode``)."""
    done = run(args, cwd=cwd, timeout=timeout, input=input, env=env)
    return TextResult(done.returncode, decode(done.stdout), decode(done.stderr))


def decode(data: bytes) -> str:
    """``data`` as ``subprocess`` decodes a text-mode output: in the locale's encoding,
    strictly (``UnicodeDecodeError``), with ``\\r\\n`` and ``\\r`` read as ``\\n``."""
    encoding = io.TextIOWrapper(io.BytesIO()).encoding  # the locale's, as text mode finds it
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


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
