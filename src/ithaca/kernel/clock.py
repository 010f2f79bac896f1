"""Wall-clock timestamps in the one format Ithaca stores: RFC 3339 UTC with milliseconds."""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime


def now() -> str:
    """The current time as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    return format_ms(time.time_ns() // 1_000_000)


def format_ms(epoch_ms: int) -> str:
    seconds, millis = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def parse(stamp: str) -> datetime:
    """Parse a stored timestamp back into an aware ``datetime``."""
    from datetime import UTC, datetime

    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
