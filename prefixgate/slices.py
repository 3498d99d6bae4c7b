"""Long lists freed a slice at a time.

Freeing a list frees its items in the same C call, and theirs: for a big body's 200,000-item list of new
objects that is tens of ms in which the thread holds the GIL, wherever the last reference goes (a frame's end,
a `del`). On a worker thread (gateway/off_loop.py) the event loop waits that out. Freed here instead, in slices
sized to take about `SLICE_S` each, the GIL can change hands between them. Short lists are left alone: they
free in microseconds.
"""

from __future__ import annotations

import sys
import time

SLICE_S = 0.001
FIRST = 512         # items in the first slice; then halved or doubled to keep each near SLICE_S
LONG = 16_384       # a list shorter than this is freed at once


def free_in_slices(items: list) -> None:
    """Drop `items` front to back, overwritten in place (deleting from the front would move the rest each
    time): an item may hold one object or a thousand, so slices shrink when they take long."""
    n, start, size = len(items), 0, FIRST
    while start < n:
        stop = min(start + size, n)
        began = time.thread_time()
        items[start:stop] = [None] * (stop - start)
        took = time.thread_time() - began
        if took > SLICE_S:
            size = max(1, size // 2)
        elif took < SLICE_S / 4:
            size = min(size * 2, 64 * FIRST)
        start = stop
        time.sleep(0)
    items.clear()


def let_go(items: list) -> None:
    """Free a long list that only the caller holds (a function's temporary) a slice at a time, before the
    caller's frame would free it at once. A list held anywhere else is left as it is."""
    # References: the caller's name for it and this function's argument (getrefcount's own is not counted).
    if len(items) >= LONG and sys.getrefcount(items) <= 3:
        free_in_slices(items)
