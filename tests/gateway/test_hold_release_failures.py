"""A budget hold that is released must leave Redis promptly, whatever Redis was doing at that moment, and a
replica that shuts down must not leave its holds behind: a hold that stays blocks the key's budget on every
replica until it expires (`HOLD_S`, 15 minutes)."""

from __future__ import annotations

import asyncio
import signal
import time
from decimal import Decimal

from prefixgate.errors import RequestError
from prefixgate.gateway.app import create_app
from prefixgate.gateway.state import RedisCounters
from prefixgate.policies.limits import Limits
from prefixgate.policies.schema import Budget, CallerKey
from prefixgate.redis_outage import Outage
from tests.gateway.support_gateway import policy_for, settings_for
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401  (a fixture)
from tests.support_services import MIN_WAIT_S

KEY = CallerKey("team", "0" * 64, budget=Budget(usd=1.0, period="total"))
NOW = 1_000 * 60 + 1.0
WHOLE = Decimal("1.00")         # a request holding the key's whole $1 budget


async def _admits(limits: Limits) -> bool:
    try:
        await limits.admit(KEY, Decimal("0.60"))
        return True
    except RequestError:
        return False


def test_a_release_during_a_redis_blip_is_resent_once_redis_answers(stoppable_redis):  # noqa: F811
    proc, url = stoppable_redis

    async def run() -> tuple[bool, bool]:
        a, b = RedisCounters(url), RedisCounters(url)
        b.window.outage = Outage()      # another replica's process: a's timeout does not rest it (redis_outage.py)
        running, other = Limits(a, clock=lambda: NOW), Limits(b, clock=lambda: NOW)
        held = await running.admit(KEY, WHOLE)
        proc.send_signal(signal.SIGSTOP)        # a blip: the replica's next call to Redis times out
        try:
            await a.get("spend:team:all")
        finally:
            proc.send_signal(signal.SIGCONT)
        running.release(held)                   # the request ends (refused upstream, say) while Redis counts as down
        blocked = not await _admits(other)
        # Redis answers again; nothing else calls it from `running`.
        deadline = time.monotonic() + MIN_WAIT_S
        while not (freed := await _admits(other)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for limits, counters in ((running, a), (other, b)):
            await limits.aclose()
            await counters.close()
        return blocked, freed

    assert asyncio.run(run()) == (True, True)


def test_a_gateway_shutting_down_releases_its_holds(tmp_path, redis_url):
    async def run() -> tuple[bool, bool]:
        settings = settings_for("http://127.0.0.1:9", tmp_path, redis_url=redis_url)
        app = create_app(settings, policy=policy_for(settings, {"routes": [{"name": "gpt", "models": ["gpt-*"],
                                                                           "targets": [{"upstream": "openai"}]}]}))
        survivor_counters = RedisCounters(redis_url)
        survivor = Limits(survivor_counters, clock=lambda: NOW)
        async with app.router.lifespan_context(app):       # the gateway's startup, then its shutdown
            await app.state.proxy.limits.admit(KEY, WHOLE)     # a request still running when it is told to stop
            blocked = not await _admits(survivor)
        freed = await _admits(survivor)
        await survivor.aclose()
        await survivor_counters.close()
        return blocked, freed

    assert asyncio.run(run()) == (True, True)
