"""The fleet's money totals in Redis stay exact past $9.2M: Redis's integers stop at 2**63, which in
picodollars is $9,223,372.036854775807, a lifetime spend a large fleet passes. A single picodollar field
made every batch after that fail, so no later record reached the stream or the totals. The totals are whole
dollars plus the picodollars below a dollar (docs/gateway.md)."""

from __future__ import annotations

import time

import redis

from prefixgate.ledger import STREAM, TOTALS, Ledger, LedgerRecord
from prefixgate.ledger_redis import RedisSync


def _copy(tmp_path, redis_url, records: list[LedgerRecord]) -> dict[str, int]:
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    sync = RedisSync(redis_url, path)
    try:
        sync.push()                         # the cursor starts from here
        for record in records:
            ledger.append(record)
        sync.push(final=True)
        assert sync.failures == 0
    finally:
        sync.close()
        ledger.close()
    r = redis.Redis.from_url(redis_url)
    return {k.decode(): int(v) for k, v in r.hgetall(TOTALS).items()}


def test_a_lifetime_total_past_nine_million_dollars_keeps_counting(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)
    r.delete(STREAM, TOTALS)
    # An earlier version's whole-picodollar total, 5 picodollars short of 2**63: $9,223,372.036854775803.
    r.hset(TOTALS, mapping={"requests": 10, "cost_picousd": 2**63 - 5})
    try:
        totals = _copy(tmp_path, redis_url, [LedgerRecord(id="a", ts=time.time(), route="r", cost_usd="1.25")])
        assert r.xlen(STREAM) == 1
        # $9,223,372.036854775803 + $1.25 = $9,223,373.286854775803
        assert totals["requests"] == 11
        assert totals["cost_usd"] == 9_223_373 and totals["cost_picousd"] == 286_854_775_803
    finally:
        r.delete(STREAM, TOTALS)


def test_cents_carry_into_dollars_and_negative_savings_stay_exact(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)
    r.delete(STREAM, TOTALS)
    now = time.time()
    try:
        totals = _copy(tmp_path, redis_url, [
            LedgerRecord(id="a", ts=now, route="r", cost_usd="0.6", savings_usd="-0.25"),
            LedgerRecord(id="b", ts=now, route="r", cost_usd="0.7", savings_usd="0.1"),
            LedgerRecord(id="c", ts=now, route="r", cost_usd="0.900000000001", savings_usd="0"),
        ])
        # cost $0.6 + $0.7 + $0.900000000001 = $2.200000000001; savings -$0.25 + $0.1 = -$0.15
        assert totals["cost_usd"] == 2 and totals["cost_picousd"] == 200_000_000_001
        assert totals["savings_usd"] * 10**12 + totals["savings_picousd"] == -150_000_000_000
        assert 0 <= totals["savings_picousd"] < 10**12
    finally:
        r.delete(STREAM, TOTALS)
