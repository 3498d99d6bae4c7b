"""A ledger new to Redis is copied from the rows written since Redis was first configured for it (rows from
before are not the fleet's). That starting point is kept in the ledger file: a replica killed before its first
copy (Redis down the whole run) copies that run's rows once it restarts and Redis answers, instead of starting
again from the rows present at the restart and leaving them out of the fleet's totals for good."""

from __future__ import annotations

import json
import time

import redis

from prefixgate.ledger import STREAM, Ledger, LedgerRecord
from prefixgate.ledger_redis import RedisSync


def test_rows_of_a_run_killed_before_its_first_copy_are_copied_after_the_restart(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    try:
        ledger.append(LedgerRecord(id="before-redis", ts=time.time(), route="r", uncached_input=1))
        first_run = RedisSync(redis_url, path)          # Redis configured; the replica never copies (killed)
        ledger.append(LedgerRecord(id="first-run", ts=time.time(), route="r", uncached_input=2))
        first_run.close()
        restarted = RedisSync(redis_url, path)
        ledger.append(LedgerRecord(id="second-run", ts=time.time(), route="r", uncached_input=3))
        restarted.push(final=True)
        restarted.close()
        assert [json.loads(e[b"record"])["id"] for _, e in r.xrange(STREAM)] == ["first-run", "second-run"]
    finally:
        ledger.close()
        r.delete(STREAM)
