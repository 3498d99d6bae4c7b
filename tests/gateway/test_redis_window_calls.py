"""How a client's calls go through its Redis server's one retry window (prefixgate/redis_outage.py): a response store
tells the call that failed from the calls the window left alone (the cache logs a bypass for the first only), and the
planner's synchronous store logs its outage's `down` and `up` lines once each, as every other client does."""

from __future__ import annotations

import asyncio
import logging
import signal

import pytest

from prefixgate.cache_planner.stability import RedisStore as PlannerStore
from prefixgate.cache_planner.stability import RouteState
from prefixgate.gateway.response_store import RedisStore as ResponseStore
from prefixgate.gateway.response_store import StoreError, StoreResting
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401
from tests.support_services import wait_until

DOWN = ("planner: redis unreachable (TimeoutError); each replica learns reuse gaps from its own requests until it "
        "answers (a conversation alternating between replicas shows each longer gaps)")
UP = "planner: redis answers again; replicas share reuse gaps"


def test_a_response_store_tells_its_failed_call_from_those_the_window_left_alone(stoppable_redis) -> None:  # noqa: F811
    proc, url = stoppable_redis
    responses, planner = ResponseStore(url), PlannerStore(url)
    responses._window.retry_s = 600     # the window outlasts the test, however slow the machine

    async def run() -> tuple[BaseException, BaseException]:
        await responses.put("k", b"entry", 60)
        proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(StoreError) as failed:
                await responses.get("k")            # waits its timeout: the window starts
            with pytest.raises(StoreError) as left_alone:
                await responses.get("k")
        finally:
            proc.send_signal(signal.SIGCONT)
        await responses.close()
        return failed.value, left_alone.value

    failed, left_alone = asyncio.run(run())
    assert not isinstance(failed, StoreResting) and isinstance(left_alone, StoreResting)
    assert responses._window.failures == 1
    assert planner.load("chat") is None and planner.failures == 0       # every client of that server rests


def test_the_planner_store_logs_its_outage_down_and_up_once(stoppable_redis, caplog) -> None:  # noqa: F811
    proc, url = stoppable_redis
    caplog.set_level(logging.WARNING, logger="prefixgate.planner")
    planner = PlannerStore(url)
    planner.save("chat", RouteState())
    proc.send_signal(signal.SIGSTOP)
    try:
        assert planner.load("chat") is None and planner.failures == 1
    finally:
        proc.send_signal(signal.SIGCONT)
    wait_until(lambda: planner.load("chat") is not None, 10, "the planner store reading Redis again")
    lines = [r.message for r in caplog.records]
    assert (lines.count(DOWN), lines.count(UP)) == (1, 1)
