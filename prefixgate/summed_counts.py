"""Counts that gateway replicas add up in Redis: each keeps what it counted since it last shared (its *deltas*), one
writer adds them to a hash per key (HINCRBYFLOAT, one pipeline for every key due) and reads the totals back in the
same round trip, at most once per `every_s` a key (and every `reread_s` for a key that counted nothing here).

What is counted, the keys (hashes, with no tenant or credential in them) and their expiry are the users' (the
planner's reuse counts, `cache_planner/reuse_shared.py`; keep-alive's gap models, `gateway/keepalive_shared.py`).
While Redis does not answer, each replica counts on its own (the single-replica behaviour), keeps its deltas for the
next try, leaves Redis alone for a retry window (a frozen Redis costs one timeout a window, not one per call) and
says so once in its log (`prefixgate.redis_outage.RetryWindow`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from prefixgate.redis_outage import RetryWindow

# Add the deltas (ARGV: expiry in ms, a cap, how many field prefixes weigh against it, those prefixes, then name,
# delta pairs), halve every count once the weighing fields pass the cap (0: never), and answer the totals.
ADD = """
for i = 4 + ARGV[3], #ARGV, 2 do redis.call('HINCRBYFLOAT', KEYS[1], ARGV[i], ARGV[i + 1]) end
local all = redis.call('HGETALL', KEYS[1])
local cap = tonumber(ARGV[2])
if cap > 0 then
  local weight = 0
  for i = 1, #all, 2 do
    for p = 4, 3 + ARGV[3] do
      if string.sub(all[i], 1, #ARGV[p]) == ARGV[p] then weight = weight + tonumber(all[i + 1]) end
    end
  end
  if weight > cap then
    for i = 1, #all, 2 do
      all[i + 1] = tostring(tonumber(all[i + 1]) / 2)
      redis.call('HSET', KEYS[1], all[i], all[i + 1])
    end
  end
end
if #all > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return all
"""


class Counted(Protocol):
    """What one key's counts are on this replica: its deltas taken to be shared, given back when that failed, and
    every replica's totals (to which it adds what it has not shared yet)."""

    def take_unshared(self) -> dict[str, float]: ...
    def give_back(self, taken: dict[str, float]) -> None: ...
    def shared_totals(self, totals: dict[str, float]) -> None: ...


Batch = list[tuple[str, Counted, dict[str, float]]]


class SummedCounts:
    """Keys' counts added up in Redis through `client` (redis-py, sync, off the event loop; called through `window`),
    expiring `ttl_s` after their last add. `cap` and `weighed`: halve a key's counts once its fields starting with one of
    `weighed` pass it. `take`, `send` and `settle` are one share split at its round trip (`flush` does all three);
    `read`, on the event loop, goes through `reader` (a quick client: `RetryWindow.ask_quick`)."""

    def __init__(self, client: object, window: RetryWindow, ttl_s: float,
                 every_s: float = 1.0, reread_s: float = math.inf, cap: float = 0.0,
                 weighed: tuple[str, ...] = (), reader: object | None = None) -> None:
        self.window, self.every_s, self.reread_s = window, every_s, reread_s
        self._add = client.register_script(ADD)  # type: ignore[attr-defined]
        self._client = client
        self._reader = reader if reader is not None else client
        self._head = [int(ttl_s * 1000), cap, len(weighed), *weighed]
        self._dirty: dict[str, Counted] = {}     # key -> its counts, with deltas not shared yet
        self._shared: dict[str, float] = {}      # key -> when it was last shared or read (monotonic)

    def counted(self, key: str, counts: Counted) -> None:
        """`counts` has deltas to share (at the next flush at least `every_s` after the last)."""
        self._dirty[key] = counts

    def pending(self) -> bool:
        return bool(self._dirty)

    def take(self, now: float, known: Sequence[tuple[str, Counted]] = ()) -> Batch:
        """The keys due now (those counted, and of `known` those not read for `reread_s`), their deltas taken."""
        if self.window.resting():
            return []       # the keys stay counted: shared at the first take after the window
        due = [(key, counts) for key, counts in list(self._dirty.items())
               if now - self._shared.get(key, -math.inf) >= self.every_s]
        for key, _ in due:
            self._dirty.pop(key, None)
        taken = {key for key, _ in due}
        due += [(key, counts) for key, counts in known if key not in taken and key not in self._dirty
                and now - self._shared.get(key, -math.inf) >= self.reread_s]
        keep = max(self.every_s, self.reread_s if self.reread_s < math.inf else 0.0)
        self._shared = {key: at for key, at in self._shared.items() if now - at < keep}
        self._shared.update((key, now) for key, _ in due)
        if not due:
            return []
        return [(key, counts, counts.take_unshared()) for key, counts in due]

    def send(self, batch: Batch) -> list[dict[str, float] | None] | None:
        """Add the batch's deltas and read its keys' totals, in one round trip (None: Redis rests or did not answer;
        a key's None: Redis refused its add, which leaves the other keys' adds done)."""
        flat = self.window.ask_now(lambda: self._sent(batch))
        if flat is None:
            return None
        refused = next((raw for raw in flat if isinstance(raw, Exception)), None)
        if refused is not None:
            self.window.failed(refused)     # logged once a client; Redis answered, so no client leaves it alone
        return [None if isinstance(raw, Exception) else {_text(raw[i]): float(raw[i + 1]) for i in range(0, len(raw), 2)}
                for raw in flat]

    def _sent(self, batch: Batch) -> list[list[bytes] | Exception]:
        pipe = self._client.pipeline(transaction=False)  # type: ignore[attr-defined]
        for key, _, deltas in batch:
            self._add(keys=[key], client=pipe, args=[*self._head, *(x for kv in deltas.items() if kv[1] for x in kv)])
        return pipe.execute(raise_on_error=False)

    def settle(self, batch: Batch, totals: list[dict[str, float] | None] | None) -> None:
        """Each key's totals to its counts, or (Redis did not answer, or refused that key) its deltas back. A batch
        Redis did not answer stays due, so it is shared at a later flush though its keys count nothing more; a key
        Redis refused waits for its next count (a refused command is not sent again each flush)."""
        for i, (key, counts, deltas) in enumerate(batch):
            shared = None if totals is None else totals[i]
            if shared is not None:
                counts.shared_totals(shared)
                continue
            counts.give_back(deltas)
            if totals is None:
                self._dirty.setdefault(key, counts)

    def flush(self, now: float, known: Sequence[tuple[str, Counted]] = ()) -> None:
        batch = self.take(now, known)
        if batch:
            self.settle(batch, self.send(batch))

    def read(self, key: str) -> dict[str, float] | None:
        """A key's totals now (None: Redis is resting, in doubt or did not answer)."""
        raw = self.window.ask_quick(lambda: self._reader.hgetall(key))  # type: ignore[attr-defined]
        return None if raw is None else {_text(name): float(value) for name, value in raw.items()}


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw
