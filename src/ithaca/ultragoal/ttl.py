"""How long sessions and pursuits stay live, and the time arithmetic to tell.

Stored times are ``YYYY-MM-DDTHH:MM:SS.mmmZ``; hooks compare them on every Stop and
SessionStart with ``kernel.clock.epoch_s``, which needs no ``datetime``.
"""

from __future__ import annotations

from ithaca.kernel.clock import epoch_s

LIVE_TTL_S = 6 * 3600
COMPLETE_TTL_S = 30 * 60


def elapsed_s(earlier: str | None, later: str) -> float:
    """``later − earlier`` in seconds; 0 when ``earlier`` is absent or unreadable."""
    if not earlier:
        return 0.0
    try:
        return max(epoch_s(later) - epoch_s(earlier), 0.0)
    except ValueError:
        return 0.0
