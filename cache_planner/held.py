"""Hour-long conversation entries a route holds, kept alive by marking them in the session's later requests.

A breakpoint finds an entry at its own position or within the 20 blocks before it, and a hit restarts the
entry's TTL. A conversation's later turns mark their own ends, so an hour-long entry written on the way (the
planner's 1h mark before an expected break, keep-alive's upgrade through an answer) is found by no later request
once the conversation has moved on, and lapses an hour after its last hit. Marking it in each later request is a
hit, which writes nothing (a write is billed only past the longest hit); it keeps the entry alive for as long as
the session is, and a later break then falls back to it: only the turns after it are written again, where
otherwise the whole conversation would be (or keep-alive would upgrade again). `HeldEntries` remembers, per route,
such entries' prefix keys and when each expires; `latest` finds the one a request can hold.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from prefixgate.ir import ttl_seconds

MAX_HELD = 256      # entries remembered per route (least recently noted forgotten): its state is shared (Redis)


@dataclass
class HeldEntries:
    entries: OrderedDict[str, tuple[str, float]] = field(default_factory=OrderedDict)  # key -> (ttl, expires)

    def note(self, key: str, ttl: str, expires: float) -> None:
        """An entry of `key` lives with `ttl` until `expires` (written, or hit: its TTL restarted). Entries noted
        before it that have lapsed by the time it was noted are forgotten."""
        self.entries[key] = (ttl, expires)
        self.entries.move_to_end(key)
        while self.entries:
            oldest, (old_ttl, old_expires) = next(iter(self.entries.items()))
            if len(self.entries) <= MAX_HELD and old_expires > expires - ttl_seconds(ttl):
                break
            del self.entries[oldest]

    def latest(self, keys: list[str], start: int, end: int, now: float) -> tuple[int, str] | None:
        """The latest block in `keys[start:end]` whose entry is alive at `now`, and its TTL."""
        if not self.entries:
            return None
        for index in range(min(end, len(keys)) - 1, start - 1, -1):
            found = self.entries.get(keys[index])
            if found is not None and found[1] > now:
                return index, found[0]
        return None

    def to_list(self) -> list:
        return [[k, ttl, expires] for k, (ttl, expires) in self.entries.items()]

    @classmethod
    def from_list(cls, data: list) -> HeldEntries:
        return cls(OrderedDict((k, (ttl, float(expires))) for k, ttl, expires in data))
