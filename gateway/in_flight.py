"""Requests in flight per upstream: prefix affinity's load guard reads it (`pick_replica`).

One attempt holds one slot from the moment it is sent until its answer is done: `hold` counts it up
and the slot's `release` counts it down, once, whichever way the attempt ends. A streamed answer
outlives the code that sent it, so its slot is handed off to the response, which releases it when
its body ends or, if the body never starts (the client left before the first byte), when the
response itself ends.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager


class Slot:
    def __init__(self, counts: InFlight, upstream: str) -> None:
        self._counts, self._upstream = counts, upstream
        self._released = False
        self.handed_off = False
        counts[upstream] += 1

    def hand_off(self) -> Slot:
        """This slot, now released by whoever takes it rather than by `hold`'s exit."""
        self.handed_off = True
        return self

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._counts[self._upstream] -= 1


class InFlight(defaultdict[str, int]):
    def __init__(self) -> None:
        super().__init__(int)

    @contextmanager
    def hold(self, upstream: str) -> Iterator[Slot]:
        slot = Slot(self, upstream)
        try:
            yield slot
        finally:
            if not slot.handed_off:
                slot.release()
