"""A frozen Redis must not stall the event loop. The planner's store is a synchronous client the loop calls on every
request's way: each call that waits on a frozen Redis holds every request on the replica, not one. Before, it called
Redis again at the end of every retry window (0.5 s of the whole replica's time a second: measured with 8 concurrent
callers, two stalls of 0.5 s in a 6 s freeze). Now (prefixgate/redis_outage.py, `ask_quick`) once any client of the
server has failed (or a call of its own timed out, after 0.25 s) the store leaves Redis alone until a call answers,
whatever the window says, and a thread pings Redis meanwhile. Counted, not timed: a quick client that called a frozen
Redis would have failed (`failures`)."""

from __future__ import annotations

import asyncio
import signal
import time

from prefixgate.cache_planner.stability import RedisStore as PlannerStore
from prefixgate.cache_planner.stability import RouteState
from prefixgate.gateway.state import RedisCounters
from prefixgate.redis_outage import QUICK_TIMEOUT_S
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401
from tests.support_services import wait_until

RETRY_S = 0.05      # windows that pass quickly, so the test sees several while Redis stays frozen


def test_after_another_client_failed_the_planner_leaves_a_frozen_redis_alone_past_its_window(
        stoppable_redis) -> None:  # noqa: F811
    proc, url = stoppable_redis
    planner = PlannerStore(url)
    planner.save("chat", RouteState())

    async def run() -> None:
        counters = RedisCounters(url)
        counters.window.retry_s = RETRY_S
        await counters.get("spend:team:all")
        proc.send_signal(signal.SIGSTOP)
        try:
            await counters.add("spend:team:all", 5, 0)             # waits its timeout (off the loop): a window starts
            assert counters.window.failures == 1
            outage = planner.window.outage
            wait_until(lambda: time.monotonic() > outage.until, 10, "the window ending")
            # The window is over, Redis still frozen: a request's planning on the loop would block the replica.
            for _ in range(3):
                assert planner.load("chat") is None
                wait_until(lambda: time.monotonic() > outage.until, 10, "the probe's window ending")
            assert planner.failures == 0
        finally:
            proc.send_signal(signal.SIGCONT)
        await counters.close()

    asyncio.run(run())
    # The probe finds Redis answering again; the planner reads it as before.
    wait_until(lambda: planner.load("chat") is not None, 10, "the planner store reading Redis again")
    assert planner.failures == 0


def test_the_planner_that_finds_redis_frozen_itself_calls_it_once_an_outage(stoppable_redis) -> None:  # noqa: F811
    proc, url = stoppable_redis
    planner = PlannerStore(url, retry_s=RETRY_S)
    planner.save("chat", RouteState())
    proc.send_signal(signal.SIGSTOP)
    try:
        assert planner.load("chat") is None and planner.failures == 1      # its quick timeout: the probe pings
        for _ in range(3):
            wait_until(lambda: time.monotonic() > planner.window.outage.until, 10, "the window ending")
            assert planner.load("chat") is None
        assert planner.failures == 1
    finally:
        proc.send_signal(signal.SIGCONT)
    wait_until(lambda: planner.load("chat") is not None, 10, "the planner store reading Redis again")


def test_the_probe_stops_once_nobody_asks(stoppable_redis) -> None:  # noqa: F811
    proc, url = stoppable_redis
    planner = PlannerStore(url, retry_s=RETRY_S)
    proc.terminate()
    proc.wait(10)
    outage = planner.window.outage
    assert planner.load("chat") is None and planner.failures == 1      # refused: in doubt, the probe starts
    assert planner.load("chat") is None
    wait_until(lambda: outage._probe is None, 10, "the probe ending with nobody asking")
    assert outage.until > 0         # it pinged, refused: every client rests a window
    assert outage.doubted and planner.failures == 1


def test_the_loop_calls_redis_with_the_quick_timeout_and_the_writer_thread_with_the_usual_one(
        stoppable_redis) -> None:  # noqa: F811
    _, url = stoppable_redis
    planner = PlannerStore(url)
    quick = planner.client.connection_pool.connection_kwargs
    usual = planner.reuse.writer.connection_pool.connection_kwargs
    assert quick["socket_timeout"] == quick["socket_connect_timeout"] == QUICK_TIMEOUT_S < 0.5
    assert usual["socket_timeout"] == usual["socket_connect_timeout"] == 0.5


def test_a_quick_timeout_on_a_live_redis_rests_no_client(stoppable_redis) -> None:  # noqa: F811
    """Its shorter wait is no verdict (a loaded runner's Redis answered in up to 144 ms): the probe's ping decides."""
    _, url = stoppable_redis
    planner = PlannerStore(url)
    planner.save("chat", RouteState())
    outage = planner.window.outage
    planner.window.failed(TimeoutError("quick call timed out"), rest=False)
    assert outage.doubted and not outage.resting()      # the other clients call Redis as before
    assert planner.load("chat") is None                  # the planner waits for the ping
    wait_until(lambda: not outage.doubted, 10, "the probe's ping answering")
    assert planner.load("chat") is not None and not outage.resting()
