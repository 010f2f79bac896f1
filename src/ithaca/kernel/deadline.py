"""The hook process's deadline: the time by which it must have answered its host.

A host waits a fixed time for each hook (the installers' timeouts, docs/hooks.md "Host
timeouts") and, past it, runs the call as if the hook had allowed it. So the hook decides
by its host's timeout less a margin, and whatever waits in it (the store's lock, Git, a
validator) asks here how long it may still take. A process that never ``start``\\ s a
deadline (the CLI, the MCP server) is unbounded: ``remaining`` is None.

When a wait is cut short by the deadline, ``cut_short`` is recorded, and the dispatcher
fails the call closed (``HOOK_DEADLINE``) rather than trust a decision made without the
answer it waited for. Standard library only: ``kernel.git`` and the hook path import it.
"""

from __future__ import annotations

import time

# The margin kept before the host's timeout, for start-up before ``start`` runs and for
# writing the answer after: a fifth of it, at least one second and at most five.
MARGIN_FRACTION = 0.2
MIN_MARGIN_S = 1.0
MAX_MARGIN_S = 5.0
HOOK_DEADLINE = "HOOK_DEADLINE"

_deadline: float | None = None
_cut_short = False


def budget(timeout_s: float) -> float:
    """How long a hook may spend deciding when its host waits ``timeout_s`` seconds."""
    margin = min(max(timeout_s * MARGIN_FRACTION, MIN_MARGIN_S), MAX_MARGIN_S)
    return max(timeout_s - margin, 0.0)


def start(timeout_s: float) -> None:
    """Give this process the deadline of a hook its host waits ``timeout_s`` seconds for."""
    global _deadline, _cut_short
    _deadline = time.monotonic() + budget(timeout_s)
    _cut_short = False


def clear() -> None:
    """No deadline any more (a process that runs hooks in-process, such as a test)."""
    global _deadline, _cut_short
    _deadline = None
    _cut_short = False


def remaining() -> float | None:
    """Seconds left before the deadline (never below 0); None without one."""
    if _deadline is None:
        return None
    return max(_deadline - time.monotonic(), 0.0)


def bounded(timeout_s: float | None) -> float | None:
    """``timeout_s`` shortened to the time left (None: no limit of its own)."""
    left = remaining()
    if left is None:
        return timeout_s
    return left if timeout_s is None else min(timeout_s, left)


def shortens(timeout_s: float | None) -> bool:
    """Whether the deadline, not ``timeout_s``, would end a wait starting now."""
    left = remaining()
    return left is not None and (timeout_s is None or left < timeout_s)


def mark_cut_short() -> None:
    """Record that a wait ended at the deadline, before the answer it waited for."""
    global _cut_short
    _cut_short = True


def cut_short() -> bool:
    """Whether a wait of this hook ended at the deadline."""
    return _cut_short
