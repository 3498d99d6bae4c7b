"""The time keep-alive (gateway/keepalive.py) and the mock providers' caches run by: the wall clock, plus an
offset read from a file when the `clock_offset_file` setting names one.

Tests give the gateway and `prefixgate mock-providers` the same file, so writing a number of seconds into it
moves both clocks together: an idle gap of minutes passes in a moment, and the mock expires its cache entries
by the same clock the gateway schedules its refreshes by. Without the setting it is `time.time`.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class OffsetClock:
    """`time.time()` plus the seconds written in `path` (0 while the file is missing or not a number). The file
    is read on every call: a test's writes take effect at once, whatever the filesystem's timestamp resolution."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> float:
        try:
            with open(self.path, encoding="utf-8") as f:
                offset = float(f.read().strip() or 0)
        except (OSError, ValueError):
            offset = 0.0
        return time.time() + offset


def clock_for(offset_file: str) -> Callable[[], float]:
    return OffsetClock(offset_file) if offset_file else time.time
