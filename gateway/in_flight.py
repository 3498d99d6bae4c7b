"""Requests in flight per upstream: prefix affinity's load guard reads it (`pick_replica`).

One attempt holds one slot from the moment it is sent until its answer is done: `hold` counts it up
and the slot's `release` counts it down, once, whichever way the attempt ends. A streamed answer
outlives the code that sent it, so its slot is handed off to the response, which releases it when
its body ends or, if the body never starts (the client left before the first byte), when the
response itself ends. Whoever must know when an upstream has answered (the KV index: a replica owes its
events by then) listens with `on_release`, and with `on_hold` for when it is sent something again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable


class Slot:
    """One attempt's place in the count; as a context manager it is released on exit unless handed off."""

    def __init__(self, counts: InFlight, upstream: str) -> None:
        self._counts, self._upstream = counts, upstream
        self._released = False
        self.handed_off = False
        counts[upstream] += 1
        for listener in counts.hold_listeners:
            listener(upstream)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.handed_off:
            self.release()

    def hand_off(self) -> Slot:
        """This slot, now released by whoever takes it rather than by the `with` block's exit."""
        self.handed_off = True
        return self

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._counts[self._upstream] -= 1
            for listener in self._counts.listeners:
                listener(self._upstream)


class InFlight(defaultdict[str, int]):
    def __init__(self) -> None:
        super().__init__(int)
        self.listeners: list[Callable[[str], None]] = []
        self.hold_listeners: list[Callable[[str], None]] = []

    def on_release(self, listener: Callable[[str], None]) -> None:
        """Call `listener(upstream)` each time an attempt on `upstream` ends, however it ended."""
        self.listeners.append(listener)

    def on_hold(self, listener: Callable[[str], None]) -> None:
        """Call `listener(upstream)` each time an attempt on `upstream` is counted in."""
        self.hold_listeners.append(listener)

    def hold(self, upstream: str) -> Slot:
        """A slot counted up now: `with counts.hold(name) as slot: ...`."""
        return Slot(self, upstream)
