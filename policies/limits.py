"""Per-key rate limits and budgets, over a counter store shared by every gateway replica.

Requests per minute are counted on admission (increment, then check, so concurrent replicas cannot
both take the last slot). Budgets bind too: admission reserves the request's estimated cost, and `settle`
swaps the reservation for what the upstream billed once the response is in; a key is refused once what it
spent (shared) plus what this replica has reserved reaches its budget, so concurrent requests overshoot a
budget by at most one request per key and replica. Reservations stay in the replica: the shared store only
ever gets one add per request, the real cost (a timed-out add to Redis may or may not have applied, and a
reservation's add and release would double that doubt). Money is counted in integer nanodollars: sums and
the budget comparison are exact (a key that has spent exactly its budget is refused). Tokens per minute are
only known afterwards.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from prefixgate.errors import RequestError
from prefixgate.policies.schema import PERIODS, CallerKey

NANO = Decimal(10) ** 9


class CounterStore(Protocol):
    async def add(self, key: str, amount: float, ttl_s: int) -> float:
        """Add to a counter that expires `ttl_s` after creation; return the new value."""
        ...

    async def get(self, key: str) -> float: ...


def nanodollars(usd: Decimal | float | str) -> int:
    """Dollars as whole nanodollars, rounded up (a budget never rounds a cost away)."""
    return math.ceil(Decimal(str(usd)) * NANO)


def _window(period_s: int, now: float) -> tuple[str, int, float, float]:
    """(window id, ttl, seconds left, start) of the fixed window `now` falls in; period 0 never resets."""
    if period_s == 0:
        return "all", 0, 0.0, 0.0
    index = int(now // period_s)
    return str(index), period_s * 2, (index + 1) * period_s - now, float(index * period_s)


def spend_counter(key: CallerKey, now: float) -> tuple[str, int, float]:
    """(counter, ttl, window start) of the key's budget window at `now`."""
    assert key.budget is not None
    wid, ttl, _, start = _window(PERIODS[key.budget.period], now)
    return f"spend:{key.name}:{wid}", ttl, start


@dataclass(frozen=True)
class Reservation:
    """What admission set aside against a key's budget, until `settle` replaces it with the real cost."""

    counter: str = ""
    nano: int = 0


class Limits:
    def __init__(self, store: CounterStore, clock=time.time) -> None:
        self.store = store
        self.clock = clock
        self.reserved: dict[str, int] = {}      # budget counter -> nanodollars reserved by requests in flight here

    async def admit(self, key: CallerKey, estimate_usd: Decimal = Decimal(0)) -> Reservation:
        """Reserve `estimate_usd` of the key's budget and count the request against its rate; raise a 429
        RequestError (with Retry-After) if the key is over a limit or had already spent its budget."""
        now = self.clock()
        held = Reservation()
        if key.budget is not None:
            counter, _, _ = spend_counter(key, now)
            spent = await self.store.get(counter)
            # From here to the reservation nothing awaits: concurrent admissions see each other's reservations.
            if spent + self.reserved.get(counter, 0) >= nanodollars(key.budget.usd):
                _, _, left, _ = _window(PERIODS[key.budget.period], now)
                raise RequestError(
                    f"key {key.name!r} has spent its budget of ${key.budget.usd:g} per {key.budget.period}",
                    status=429, kind="rate_limit", retry_after=left or None)
            held = Reservation(counter, nanodollars(estimate_usd))
            if held.nano:   # `release` drops a counter at zero: one kept at zero would stay for every window
                self.reserved[counter] = self.reserved.get(counter, 0) + held.nano
        try:
            await self._rate(key, now)
        except BaseException:   # refused, or cancelled (the caller hung up): the caller never gets `held` to settle
            self.release(held)
            raise
        return held

    async def _rate(self, key: CallerKey, now: float) -> None:
        limit = key.rate_limit
        if limit is None:
            return
        wid, ttl, left, _ = _window(60, now)
        if limit.tokens_per_minute:
            used = await self.store.get(f"tpm:{key.name}:{wid}")
            if used >= limit.tokens_per_minute:
                raise RequestError(f"key {key.name!r} is over its {limit.tokens_per_minute} tokens per minute",
                                   status=429, kind="rate_limit", retry_after=left)
        if limit.requests_per_minute:
            count = await self.store.add(f"rpm:{key.name}:{wid}", 1, ttl)
            if count > limit.requests_per_minute:
                raise RequestError(f"key {key.name!r} is over its {limit.requests_per_minute} requests per minute",
                                   status=429, kind="rate_limit", retry_after=left)

    def release(self, held: Reservation) -> None:
        if held.nano:
            left = self.reserved.get(held.counter, 0) - held.nano
            if left:
                self.reserved[held.counter] = left
            else:
                self.reserved.pop(held.counter, None)

    async def settle(self, key: CallerKey, held: Reservation, tokens: int, cost_usd: Decimal) -> None:
        """Replace the reservation with what the request cost (in the window it ends in)."""
        now = self.clock()
        self.release(held)
        if key.budget is not None and cost_usd:
            counter, ttl, _ = spend_counter(key, now)
            await self.store.add(counter, nanodollars(cost_usd), ttl)
        if key.rate_limit is not None and key.rate_limit.tokens_per_minute and tokens:
            wid, ttl, _, _ = _window(60, now)
            await self.store.add(f"tpm:{key.name}:{wid}", tokens, ttl)

    async def restore(self, key: CallerKey, spent_nano: int) -> None:
        """Start the key's current budget window at `spent_nano` (what the ledger says it spent)."""
        if key.budget is not None and spent_nano:
            counter, ttl, _ = spend_counter(key, self.clock())
            await self.store.add(counter, spent_nano, ttl)
