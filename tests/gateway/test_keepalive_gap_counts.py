"""Keep-alive's gap counts added up by replicas in Redis (`prefixgate/summed_counts.py`, used by
`gateway/keepalive_shared.py` as by the planner's `cache_planner/reuse_shared.py`).

- What two replicas counted is their sum on both, the hash expiring a day after its last add.
- Added up, a route's counts are halved where a model alone halves its own (past `MAX_WEIGHT` returned and censored
  idle times), so a shared model follows a changing route as fast as one replica's does.
- A frozen Redis costs the keep-alive worker one 0.5 s timeout a retry window, not one per tick (docs/reliability.md:
  "A frozen Redis costs at most one request per second a 0.5 s timeout"), and the counts wait for the next try."""

from __future__ import annotations

import asyncio
import signal
import time

import redis

from prefixgate.cache_planner.lifetime import GAP_EDGES, MAX_WEIGHT, GapBook, GapModel
from prefixgate.gateway.keepalive_shared import SharedSessions
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401  (a fixture)

ROUTE = "tenant:chat/chat"
GAP_S = 180


def returns(book: GapBook, n: int, session: str = "s") -> GapBook:
    """A session back `n` times, each after `GAP_S`."""
    for i in range(n + 1):
        book.observe(ROUTE, "", session, i * GAP_S)
    return book


def test_two_replicas_counts_are_their_sum_on_both(redis_url: str) -> None:
    async def run() -> tuple[GapModel, GapModel]:
        a, b = SharedSessions(redis_url, lease_s=65), SharedSessions(redis_url, lease_s=65)
        try:
            on_a, on_b = returns(GapBook(shared=True), 3, "a"), returns(GapBook(shared=True), 2, "b")
            await a.share_gaps(on_a, time.monotonic())
            await b.share_gaps(on_b, time.monotonic())
            await a.share_gaps(on_a, time.monotonic() + 10)      # A rereads the route's counts every 10 s
            return on_a.model(ROUTE, ""), on_b.model(ROUTE, "")
        finally:
            await a.aclose()
            await b.aclose()

    for model in asyncio.run(run()):
        assert model.returns == 5 and model.returned[GAP_EDGES.index(GAP_S)] == 5 and not model.unshared
    [key] = redis.Redis.from_url(redis_url).scan_iter("prefixgate:keepalive:gaps:*")
    assert 0 < redis.Redis.from_url(redis_url).pttl(key) <= 86_400_000


def test_added_up_counts_halve_where_one_models_do(redis_url: str) -> None:
    alone = returns(GapBook(), int(MAX_WEIGHT) + 1).model(ROUTE, "")
    assert alone.returned[GAP_EDGES.index(GAP_S)] == (MAX_WEIGHT + 1) / 2

    async def run() -> GapModel:
        shared = SharedSessions(redis_url, lease_s=65)
        try:
            book = returns(GapBook(shared=True), int(MAX_WEIGHT) + 1)
            await shared.share_gaps(book, time.monotonic())
            return book.model(ROUTE, "")
        finally:
            await shared.aclose()

    model = asyncio.run(run())
    assert (model.returned, model.censored) == (alone.returned, alone.censored) and not model.unshared


def test_a_frozen_redis_costs_one_timeout_a_retry_window(stoppable_redis) -> None:  # noqa: F811
    proc, url = stoppable_redis

    async def run() -> tuple[list[int], GapModel]:
        shared = SharedSessions(url, lease_s=65)
        book = returns(GapBook(shared=True), 1)
        try:
            await shared.share_gaps(book, time.monotonic())          # connected, and shared
            proc.send_signal(signal.SIGSTOP)
            failed = []
            for i in range(3):                                        # three ticks within a second
                returns(book, 1, session=f"s{i}")
                await shared.share_gaps(book, time.monotonic())
                failed.append(shared.window.failures)
            return failed, book.model(ROUTE, "")
        finally:
            proc.send_signal(signal.SIGCONT)
            await shared.aclose()

    failed, model = asyncio.run(run())
    # The first tick called the frozen Redis and timed out; the next two left it alone (a call would have failed).
    assert failed == [1, 1, 1]
    # Decided on here meanwhile, as a single replica: the first return shared, the three since kept to share.
    assert model.returns == 4 and model.unshared == {f"r|{GAP_EDGES.index(GAP_S)}": 3.0, "n": 3.0}
