"""Budgets and keep-alive caps that count in days or months, in tests that run on the wall clock: counted on the
calendar of a zone where it is midday, their window is hours from its end for the whole test, so a test run
across midnight (UTC's, or the 1st of a month) never sees its counters start again half-way."""

from __future__ import annotations

import time


def midday_zone(now: float | None = None) -> str:
    """An IANA zone where it is now between 12:00 and 13:00 (Etc/GMT-N is UTC+N: POSIX signs)."""
    offset = 12 - time.gmtime(now).tm_hour      # -11 .. +12 hours, all of which Etc/GMT has
    return "Etc/GMT" if offset == 0 else f"Etc/GMT{-offset:+d}"
