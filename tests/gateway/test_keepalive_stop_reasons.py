"""Why keep-alive stopped refreshing a session, as /metrics counts it (`prefixgate_keepalive_stops_total{reason}`): a
refresh refused by the key's rate limit (its requests per minute used up by the caller's own requests) is a `rate limit`
stop, not a `budget` one. It was counted as `budget`, so an operator reading the metric saw budgets run out on a key
with most of its budget left. A refresh refused by a spent budget is still `budget`."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal

import pytest

from prefixgate.errors import RequestError
from prefixgate.gateway.state import MemoryCounters
from prefixgate.policies.limits import Limits
from prefixgate.policies.schema import Budget, CallerKey, RateLimit
from tests.gateway.test_keepalive_caps import sent_session, stub_keepalive

BUSY = CallerKey("busy", "b" * 64, tenant="t", budget=Budget(100.0, "total"), rate_limit=RateLimit(requests_per_minute=1))
SPENT = CallerKey("spent", "s" * 64, tenant="t", budget=Budget(0.000001, "total"))


class Unreached:
    async def send(self, *args: object) -> None:
        raise AssertionError("a refused refresh is never sent")


@pytest.mark.parametrize(("key", "reason"), [(BUSY, "rate limit"), (SPENT, "budget")], ids=["rate limit", "budget"])
def test_a_refused_refresh_is_counted_by_what_refused_it(key: CallerKey, reason: str) -> None:
    keepalive = stub_keepalive()
    limits = Limits(MemoryCounters(), clock=lambda: 1_800_000_000.0)       # one minute for the whole test
    keepalive.proxy.limits, keepalive.proxy.upstream = limits, Unreached()

    async def run() -> None:
        if key is BUSY:
            limits.release(await limits.admit(key))         # the caller's own request of this minute
        else:
            await limits.settle(key, await limits.admit(key), 0, Decimal("0.01"))    # its budget spent
        with pytest.raises(RequestError):
            await limits.admit(key, Decimal("0.0001"))       # what the refresh now meets
        session = sent_session(keepalive, key=key, touched=time.time(), expected_usd=Decimal("0.0001"))
        await keepalive._send(session)  # type: ignore[arg-type]
        assert session.stopped == reason

    asyncio.run(run())
    assert keepalive.m_stops.labels("chat", reason)._value.get() == 1
