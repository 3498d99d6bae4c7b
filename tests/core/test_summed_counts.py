"""Counts replicas add up in Redis (`prefixgate/summed_counts.py`): what a replica counted while Redis was left alone
(its retry window after a failed call) waits for the next try and reaches Redis then, without the key having to be
counted again (a route that went quiet during an outage would otherwise never share what it counted)."""

from __future__ import annotations

import logging
import time

import redis

from prefixgate.summed_counts import RetryWindow, SummedCounts

RETRY_S = 0.2


class Deltas:
    """One key's counts on this replica (`summed_counts.Counted`)."""

    def __init__(self, **deltas: float) -> None:
        self.unshared, self.totals = dict(deltas), {}

    def take_unshared(self) -> dict[str, float]:
        taken, self.unshared = self.unshared, {}
        return taken

    def give_back(self, taken: dict[str, float]) -> None:
        for name, n in taken.items():
            self.unshared[name] = self.unshared.get(name, 0.0) + n

    def shared_totals(self, totals: dict[str, float]) -> None:
        self.totals = totals


def test_counts_made_while_redis_rests_are_shared_once_it_may_be_asked_again(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    window = RetryWindow(logging.getLogger("test"), "redis down (%s)", "redis up", retry_s=RETRY_S)
    summed = SummedCounts(client, window, ttl_s=60, every_s=0.0)
    counts = Deltas(requests=3)
    window.failed(TimeoutError())       # another call of this replica's timed out a moment ago
    summed.counted("counts:chat", counts)
    summed.flush(time.monotonic())
    assert client.hgetall("counts:chat") == {} and counts.unshared == {"requests": 3}
    assert summed.pending()             # still to be shared: a writer waiting for work keeps going
    time.sleep(RETRY_S + 0.05)
    summed.flush(time.monotonic())
    assert client.hgetall("counts:chat") == {b"requests": b"3"}
    assert counts.totals == {"requests": 3.0} and counts.unshared == {}


def test_a_batch_redis_did_not_answer_is_shared_at_the_next_flush_without_another_count(redis_url: str) -> None:
    # A route that went quiet after its send timed out still shares what it counted once Redis answers: its
    # deltas given back stay due (the writer thread keeps going while anything is pending).
    client = redis.Redis.from_url(redis_url)
    window = RetryWindow(logging.getLogger("test"), "redis down (%s)", "redis up", retry_s=0.0)
    summed = SummedCounts(client, window, ttl_s=60, every_s=0.0)
    counts = Deltas(requests=3)
    summed.counted("counts:quiet", counts)
    batch = summed.take(time.monotonic())
    summed.settle(batch, None)          # its round trip timed out
    assert counts.unshared == {"requests": 3} and summed.pending()
    summed.flush(time.monotonic())
    assert client.hgetall("counts:quiet") == {b"requests": b"3"} and not summed.pending()


def test_a_key_redis_refuses_leaves_the_others_counted_once(redis_url: str, caplog) -> None:
    # Redis answers a pipeline command by command: one key refused (WRONGTYPE: it holds a string) does not undo
    # the others' adds, so giving those back would add them again at the next flush.
    client = redis.Redis.from_url(redis_url)
    client.set("counts:clash", "a string")
    window = RetryWindow(logging.getLogger("test"), "redis down (%s)", "redis up", retry_s=RETRY_S)
    summed = SummedCounts(client, window, ttl_s=60, every_s=0.0)
    good, clash = Deltas(requests=3), Deltas(requests=5)
    summed.counted("counts:good", good)
    summed.counted("counts:clash", clash)
    with caplog.at_level(logging.WARNING, logger="test"):
        summed.flush(time.monotonic())
    assert good.totals == {"requests": 3.0} and good.unshared == {}
    assert clash.unshared == {"requests": 5}        # kept here, counted on this replica
    assert not window.resting()                     # Redis answered: no client leaves it alone for a refusal
    assert sum("redis refused a command" in r.getMessage() for r in caplog.records) == 1
    good.unshared = {"requests": 1.0}
    summed.counted("counts:good", good)
    summed.flush(time.monotonic())
    assert client.hgetall("counts:good") == {b"requests": b"4"}     # 3 + 1, each added once
