"""Whether a terminal belongs to the agent: the ancestry of this process and of the process
holding its terminal.

A user-only command needs a person at a terminal. An agent can make itself a terminal
(``script``, Python's ``pty.spawn``, ``expect``) and scrub its environment, but it cannot
change whom its processes descend from: everything it starts descends from the host. So
before asking for the confirmation, the check walks the parent chain of this process and
of the process that holds the master side of its terminal, and refuses when the chain
meets a host: a process a SessionStart hook recorded in the user's Ithaca folder
(``~/.ithaca/hosts/``; a hook's parent is the host; its PID is kept with the process's
start time, so a reused PID does not count), or one whose
executable is a host's (``claude``, ``codex``). A person's own terminal is held by a
terminal emulator or ``sshd``, neither of which descends from a host.

What it relies on: Linux ``/proc`` (elsewhere the check finds nothing and only the
environment and terminal checks apply), and a terminal holder that is still a descendant.
A holder the agent detached twice (re-parented to init) escapes the walk; in the
sandboxed install profile such a process still cannot write Ithaca's state.
"""

from __future__ import annotations

import os

# The hosts' own binaries (Claude Code's npm package ships ``claude.exe``, also on Linux).
HOST_EXECUTABLES = frozenset({"claude", "claude.exe", "codex"})
HOSTS_FOLDER = "hosts"


def record_host(home: str, pid: int) -> None:
    """Remember ``pid`` (a hook's parent) as a host process, forgetting hosts that ended."""
    started = _start_time(pid)
    if started is None:
        return
    folder = os.path.join(home, HOSTS_FOLDER)
    try:
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):
            old_pid, _, old_start = name.partition("-")
            if old_pid.isdigit() and _start_time(int(old_pid)) != old_start:
                os.remove(os.path.join(folder, name))
        with open(os.path.join(folder, f"{pid}-{started}"), "w", encoding="ascii"):
            pass
    except OSError:
        return


def host_ancestor(home: str, fd: int = 0) -> str | None:
    """A description of the host this process or its terminal descends from, or None."""
    recorded = _recorded(home)
    holders = [os.getpid(), *_terminal_holders(fd)]
    for start in holders:
        for pid in _ancestry(start):
            started = _start_time(pid)
            if started is not None and f"{pid}-{started}" in recorded:
                return f"process {pid}, which started a coding session"
            name = _executable(pid)
            if name in HOST_EXECUTABLES:
                return f"process {pid} ({name})"
    return None


def _recorded(home: str) -> set[str]:
    try:
        return set(os.listdir(os.path.join(home, HOSTS_FOLDER)))
    except OSError:
        return set()


def _ancestry(pid: int) -> list[int]:
    """``pid`` and its ancestors, nearest first, up to (not including) init."""
    chain = []
    while pid > 1 and pid not in chain:
        chain.append(pid)
        parent = _stat_field(pid, 1)
        if parent is None:
            break
        pid = int(parent)
    return chain


def _terminal_holders(fd: int) -> list[int]:
    """The processes holding the master side of the pseudo-terminal on ``fd``."""
    try:
        name = os.ttyname(fd)
    except OSError:
        return []
    if not name.startswith("/dev/pts/"):
        return []
    index = name.removeprefix("/dev/pts/")
    holders = []
    for entry in _pids():
        fds = f"/proc/{entry}/fd"
        try:
            links = os.listdir(fds)
        except OSError:
            continue
        for link in links:
            try:
                if os.readlink(f"{fds}/{link}") != "/dev/ptmx":
                    continue
                with open(f"/proc/{entry}/fdinfo/{link}", encoding="ascii") as handle:
                    info = handle.read()
            except OSError:
                continue
            if f"tty-index:\t{index}\n" in info:
                holders.append(int(entry))
    return holders


def _pids() -> list[str]:
    try:
        return [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _stat_field(pid: int, index: int) -> str | None:
    """Field ``index`` of ``/proc/<pid>/stat`` after the command name (0: state, 1: ppid,
    19: start time)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rpartition(")")[2].split()
        return fields[index]
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    return _stat_field(pid, 19)


def _executable(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""
