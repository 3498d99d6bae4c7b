"""A frozen Redis costs a request a timeout only if it was in flight when Redis froze, whatever the concurrency. At
each retry window's end the async clients (budget counters, stored ids, sticky pins...) used to call Redis again,
and every request that reached one before the first had failed waited its 0.5 s timeout: 8 concurrent callers, Redis
frozen 6 s, 32 requests of 0.4 s or more. Now the probe's ping tries Redis after each window (prefixgate/redis_outage.py)
and the clients answer from the replica until it answers. Counted, not timed: a client that called the frozen Redis
failed (`failures`)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

import redis
import redis.asyncio as aioredis

from prefixgate.gateway.state import RedisCounters
from prefixgate.redis_outage import RetryWindow, outage_of
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401

RETRY_S = 0.05      # windows that pass quickly, so the test sees several while Redis stays frozen
CALLERS = 8


async def until(ready: Callable[[], bool], what: str) -> None:
    """Poll `ready` on the loop (the clients' resends run there) for up to a minute."""
    for _ in range(6000):
        if ready():
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{what} did not happen within 60 s")


def test_concurrent_callers_leave_a_frozen_redis_to_the_probe_and_lose_nothing(stoppable_redis) -> None:  # noqa: F811
    proc, url = stoppable_redis

    async def run() -> tuple[int, int, int]:
        counters = RedisCounters(url)
        counters.window.retry_s = RETRY_S
        stored = aioredis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        other = RetryWindow(logging.getLogger("test"), "", "", RETRY_S, outage_of(url))    # another async client
        await counters.get("spend:team:all")
        await stored.get("id")                                    # both connected: a call is what is sent
        outage = counters.window.outage
        rounds = [0] * CALLERS
        stop = asyncio.Event()

        async def caller(i: int) -> None:
            while not stop.is_set():
                await counters.add("spend:team:all", 1, 0)
                await other.ask(lambda: stored.get("id"))
                rounds[i] += 1
                await asyncio.sleep(0.01)

        proc.send_signal(signal.SIGSTOP)
        try:
            callers = [asyncio.create_task(caller(i)) for i in range(CALLERS)]
            await until(lambda: all(rounds), "every caller's first round")
            in_flight = counters.window.failures, other.failures     # the calls under way when Redis froze
            for _ in range(3):      # three windows end, each followed by the probe's ping timing out
                ended = outage.until
                await until(lambda ended=ended: outage.until != ended, "a window ending and the ping after it failing")
            assert (counters.window.failures, other.failures) == in_flight
            stop.set()
            await asyncio.gather(*callers)
        finally:
            proc.send_signal(signal.SIGCONT)
        # The probe finds Redis answering; what was counted meanwhile, or in doubt, is sent once.
        retrying = counters.window._retrying
        await until(lambda: not counters.window.resting() and (retrying is None or retrying.done()), "the resend")
        await counters.close()
        await stored.aclose()
        return in_flight[0], sum(rounds), int(float(redis.Redis.from_url(url).get(RedisCounters.PREFIX + "spend:team:all")))

    in_flight, added, counted = asyncio.run(run())
    assert in_flight <= CALLERS
    assert counted == added
