"""A batch the Redis copy script cannot finish (a running count that would overflow 64 bits) adds nothing: a
Lua script is not rolled back when a call fails, and the stream's entries used to go in before the totals, so
each retry of the failed batch added its records to the stream again (2 records became 6 after 3 tries)."""

from __future__ import annotations

import json
import time

import redis

from prefixgate.ledger import STREAM, TOTALS, Ledger, LedgerRecord
from prefixgate.ledger_redis import RedisSync


def test_a_failed_batch_adds_nothing_and_its_retries_no_duplicates(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)
    r.delete(STREAM, TOTALS)
    r.hset(TOTALS, mapping={"requests": 2**63 - 1, "cost_picousd": 5})      # a count at Redis's integer edge
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    sync = RedisSync(redis_url, path)
    try:
        sync.push()                         # the cursor starts from here
        now = time.time()
        ledger.append(LedgerRecord(id="a", ts=now, route="r", uncached_input=3, cost_usd="0.000001"))
        ledger.append(LedgerRecord(id="b", ts=now, route="r", uncached_input=4, cost_usd="0.000001"))
        for _ in range(3):
            sync.push(final=True)
        assert sync.failures == 3
        assert r.xlen(STREAM) == 0
        assert {k.decode(): int(v) for k, v in r.hgetall(TOTALS).items()} == {"requests": 2**63 - 1, "cost_picousd": 5}
        r.hset(TOTALS, "requests", 10)      # an operator resets the count: the batch goes over, once
        sync.push(final=True)
        assert [json.loads(e[b"record"])["id"] for _, e in r.xrange(STREAM)] == ["a", "b"]
        totals = {k.decode(): int(v) for k, v in r.hgetall(TOTALS).items()}
        assert totals["requests"] == 12 and totals["input_tokens"] == 7
        assert totals["cost_usd"] == 0 and totals["cost_picousd"] == 5 + 2 * 10**6
    finally:
        sync.close()
        ledger.close()
        r.delete(STREAM, TOTALS)
