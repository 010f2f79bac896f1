"""Wall-clock timestamps in the one format Ithaca stores: RFC 3339 UTC with milliseconds.

Hooks compare stored times with ``epoch_s``, integer arithmetic that spares them the
``datetime`` import.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime


def now() -> str:
    """The current time as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    return format_ms(time.time_ns() // 1_000_000)


def file_stamp() -> str:
    """The current time as ``20261129T232038123Z``: sortable, safe in a file name (backups
    and quarantines are named so)."""
    return now().replace("-", "").replace(":", "").replace(".", "")


def format_ms(epoch_ms: int) -> str:
    seconds, millis = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


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


def parse(stamp: str) -> datetime:
    """Parse a stored timestamp back into an aware ``datetime``."""
    from datetime import UTC, datetime

    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468
