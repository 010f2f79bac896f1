"""What ``ithaca run-plan`` reports while it works: one event per step, as it happens.

The runner reports each step of a run as an event (a plain dict with an ``event`` name):
``run_started``, ``wave_started``, ``task_started``, ``task_skipped``, ``task_finished``,
``wave_finished``, ``stopping`` (a stop signal arrived) and ``waiting`` (about once a
second while workers run, so a live display can show the time). The events carry data,
never text: showing them is the caller's (the CLI keeps a live line on a terminal and
prints plain lines elsewhere).

They travel as ``logging`` records of the logger ``LOGGER`` at level INFO, the event in
the record's ``ithaca_progress`` attribute. Logging is how a library reports to whoever
listens without knowing who: nothing is built or shown when no handler asks for INFO
from that logger (the MCP server, tests, Python callers), and the CLI attaches its
handler by the logger's name.
"""

from __future__ import annotations

import logging
from typing import Any

LOGGER = "ithaca.delivery.run_plan.progress"
ATTRIBUTE = "ithaca_progress"

_logger = logging.getLogger(LOGGER)


def emit(event: str, **fields: Any) -> None:
    """Report one step of the run to whoever listens."""
    if _logger.isEnabledFor(logging.INFO):
        _logger.info(event, extra={ATTRIBUTE: {"event": event, **fields}})
