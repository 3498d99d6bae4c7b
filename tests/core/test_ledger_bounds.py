"""A record holding more than the ledger's stores can sum (64-bit integers; money in picodollars, at most about $9.2
million) is kept without those counts and amounts, saying why: before, a cost of $5 trillion was written to SQLite
and then failed every roll-up and copy tick, so no later record was rolled up (the dashboard's totals stopped) or
copied to Redis; and 10**20 tokens failed the append itself, on the request path."""

from __future__ import annotations

import json
import sqlite3
import time

import redis

from prefixgate.ledger import STREAM, TOTALS, Ledger, LedgerRecord, read_records

# A normal request: 3 tokens at $1 per million, 3 microdollars = 3,000,000 picodollars.
NORMAL = dict(route="r", uncached_input=3, cost_usd="0.000003", cost_without_cache_usd="0.000003", savings_usd="0")


def rolled_up(path: str) -> tuple[int, int, int]:
    """(requests, tokens, spend in picodollars) in the all-records minute rollups."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT coalesce(sum(requests), 0), coalesce(sum(uncached_input), 0), "
                          "coalesce(sum(spend_pico), 0) FROM rollups WHERE res = 60 AND dim = ''").fetchone()
    finally:
        db.close()


def test_a_record_past_what_the_stores_sum_is_kept_without_it_and_later_ones_roll_up_and_copy(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path, redis_url)
    now = time.time()
    try:
        ledger.append(LedgerRecord(id="huge-cost", ts=now, route="r", uncached_input=10**6,
                                   cost_usd="5000000000000.0001125", cost_without_cache_usd="5000000000000.0001125",
                                   savings_usd="0"))
        ledger.append(LedgerRecord(id="huge-count", ts=now, route="r", output=10**20, cost_usd="0.5"))
        ledger.append(LedgerRecord(id="normal", ts=now, **NORMAL))
    finally:
        ledger.close()          # a last roll-up and copy
    stored = {rec["id"]: rec for rec in read_records(path)}
    assert set(stored) == {"huge-cost", "huge-count", "normal"}
    for ident in ("huge-cost", "huge-count"):
        rec = stored[ident]
        assert (rec["uncached_input"], rec["output"], rec["cost_usd"]) == (0, 0, None)
        assert any(line.startswith("ledger: tokens and cost dropped") for line in rec["explanation"])
    assert stored["normal"]["cost_usd"] == "0.000003"
    assert rolled_up(path) == (3, 3, 3_000_000)
    totals = {k.decode(): int(v) for k, v in r.hgetall(TOTALS).items()}
    assert totals["requests"] == 3 and totals["cost_picousd"] == 3_000_000
    assert [json.loads(e[b"record"])["id"] for _, e in r.xrange(STREAM)] == ["huge-cost", "huge-count", "normal"]
