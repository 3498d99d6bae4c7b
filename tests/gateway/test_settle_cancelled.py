"""A request's settle adds its cost to the shared budget even where its task is cancelled meanwhile (a caller hanging
up, a gateway shutting down): the ledger records the cost, so a budget missing it would let the key spend it again.
Its reservation stays held until the cost is in (never a moment with neither), and a shutdown waits for it."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from prefixgate.gateway.state import MemoryCounters
from prefixgate.policies.limits import Limits
from prefixgate.policies.schema import Budget, CallerKey, RateLimit

KEY = CallerKey("team", "0" * 64, budget=Budget(usd=1.0, period="total"))
NOW = 1_000 * 60 + 1.0
COUNTER = "spend:team:all"
COST = Decimal("0.25")
COST_NANO = 250_000_000     # $0.25 in nanodollars


class SlowSpend(MemoryCounters):
    """Counters whose spend adds wait for `gate`: a Redis round trip the test holds open."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.adding = asyncio.Event()

    async def add(self, key: str, amount: float, ttl_s: int, once: str = "") -> float:
        if key.startswith("spend:"):
            self.adding.set()
            await self.gate.wait()
        return await super().add(key, amount, ttl_s, once)


async def until(ready, what: str) -> None:
    """Let the event loop run until `ready()` (it needs only the loop to turn, never a clock)."""
    for _ in range(10_000):
        if ready():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{what} did not happen")


async def _cancelled_mid_settle(key: CallerKey = KEY) -> tuple[Limits, SlowSpend]:
    store = SlowSpend()
    limits = Limits(store, clock=lambda: NOW)
    held = await limits.admit(key, Decimal("0.50"))
    settling = asyncio.create_task(limits.settle(key, held, tokens=100, cost_usd=COST))
    await store.adding.wait()
    settling.cancel()
    with pytest.raises(asyncio.CancelledError):
        await settling
    return limits, store


def test_a_settle_cancelled_during_its_add_still_spends_the_budget():
    async def run() -> None:
        limits, store = await _cancelled_mid_settle()
        assert limits.reserved == {COUNTER: 500_000_000}      # still held: the cost is not in yet
        store.gate.set()
        await until(lambda: not limits.reserved, "the hold's release")
        assert await store.get(COUNTER) == COST_NANO
        await limits.aclose()
    asyncio.run(run())


def test_a_shutdown_waits_for_a_cancelled_settle_to_reach_the_store():
    async def run() -> None:
        limits, store = await _cancelled_mid_settle()
        closing = asyncio.create_task(limits.aclose())
        for _ in range(100):        # the loop turns; aclose is left waiting on the spend
            await asyncio.sleep(0)
        assert not closing.done()
        store.gate.set()
        await closing
        assert await store.get(COUNTER) == COST_NANO
        assert not limits.reserved
    asyncio.run(run())


def test_a_settle_cancelled_during_its_add_still_counts_the_tokens_per_minute():
    """The answer's 100 tokens count against the key's tokens-per-minute as its cost counts against its budget: a
    cancel skipped the count, so a key hanging up on its answers could take more tokens a minute than its limit."""
    rated = CallerKey("team", "0" * 64, budget=Budget(usd=1.0, period="total"),
                      rate_limit=RateLimit(tokens_per_minute=1000))
    tokens = f"tpm:team:{int(NOW // 60)}"    # the minute NOW falls in

    async def run() -> None:
        limits, store = await _cancelled_mid_settle(rated)
        store.gate.set()
        await limits.aclose()       # waits for what the cancelled settle still adds
        assert await store.get(tokens) == 100
        assert await store.get(COUNTER) == COST_NANO
    asyncio.run(run())
