"""docs/reliability.md: "A frozen Redis costs at most one request per second a 0.5 s timeout." A request touches
Redis through several clients (budget counters, the planner's store, stored ids, file quotas, the response cache):
once one of them has waited its timeout, the others leave the same Redis alone for the retry window and answer
from this replica, so the request waits once, not once per client (CI saw a 1.0 s request: counters, then the
planner). A client that called a frozen Redis would have failed: `failures == 0` is "never called it"."""

from __future__ import annotations

import asyncio
import signal

import pytest

from prefixgate.cache_planner.stability import RedisStore as PlannerStore
from prefixgate.cache_planner.stability import RouteState
from prefixgate.gateway.file_quota import FileQuota
from prefixgate.gateway.response_store import RedisStore as ResponseStore
from prefixgate.gateway.response_store import StoreError
from prefixgate.gateway.state import RedisCounters
from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.redis_outage import outage_of
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401


def test_clients_of_one_server_share_its_window_and_others_do_not() -> None:
    assert outage_of("redis://127.0.0.1:7001/0") is outage_of("redis://127.0.0.1:7001/5")   # databases of one server
    assert outage_of("redis://127.0.0.1:7001/0") is not outage_of("redis://127.0.0.1:7002/0")
    assert outage_of("redis://localhost/0") is outage_of("redis://localhost:6379/1")          # the default port


def test_after_one_client_times_out_on_a_frozen_redis_the_others_answer_without_calling_it(
        stoppable_redis, tmp_path) -> None:  # noqa: F811
    proc, url = stoppable_redis

    async def run() -> None:
        counters, planner = RedisCounters(url), PlannerStore(url)
        ids = StoredIds(str(tmp_path / "ids.sqlite"), url)
        quota, responses = FileQuota(str(tmp_path / "files.sqlite"), url), ResponseStore(url)
        ids.record("response", "resp_1", "tenant:acme")
        await quota.add("tenant:acme", "file-1", 1000, 3600)
        await counters.get("spend:team:all")                       # every client answered by a live Redis
        proc.send_signal(signal.SIGSTOP)
        try:
            await counters.add("spend:team:all", 5, 0)             # waits its 0.5 s timeout: the window starts
            assert counters.window.failures == 1
            # The others answer from this replica at once.
            assert planner.load("chat") is None and planner.failures == 0
            assert await ids.owner("response", "resp_1") == "tenant:acme"       # this replica's own file
            assert await quota.size_of("tenant:acme", "file-1") == 1000
            with pytest.raises(StoreError):
                await responses.get("k")
            assert ids._window.failures == quota._window.failures == responses._window.failures == 0
            assert await counters.get("spend:team:all") == 5        # and the counters count in memory meanwhile
            assert counters.window.failures == 1
        finally:
            proc.send_signal(signal.SIGCONT)
        for closing in (counters.close(), ids.aclose(), quota.aclose(), responses.close()):
            await closing

    asyncio.run(run())


def test_a_command_redis_refuses_rests_no_client(redis_url: str) -> None:
    """Redis answering a command with an error (WRONGTYPE here; a command an older Redis lacks, a script's error) is
    up: the client that sent it goes on without the answer, and no other client of that Redis rests for it."""
    import redis

    redis.Redis.from_url(redis_url).hset(RedisCounters.PREFIX + "spend:team:all", "not", "a counter")

    async def run() -> None:
        counters = RedisCounters(redis_url)
        assert await counters.get("spend:team:all") == 0          # refused: this replica's view
        assert counters.window.failures == 1
        await counters.close()

    asyncio.run(run())
    assert not outage_of(redis_url).resting()
    planner = PlannerStore(redis_url)
    planner.save("chat", RouteState())
    assert planner.load("chat") is not None and planner.failures == 0
