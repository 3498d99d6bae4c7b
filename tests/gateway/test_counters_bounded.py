"""The in-process counters (and the backlog kept for Redis while it is down) forget the ones that have expired: each
key counts in a new counter every window (a minute for its rate limit), so keeping every one would grow with time
for as long as the gateway runs."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from prefixgate import redis_outage
from prefixgate.gateway import state
from prefixgate.gateway.state import PURGE_AFTER, MemoryCounters, RedisCounters


def test_expired_counters_are_purged_and_live_ones_kept(monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(state, "time", SimpleNamespace(monotonic=lambda: now[0]))
    counters = MemoryCounters()

    async def run() -> None:
        await counters.add("spend:team:all", 5, 0)            # no TTL: never expires
        for minute in range(60):
            now[0] += 60
            for key in range(100):                            # 100 keys, a new rpm counter each minute
                await counters.add(f"rpm:{key}:{minute}", 1, 120)
            await counters.add(f"rpm:0:{minute}", 1, 120)     # a live counter counts on
        assert len(counters._values) <= 2 * (2 * 100 + 1) + PURGE_AFTER
        assert await counters.get("spend:team:all") == 5
        assert await counters.get("rpm:0:59") == 2 and await counters.get("rpm:99:58") == 1
        assert await counters.get("rpm:0:0") == 0

    asyncio.run(run())


def test_a_long_redis_outage_keeps_the_backlog_of_live_windows_only(monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(state, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(redis_outage, "time", SimpleNamespace(monotonic=lambda: now[0]))   # its retry window's clock
    monkeypatch.setattr(redis_outage.Outage, "probe", lambda self: None)    # its pings would fail all along

    async def run() -> RedisCounters:
        counters = RedisCounters("redis://127.0.0.1:1/0")     # nothing listens there: down all along
        await counters.add("spend:team:all", 5, 0)
        for minute in range(60):
            now[0] += 60
            for key in range(100):
                await counters.add(f"rpm:{key}:{minute}", 1, 120)
        await counters.close()
        return counters

    counters = asyncio.run(run())
    assert len(counters.backlog) <= 2 * (2 * 100 + 1) + PURGE_AFTER
    assert counters._last_known("spend:team:all") == 5     # the first add, in doubt (it may have reached Redis)
    assert counters.backlog["rpm:7:59"][0] == 1 and "rpm:7:0" not in counters.backlog


def test_a_long_redis_outage_keeps_the_adds_in_doubt_of_live_windows_only(monkeypatch) -> None:
    """Each time Redis is tried again and fails, the add that tried is in doubt: over an outage of days (a Redis
    whose ping answers and whose adds do not), one per try, kept for ever unless those of ended windows go."""
    now = [1000.0]
    monkeypatch.setattr(state, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(redis_outage, "time", SimpleNamespace(monotonic=lambda: now[0]))   # its retry window's clock
    monkeypatch.setattr(redis_outage.Outage, "probe", lambda self: None)    # the test pings, as the probe would

    async def run() -> RedisCounters:
        counters = RedisCounters("redis://127.0.0.1:1/0")
        for minute in range(3 * PURGE_AFTER):
            now[0] += 60                                        # past RETRY_S, and the probe's ping answered:
            counters.window.outage.answered()                   # each add tries Redis again
            await counters.add(f"rpm:0:{minute}", 1, 120)
        await counters.close()
        return counters

    doubtful = asyncio.run(run()).doubtful
    assert len(doubtful) <= 2 * 2 + PURGE_AFTER
    in_doubt = {key for key, *_ in doubtful.values()}
    assert "rpm:0:3070" in in_doubt and "rpm:0:0" not in in_doubt     # the last minute's resync kept, the first's gone


def test_a_backlog_is_resynced_once_by_callers_that_arrive_together(redis_url: str) -> None:
    """When Redis is back, every caller's first add resyncs the backlog first: two arriving at once must not both
    send the same counted amount (the key would have spent twice what it did)."""
    async def run() -> float:
        counters = RedisCounters(redis_url)
        counters.backlog["spend:team:7"] = (5.0, 60, 0.0)     # counted here while Redis was down
        counters.backlog["spend:team:8"] = (1.0, 60, 0.0)
        await asyncio.gather(counters._available(), counters._available())
        value = await counters.get("spend:team:7")
        await counters.close()
        return value

    assert asyncio.run(run()) == 5.0


def test_a_resync_whose_caller_hangs_up_still_lands_what_it_took(redis_url: str) -> None:
    """The caller whose add resyncs the backlog may hang up mid-way (its task cancelled): the amount already taken
    off the backlog still reaches Redis, rather than being lost with the caller."""
    async def run() -> tuple[float, dict]:
        counters = RedisCounters(redis_url)
        counters.backlog["spend:team:9"] = (3.0, 60, 0.0)
        sending, go_on = asyncio.Event(), asyncio.Event()
        real_add = counters._add

        async def slow_add(key: str, amount: float, ttl_s: int, once: str) -> float:
            sending.set()
            await go_on.wait()          # the round trip to Redis, during which the caller hangs up
            return await real_add(key, amount, ttl_s, once)

        counters._add = slow_add  # type: ignore[method-assign]
        caller = asyncio.create_task(counters._available())
        await sending.wait()
        caller.cancel()
        await asyncio.sleep(0)
        go_on.set()
        for _ in range(500):            # until the shielded add has landed (never, without the shield)
            if (value := await counters.get("spend:team:9")):
                break
            await asyncio.sleep(0.01)
        await counters.close()
        return value, counters.backlog

    assert asyncio.run(run()) == (3.0, {})


def test_the_marks_of_a_minutes_counts_last_no_longer_than_their_counters(redis_url: str) -> None:
    """Every add leaves a mark in Redis (so one resent after a timeout counts once): a request per minute and its
    tokens left two that lived 10 minutes, though an add in doubt is resent only while its counter lives (120 s);
    at 1,000 requests a second that was 1.2 million marks where 240,000 do."""
    import redis

    async def run() -> None:
        counters = RedisCounters(redis_url)
        await counters.add("rpm:team:1000", 1, 120)
        await counters.add("spend:team:all", 5, 0)       # a window that never ends: its mark keeps the full ONCE_S
        await counters.close()

    asyncio.run(run())
    db = redis.Redis.from_url(redis_url)
    ttls = sorted(db.ttl(k) for k in db.scan_iter("prefixgate:once:*"))
    assert len(ttls) == 2 and 0 < ttls[0] <= 120 and ttls[1] > 120
