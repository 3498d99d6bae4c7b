"""Keep-alive's spend caps across replicas: gateways sharing one real Redis reserve each refresh's expected cost
on the caps' counters before sending it, in one atomic step, so two replicas whose sessions fall due at the same
moment never both pass a cap with room for one refresh. (The live, two-replica version through the SDK and the
mock is `test_keepalive_live.test_gateways_sharing_redis_share_the_caps`.)"""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from types import SimpleNamespace

import pytest

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
        return list(await asyncio.gather(a._reserve(a._caps(session("on-a")), REFRESH), b._reserve(b._caps(session("on-b")), REFRESH)))

    assert sorted(asyncio.run(both())) == ["", "key cap"]


def test_a_refresh_not_sent_gives_its_reservation_back(redis_url: str) -> None:
    async def run() -> tuple[str, str, str]:
        a, b = replica(redis_url), replica(redis_url)
        first = await a._reserve(a._caps(session("on-a")), REFRESH)
        await a._settle(a._caps(session("on-a")), REFRESH, Decimal(0))        # refused by the key's budget, or failed
        second = await b._reserve(b._caps(session("on-b")), REFRESH)          # so the other replica's fits
        await b._settle(b._caps(session("on-b")), REFRESH, REFRESH)           # sent and billed as expected
        third = await a._reserve(a._caps(session("on-a")), REFRESH)           # a second billed refresh would pass $0.001
        return first, second, third

    assert asyncio.run(run()) == ("", "", "key cap")


def test_a_refresh_that_breaks_unexpectedly_gives_its_reservation_back(redis_url: str) -> None:
    """Not an upstream failure the refresh records, but an error nobody planned for (here the transport itself
    raising): the reservation is settled at $0 on the way out, so the cap is not held by money never spent."""
    class Broken:
        async def send(self, *args: object) -> None:
            raise RuntimeError("transport broke")

    async def run() -> str:
        a, b = replica(redis_url), replica(redis_url)
        a.proxy.upstream = Broken()
        due = session("on-a")
        due.__dict__.update(touched=time.time(), ttl_s=300.0, upgrading=False, expected_usd=REFRESH, key=None,
                            upstream=None, wire=None, model="claude-sonnet-5-5", body=b"{}", headers={},
                            credential=None)
        with pytest.raises(RuntimeError):
            await a._refresh(due)
        return await b._reserve(b._caps(session("on-b")), REFRESH)  # the whole cap is free again

    assert asyncio.run(run()) == ""
