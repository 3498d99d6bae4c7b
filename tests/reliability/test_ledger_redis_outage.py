"""The ledger's copy to Redis (ledger_redis) shares the server's one outage with every other Redis client of the
process (prefixgate/redis_outage.py): while another client has found Redis frozen, the copy leaves it alone (its
rows wait in SQLite) instead of paying its own timeout each try; a copy that fails rests the others; once the probe's
ping answers, the rows go over, each once. Counted, not timed: a client that called the frozen Redis failed."""

from __future__ import annotations

import json
import logging
import signal
import time
from collections.abc import Iterator

import pytest
import redis

from prefixgate.ledger import STREAM, Ledger, LedgerRecord
from prefixgate.ledger_redis import RedisSync
from prefixgate.redis_outage import RetryWindow, outage_of
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401
from tests.support_services import wait_until


@pytest.fixture
def copying(stoppable_redis, tmp_path) -> Iterator[tuple]:  # noqa: F811
    """(redis-server process, ledger, its copy to Redis, another client of that Redis, that client's connection)."""
    proc, url = stoppable_redis
    ledger = Ledger(str(tmp_path / "ledger.sqlite"))
    sync = RedisSync(url, ledger.path)
    other = RetryWindow(logging.getLogger("test"), "", "", 0.05, outage_of(url))
    conn = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        yield proc, ledger, sync, other, conn
    finally:
        proc.send_signal(signal.SIGCONT)
        sync.close()
        ledger.close()
        conn.close()


def append(ledger: Ledger, *ids: str) -> None:
    for i in ids:
        ledger.append(LedgerRecord(id=i, ts=time.time(), route="r", uncached_input=1))


def copied(conn: redis.Redis) -> list[str]:
    return [json.loads(e[b"record"])["id"] for _, e in conn.xrange(STREAM)]


def test_the_copy_leaves_redis_alone_while_another_client_found_it_frozen_and_loses_nothing(copying):
    proc, ledger, sync, other, conn = copying
    append(ledger, "a1", "a2")
    assert sync.push() == 2
    proc.send_signal(signal.SIGSTOP)
    assert other.ask_now(lambda: conn.get("x")) is None and other.failures == 1     # in flight when it froze
    append(ledger, "b1", "b2")
    for _ in range(3):
        assert sync.push() == 0
    assert sync.failures == 0       # never called the frozen Redis: the rows wait in SQLite
    proc.send_signal(signal.SIGCONT)
    wait_until(lambda: not other.resting(), 30, "the probe's ping answering")
    wait_until(lambda: sync.push() >= 0 and len(copied(conn)) == 4, 30, "the waiting rows copied")
    assert copied(conn) == ["a1", "a2", "b1", "b2"]


def test_a_copy_that_fails_rests_every_other_client_of_that_redis(copying):
    proc, ledger, sync, other, conn = copying
    append(ledger, "a1")
    assert sync.push() == 1
    append(ledger, "b1")
    proc.send_signal(signal.SIGSTOP)
    assert sync.push() == 0 and sync.failures == 1       # in flight when it froze: its one timeout
    assert other.ask_now(lambda: conn.get("x")) is None and other.failures == 0
    proc.send_signal(signal.SIGCONT)
    wait_until(lambda: not other.resting(), 30, "the probe's ping answering")
    wait_until(lambda: sync.push() >= 0 and len(copied(conn)) == 2, 30, "the waiting row copied")
    assert copied(conn) == ["a1", "b1"]
