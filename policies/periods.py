"""The windows budgets and keep-alive caps count in: a minute and an hour are fixed windows from the epoch; a day and
a month are the calendar's, in an IANA time zone (UTC unless the policy names one), so a monthly budget resets on the
1st as an invoice does, and a day in America/Los_Angeles is 23 hours on the day DST starts. "total" never resets.

Every part of the gateway that asks which window a moment falls in (the limiter's counters, keep-alive's caps, the
restore from the ledger, the dashboard's forecast) asks `window`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

PERIODS = ("minute", "hour", "day", "month", "total")
FIXED_S = {"minute": 60, "hour": 3600}
_EPOCH_DAY = date(1970, 1, 1).toordinal()


@dataclass(frozen=True)
class Window:
    id: str         # names the window in a counter's key: "all" for "total"
    start: float    # unix seconds
    end: float      # unix seconds; inf for "total"

    @property
    def ttl(self) -> int:
        """How long a counter created in the window lives: twice its length (0: never expires)."""
        return 0 if math.isinf(self.end) else 2 * math.ceil(self.end - self.start)

    def left(self, now: float) -> float:
        """Seconds from `now` until the window resets (0 for one that never does)."""
        return 0.0 if math.isinf(self.end) else self.end - now


def resets(current: Window, zone: str = "UTC") -> str:
    """When `current` ends, on its own calendar, for a refusal's message."""
    if math.isinf(current.end):
        return "it never resets (period total)"
    return f"it resets at {datetime.fromtimestamp(current.end, _tz(zone)):%Y-%m-%d %H:%M} {zone}"


def zone_error(name: object) -> str:
    """Why `name` is not an IANA time zone ("" where it is one)."""
    if not isinstance(name, str) or not name:
        return f"an IANA time zone name such as UTC or America/Los_Angeles, got {name!r}"
    try:
        _tz(name)
    except (ZoneInfoNotFoundError, ValueError):
        if not available_timezones():
            return f"time zone {name!r} needs the IANA time zone database, which this machine lacks: pip install tzdata"
        return f"unknown time zone {name!r}: an IANA name such as UTC, Europe/Berlin or America/Los_Angeles"
    return ""


def window(period: str, now: float, zone: str = "UTC") -> Window:
    """The window of `period` that `now` falls in; a day's and a month's on the calendar of `zone`."""
    if period == "total":
        return Window("all", 0.0, math.inf)
    if period in FIXED_S:
        length = FIXED_S[period]
        index = int(now // length)
        return Window(str(index), float(index * length), float((index + 1) * length))
    tz = _tz(zone)
    today = datetime.fromtimestamp(now, tz).date()
    if period == "day":
        # The local date counted from 1970-01-01: in UTC the same ids the fixed 86,400 s days had.
        return Window(str(today.toordinal() - _EPOCH_DAY), _midnight(today, tz), _midnight(today + timedelta(days=1), tz))
    if period == "month":
        first = today.replace(day=1)
        after = (first + timedelta(days=32)).replace(day=1)
        return Window(f"{first.year:04d}-{first.month:02d}", _midnight(first, tz), _midnight(after, tz))
    raise ValueError(f"unknown period {period!r}: one of {', '.join(PERIODS)}")


def _tz(zone: str) -> tzinfo:
    # UTC, the default, needs no time zone database (a slim container image may have none).
    return UTC if zone == "UTC" else ZoneInfo(zone)


def _midnight(day: date, tz: tzinfo) -> float:
    # A midnight that a DST jump skips (America/Santiago) maps, with fold 0, to the jump itself: the day's first moment.
    return datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()
