"""Writes that fall in the shared retry window (`prefixgate/redis_outage.py`) are not lost. Once any client of a
Redis has timed out, every other client leaves it alone for the window, even though Redis may answer again at
once (a stall of half a second): a file quota's add or remove, or a stored id's owner, skipped then would never
reach Redis. Another replica would count a tenant's upload as never made (its `uploads` limit passed) or its
deleted file for that file's lifetime (its uploads refused), refuse the tenant's own stored response, and replay
an answer deleted upstream.
They are sent once Redis answers, by this replica alone, however quiet it stays."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable, Callable

import redis
import redis.asyncio
from prometheus_client import CollectorRegistry

from prefixgate.gateway.file_quota import FileQuota, Stored
from prefixgate.gateway.response_cache import ResponseCache
from prefixgate.gateway.response_store import REDIS_PREFIX
from prefixgate.gateway.shared_later import SharedLater
from prefixgate.gateway.state import RedisCounters
from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.redis_outage import Outage, RetryWindow, outage_of
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401
from tests.support_services import MIN_WAIT_S

# Long enough that the writes below fall in the window on a loaded machine; they are sent after it.
WINDOW_S = 5.0


async def _stalled_for_a_moment(proc, url: str) -> RedisCounters:
    """Redis freezes for one budget add's timeout and answers again: every client of it rests for the window."""
    counters = RedisCounters(url)
    counters.window.retry_s = WINDOW_S
    await counters.get("spend:team:all")        # connected
    proc.send_signal(signal.SIGSTOP)
    try:
        await counters.add("spend:team:all", 5, 0)
    finally:
        proc.send_signal(signal.SIGCONT)
    assert counters.window.failures == 1
    return counters


async def _eventually(ready: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + MIN_WAIT_S
    while not await ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {MIN_WAIT_S:.0f} s")
        await asyncio.sleep(0.05)


def test_uploads_and_deletions_counted_while_redis_rested_reach_every_replica(stoppable_redis, tmp_path) -> None:  # noqa: F811
    proc, url = stoppable_redis

    async def run() -> None:
        here, there = FileQuota(str(tmp_path / "a.sqlite"), url), FileQuota(str(tmp_path / "b.sqlite"), url)
        await here.add("tenant:acme", "file-old", 4000, 3600)
        await here.add("tenant:acme", "file-written", 0, 3600)     # code execution's file: its size comes later
        counters = await _stalled_for_a_moment(proc, url)
        await here.add("tenant:acme", "file-new", 1000, 3600)      # an upload ends in the window
        await here.remove("tenant:acme", "file-old")               # a file is deleted in it
        await here.adjust("tenant:acme", "file-written", 300)      # and a written file's size is learnt
        assert here._window.failures == 0                          # none of them called Redis meanwhile

        async def counted() -> bool:
            return await there.stored("tenant:acme") == Stored(1300, 2)
        await _eventually(counted, "another replica counting the upload and the size, and not the deleted file")
        for closing in (here.aclose(), there.aclose(), counters.close()):
            await closing

    asyncio.run(run())


def test_a_stored_ids_owner_written_while_redis_rested_reaches_redis_with_nothing_else_written(
        stoppable_redis) -> None:  # noqa: F811
    proc, url = stoppable_redis
    reader = redis.Redis.from_url(url)

    async def run() -> None:
        window = RetryWindow(logging.getLogger("test"), "down (%s)", "up", outage=outage_of(url))
        shared = SharedLater(redis.asyncio.from_url(url), window)
        counters = await _stalled_for_a_moment(proc, url)
        shared.set("prefixgate:stored:response:resp_1", {"owner": "tenant:acme"}, 3600)    # the replica's last write

        async def written() -> bool:
            return reader.hget("prefixgate:stored:response:resp_1", "owner") == b"tenant:acme"
        await _eventually(written, "the owner reaching Redis")
        await shared.drain()
        await counters.close()

    asyncio.run(run())


def test_a_deleted_answers_entry_is_dropped_from_redis_with_no_later_lookup_here(stoppable_redis) -> None:  # noqa: F811
    """Another replica reads the entry from Redis: this one dropping it at its next lookup is too late when none
    comes (it is quiet, or serves no cached route), and the other would replay the deleted answer."""
    proc, url = stoppable_redis
    reader = redis.Redis.from_url(url)

    async def run() -> None:
        cache = ResponseCache(url, CollectorRegistry())
        await cache._redis.put("k1", b"an answer", 600, ident="resp_1")     # type: ignore[union-attr]
        counters = await _stalled_for_a_moment(proc, url)
        await cache.forget("resp_1")            # deleted upstream within the window

        async def dropped() -> bool:
            return reader.get(REDIS_PREFIX + "k1") is None
        await _eventually(dropped, "the deleted answer's entry leaving Redis")
        await cache.close()
        await counters.close()

    asyncio.run(run())


def test_a_spend_settled_while_redis_rested_reaches_the_other_replicas_with_no_later_request_here(
        stoppable_redis) -> None:  # noqa: F811
    """The spend waited in this replica's backlog for its next call to the counters: a replica the load balancer
    sent nothing more kept it from the others, where the key could spend its budget again."""
    proc, url = stoppable_redis

    async def run() -> None:
        here, there = RedisCounters(url), RedisCounters(url)
        there.window.outage = Outage()          # another replica's process: its own view of the outage
        counters = await _stalled_for_a_moment(proc, url)
        await here.add("spend:acme:all", 0.75, 0)       # the last request here settles in the window

        async def shared() -> bool:
            return await there.get("spend:acme:all") == 0.75
        await _eventually(shared, "the other replica seeing the spend")
        for closing in (here.close(), there.close(), counters.close()):
            await closing

    asyncio.run(run())


def test_a_stored_id_deleted_while_redis_rested_is_nobodys_on_every_replica(stoppable_redis, tmp_path) -> None:  # noqa: F811
    """docs/security.md: a deleted id is nobody's on every replica. Its owner's deletion from Redis skipped in the
    window left the owner there for the id's lifetime (31 days), so every replica still let its tenant use it."""
    proc, url = stoppable_redis

    async def run() -> None:
        here, there = StoredIds(str(tmp_path / "a.sqlite"), url), StoredIds(str(tmp_path / "b.sqlite"), url)
        here.record("response", "resp_1", "tenant:acme")

        async def owned() -> bool:
            return await there.owner("response", "resp_1") == "tenant:acme"
        await _eventually(owned, "another replica seeing the owner")
        counters = await _stalled_for_a_moment(proc, url)
        await here.forget("response", "resp_1")        # deleted upstream within the window

        async def nobodys() -> bool:     # read from Redis, once the window is over (meanwhile: its own file's None)
            return not outage_of(url).resting() and await there.owner("response", "resp_1") is None
        await _eventually(nobodys, "the deleted id being nobody's on another replica")
        assert await here.owner("response", "resp_1") is None
        for closing in (here.aclose(), there.aclose(), counters.close()):
            await closing

    asyncio.run(run())


def test_a_write_redis_refuses_is_retried_a_window_later_not_in_a_spin(monkeypatch) -> None:
    """A kept write that Redis answers by refusing it (a WRONGTYPE, a script's error) does not rest the shared
    outage (the server is up), so the retry loop found no window to wait for and tried again every 50 ms, for as long
    as Redis kept refusing: now it waits its client's retry window between tries."""
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    async def run() -> int:
        window = RetryWindow(logging.getLogger("test"), "", "", retry_s=2.0, outage=Outage())
        tries = 0

        async def done() -> bool:
            nonlocal tries
            tries += 1
            if tries < 4:
                window.failed(redis.exceptions.ResponseError("WRONGTYPE Operation against a key"))
                return False
            return True

        monkeypatch.setattr(asyncio, "sleep", recorded)
        window.retry(done)
        await window._retrying
        return tries

    assert asyncio.run(run()) == 4
    assert slept == [2.0, 2.0, 2.0]
