"""Keep-alive's spend caps across replicas: gateways sharing one real Redis reserve each refresh's expected cost
on the caps' counters before sending it, in one atomic step, so two replicas whose sessions fall due at the same
moment never both pass a cap with room for one refresh. (The live, two-replica version through the SDK and the
mock is `test_keepalive_live.test_gateways_sharing_redis_share_the_caps`.)"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from types import SimpleNamespace

from prefixgate.gateway.keepalive import KeepAlive
from prefixgate.gateway.metrics import Metrics
from prefixgate.gateway.state import RedisCounters
from prefixgate.policies.keepalive import KeepAlivePolicy

# Sonnet 5.5's cache read is $0.10/MTok: a refresh reading 7,900 tokens costs $0.00079; the key's cap of $0.001 a
# day has room for one and not two.
REFRESH = Decimal("7900") * Decimal("0.10") / 1_000_000
POLICY = KeepAlivePolicy(on=True, route_usd=1.0, key_usd=0.001, period="day")


def replica(redis_url: str) -> KeepAlive:
    """A gateway's keep-alive with what its caps use of the gateway: the shared counters (no ledger: with Redis the
    counters are never restored from one)."""
    proxy = SimpleNamespace(metrics=Metrics(), settings=SimpleNamespace(redis_url=redis_url),
                            counters=RedisCounters(redis_url), ledger=None)
    return KeepAlive(proxy)  # type: ignore[arg-type]


def session(ident: str) -> SimpleNamespace:
    return SimpleNamespace(route=SimpleNamespace(name="capped", keepalive=POLICY), group=("tenant:t", "capped", "capped"),
                           ident=ident)


def test_two_replicas_due_at_once_pass_a_cap_with_room_for_one_refresh_once(redis_url: str) -> None:
    async def both() -> list[str]:
        a, b = replica(redis_url), replica(redis_url)
        return list(await asyncio.gather(a._reserve(session("on-a"), REFRESH), b._reserve(session("on-b"), REFRESH)))

    assert sorted(asyncio.run(both())) == ["", "key cap"]


def test_a_refresh_not_sent_gives_its_reservation_back(redis_url: str) -> None:
    async def run() -> tuple[str, str, str]:
        a, b = replica(redis_url), replica(redis_url)
        first = await a._reserve(session("on-a"), REFRESH)
        await a._settle(session("on-a"), REFRESH, Decimal(0))        # refused by the key's budget, or failed
        second = await b._reserve(session("on-b"), REFRESH)          # so the other replica's fits
        await b._settle(session("on-b"), REFRESH, REFRESH)           # sent and billed as expected
        third = await a._reserve(session("on-a"), REFRESH)           # a second billed refresh would pass $0.001
        return first, second, third

    assert asyncio.run(run()) == ("", "", "key cap")
