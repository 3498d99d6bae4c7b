"""A replica that loses Redis counts on from what Redis last said each counter held. It used to count from
nothing: a key that had spent its whole budget (through any replica) could spend it again on every replica
for as long as Redis was down, and its rate limit started over too."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
from decimal import Decimal

import pytest
import redis

from prefixgate.errors import RequestError
from prefixgate.gateway.state import RedisCounters
from prefixgate.policies.limits import Limits
from prefixgate.policies.schema import Budget, CallerKey, RateLimit
from tests.support_services import start_on_free_port

KEY = CallerKey("team", "0" * 64, budget=Budget(usd=1.0, period="total"), rate_limit=RateLimit(requests_per_minute=3))
NOW = 1_000 * 60 + 1.0


def _answers(port: int) -> bool:
    try:
        return redis.Redis(port=port, socket_timeout=0.2).ping()
    except redis.RedisError:
        return False


@pytest.fixture
def stoppable_redis(tmp_path):
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; `make test` installs it")
    proc, port = start_on_free_port(lambda port: subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), _answers, "redis-server")
    yield proc, f"redis://127.0.0.1:{port}/0"
    if proc.poll() is None:
        proc.terminate()
        proc.wait(10)


def test_a_spent_budget_and_a_used_rate_stay_spent_while_redis_is_down(stoppable_redis):
    proc, url = stoppable_redis

    async def run() -> list[str]:
        a, b = RedisCounters(url), RedisCounters(url)
        replica_a, replica_b = Limits(a, clock=lambda: NOW), Limits(b, clock=lambda: NOW)
        # Replica b spends the key's whole $1; replica a reads that spend from Redis.
        await replica_b.settle(KEY, await replica_b.admit(KEY), tokens=0, cost_usd=Decimal("1.00"))
        with pytest.raises(RequestError):
            await replica_a.admit(KEY)
        proc.terminate()
        proc.wait(10)
        refusals = []
        for replica in (replica_a, replica_b):
            with pytest.raises(RequestError) as e:
                await replica.admit(KEY)
            refusals.append(e.value.message)
        await a.close()
        await b.close()
        return refusals

    assert all("budget" in message for message in asyncio.run(run()))


def test_a_rate_limit_counts_on_from_redis_while_it_is_down(stoppable_redis):
    proc, url = stoppable_redis
    key = CallerKey("team", "0" * 64, rate_limit=RateLimit(requests_per_minute=3))

    async def run() -> str:
        counters = RedisCounters(url)
        limits = Limits(counters, clock=lambda: NOW)
        for _ in range(3):
            await limits.admit(key)                 # the minute's three requests, counted in Redis
        proc.terminate()
        proc.wait(10)
        with pytest.raises(RequestError) as e:
            await limits.admit(key)                 # the fourth in the same minute
        await counters.close()
        return e.value.message

    assert "requests per minute" in asyncio.run(run())


def test_a_spend_whose_add_timed_out_against_a_frozen_redis_counts_once(stoppable_redis):
    """A frozen Redis (SIGSTOP: a fork, a long pause) still runs the add it was sent when it wakes, after the
    replica gave up waiting and counted the amount itself: the resync added it a second time ($1 billed, $2
    spent)."""
    proc, url = stoppable_redis
    key = CallerKey("team", "0" * 64, budget=Budget(usd=100.0, period="total"))

    async def run() -> float:
        counters = RedisCounters(url)
        limits = Limits(counters, clock=lambda: NOW)
        held = await limits.admit(key, Decimal("1.00"))
        proc.send_signal(signal.SIGSTOP)
        try:
            await limits.settle(key, held, tokens=0, cost_usd=Decimal("1.00"))     # times out
        finally:
            proc.send_signal(signal.SIGCONT)
        await resent(counters)
        spent = await counters.get("spend:team:all")       # Redis answers again: what was in doubt is resent
        await counters.close()
        return spent

    assert asyncio.run(run()) == 1_000_000_000      # nanodollars: $1.00 once


async def resent(counters: RedisCounters) -> None:
    """Wait, on the loop (the resend runs there), until Redis is called again (the window over and the probe's ping
    answered: not at the window's end, `prefixgate/redis_outage.py`) and what was kept or in doubt has been resent."""
    retrying = counters.window._retrying
    for _ in range(1200):
        if not counters.window.resting() and (retrying is None or retrying.done()):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("what the replica kept was not resent within 60 s")


def _frozen_during(proc, step):
    """Run `step` (a coroutine) with Redis stopped (SIGSTOP), then wake it: Redis runs what it was sent meanwhile."""
    async def run():
        proc.send_signal(signal.SIGSTOP)
        try:
            return await step
        finally:
            proc.send_signal(signal.SIGCONT)
    return run()


def test_a_request_counted_against_a_frozen_redis_counts_once_per_minute(stoppable_redis):
    """The rate limit's add timed out the same way; it was counted in the replica and added again at the resync:
    one request took two of the minute's slots."""
    proc, url = stoppable_redis
    key = CallerKey("team", "0" * 64, rate_limit=RateLimit(requests_per_minute=10))

    async def run() -> float:
        counters = RedisCounters(url)
        limits = Limits(counters, clock=lambda: NOW)
        await counters.get("x")                                      # connected: the add itself is what is sent
        await _frozen_during(proc, limits.admit(key))                # its add times out
        await resent(counters)
        count = await counters.get(f"rpm:team:{int(NOW // 60)}")     # Redis answers again: the add in doubt resent
        await counters.close()
        return count

    assert asyncio.run(run()) == 1


def test_tokens_counted_against_a_frozen_redis_count_once_per_minute(stoppable_redis):
    proc, url = stoppable_redis
    key = CallerKey("team", "0" * 64, rate_limit=RateLimit(tokens_per_minute=100_000))

    async def run() -> float:
        counters = RedisCounters(url)
        limits = Limits(counters, clock=lambda: NOW)
        held = await limits.admit(key)
        await _frozen_during(proc, limits.settle(key, held, tokens=1200, cost_usd=Decimal(0)))
        await resent(counters)
        used = await counters.get(f"tpm:team:{int(NOW // 60)}")
        await counters.close()
        return used

    assert asyncio.run(run()) == 1200


def test_an_outage_backlog_whose_resync_timed_out_counts_once(stoppable_redis):
    """What a replica counted while Redis was down is added when it answers; a resync add that timed out (Redis
    froze again) was put back and sent a second time."""
    proc, url = stoppable_redis

    async def run() -> float:
        counters = RedisCounters(url)
        await counters.get("x")                     # connected
        counters.window.failed()                    # known down: the next adds wait in the backlog
        await counters.add("keepalive:r:all", 500, 0)
        await counters.add("keepalive:r:all", 250, 0)
        counters.window.outage.until = 0.0          # the window over and the probe's ping answered: Redis is
        counters.window.outage.answered()           # called again, the backlog resent first, and it times out
        await _frozen_during(proc, counters.get("keepalive:r:all"))
        await resent(counters)
        value = await counters.get("keepalive:r:all")
        await counters.close()
        return value

    assert asyncio.run(run()) == 750
