"""How long sessions and pursuits stay live, and the time arithmetic to tell.

Stored times are ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (``kernel.clock``). Hooks compare them on
every Stop and SessionStart, so they are turned into epoch seconds with integer
arithmetic instead of importing ``datetime``.
"""

from __future__ import annotations

LIVE_TTL_S = 6 * 3600
COMPLETE_TTL_S = 30 * 60


def epoch_s(stamp: str) -> float:
    """Seconds since the Unix epoch of a stored timestamp; ValueError when malformed."""
    if len(stamp) != 24 or stamp[10] != "T" or stamp[-1] != "Z":
        raise ValueError(f"not a stored timestamp: {stamp!r}")
    year, month, day = int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10])
    hour, minute, second = int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19])
    millis = int(stamp[20:23])
    return (
        _days_from_civil(year, month, day) * 86400
        + hour * 3600
        + minute * 60
        + second
        + millis / 1000
    )


def elapsed_s(earlier: str | None, later: str) -> float:
    """``later − earlier`` in seconds; 0 when ``earlier`` is absent or unreadable."""
    if not earlier:
        return 0.0
    try:
        return max(epoch_s(later) - epoch_s(earlier), 0.0)
    except ValueError:
        return 0.0


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468
