"""Per-key rate limits and budgets, over a counter store shared by every gateway replica.

Requests per minute are counted on admission (increment, then check, so concurrent replicas cannot
both take the last slot). Tokens and dollars are only known once a response is in: they are added
afterwards, and a key is refused once its window's total has reached the limit.
"""

from __future__ import annotations

import time
from typing import Protocol

from prefixgate.errors import RequestError
from prefixgate.policies.schema import PERIODS, CallerKey


class CounterStore(Protocol):
    async def add(self, key: str, amount: float, ttl_s: int) -> float:
        """Add to a counter that expires `ttl_s` after creation; return the new value."""
        ...

    async def get(self, key: str) -> float: ...


def _window(period_s: int, now: float) -> tuple[str, int, float]:
    """(window id, ttl, seconds left) of the fixed window `now` falls in; period 0 never resets."""
    if period_s == 0:
        return "all", 0, 0.0
    index = int(now // period_s)
    return str(index), period_s * 2, (index + 1) * period_s - now


class Limits:
    def __init__(self, store: CounterStore, clock=time.time) -> None:
        self.store = store
        self.clock = clock

    async def admit(self, key: CallerKey) -> None:
        """Raise a 429 RequestError (with Retry-After) if `key` is over a limit or its budget."""
        now = self.clock()
        if key.budget is not None:
            wid, _, left = _window(PERIODS[key.budget.period], now)
            spent = await self.store.get(f"budget:{key.name}:{wid}")
            if spent >= key.budget.usd:
                raise RequestError(
                    f"key {key.name!r} has spent its budget of ${key.budget.usd:g} per {key.budget.period}",
                    status=429, kind="rate_limit", retry_after=left or None)
        limit = key.rate_limit
        if limit is None:
            return
        wid, ttl, left = _window(60, now)
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

    async def record(self, key: CallerKey, tokens: int, cost_usd: float) -> None:
        now = self.clock()
        if key.budget is not None and cost_usd:
            wid, ttl, _ = _window(PERIODS[key.budget.period], now)
            await self.store.add(f"budget:{key.name}:{wid}", cost_usd, ttl)
        if key.rate_limit is not None and key.rate_limit.tokens_per_minute and tokens:
            wid, ttl, _ = _window(60, now)
            await self.store.add(f"tpm:{key.name}:{wid}", tokens, ttl)
