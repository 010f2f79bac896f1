"""Who owns a recoverable unit, and whether that owner still lives.

A pid alone can be reused by an unrelated process after a crash, so an owner is its pid
plus its start time (``/proc/<pid>/stat`` field 22, in clock ticks since boot). Where
``/proc`` is missing the start time is unknown and only the pid is compared. A zombie
(exited, not yet reaped) counts as dead: it will never finish its unit.
"""

from __future__ import annotations

import os


def current_owner() -> tuple[int, str | None]:
    """This process's (pid, start time)."""
    pid = os.getpid()
    return pid, start_time(pid)


def start_time(pid: int) -> str | None:
    """The start time of ``pid`` as recorded by the kernel, or None if unknown."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]


def is_alive(pid: int, start: str | None) -> bool:
    """Whether the process that registered as (pid, start) is still running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process with that pid: the start time decides
    fields = _stat_fields(pid)
    if fields is None:
        return True
    if fields[0] == "Z":
        return False
    return start is None or fields[19] == start


def group_is_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (its zombies count as gone).

    Signalling a group succeeds while it holds only zombies, so on Linux the members
    are read from ``/proc``; elsewhere the signal test is all there is.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3… of ``/proc/<pid>/stat`` (after the parenthesised command name)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stream:
            line = stream.read()
    except OSError:
        return None
    fields = line[line.rfind(")") + 2 :].split()
    return fields if len(fields) > 19 else None
