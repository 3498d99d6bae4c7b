"""A record id that reaches the fleet's Redis from two replicas' files (SDK records exported into both) is one
request: its record goes into the stream once and into `prefixgate:totals` once, as Postgres counts it
(test_ledger_postgres_ids). The totals used to add it once per file."""

from __future__ import annotations

import json

import redis

from prefixgate import ledger_redis
from prefixgate.ledger import STREAM, TOTALS, Ledger, LedgerRecord
from prefixgate.ledger_redis import IDS, RedisSync


def _fresh(r: redis.Redis) -> None:
    r.delete(STREAM, TOTALS, IDS)


def test_an_id_in_two_replicas_files_counts_once_in_the_redis_totals(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)
    _fresh(r)
    ledgers = [Ledger(str(tmp_path / f"{replica}.sqlite")) for replica in ("a", "b")]
    syncs = [RedisSync(redis_url, ledger.path) for ledger in ledgers]
    try:
        for sync in syncs:
            sync.push(final=True)           # both cursors start here
        for replica, ledger in zip("ab", ledgers, strict=True):
            for i in range(5):              # the same SDK export in both files
                ledger.append(LedgerRecord(id=f"sdk-{i}", ts=1e9 + i, route="r", cost_usd="0.000100000000",
                                           uncached_input=10, cache_read=4))
            ledger.append(LedgerRecord(id=f"own-{replica}", ts=1e9 + 9, route="r", cost_usd="0.000000000007",
                                       uncached_input=1))
        for sync in syncs:
            sync.push(final=True)
        totals = {k.decode(): int(v) for k, v in r.hgetall(TOTALS).items()}
        ids = sorted(json.loads(e[b"record"])["id"] for _, e in r.xrange(STREAM))
    finally:
        for sync in syncs:
            sync.close()
        for ledger in ledgers:
            ledger.close()
        _fresh(r)
    assert ids == ["own-a", "own-b", "sdk-0", "sdk-1", "sdk-2", "sdk-3", "sdk-4"]
    assert totals["requests"] == 7
    assert totals["cost_picousd"] == 5 * 100_000_000 + 2 * 7     # picodollars: five shared records once, two own
    assert totals["input_tokens"] == 5 * 14 + 2 * 1
    assert totals["cache_read_tokens"] == 5 * 4


def test_redis_remembers_ids_within_the_streams_cap_and_the_records_retention(tmp_path, redis_url, monkeypatch):
    r = redis.Redis.from_url(redis_url)
    _fresh(r)
    monkeypatch.setattr(ledger_redis, "KEEP_IDS", 3)
    ledger = Ledger(str(tmp_path / "a.sqlite"))
    sync = RedisSync(redis_url, ledger.path)
    try:
        sync.push(final=True)
        for i in range(5):
            ledger.append(LedgerRecord(id=f"r{i}", ts=1000.0 + i, route="r"))
        sync.push(final=True)
        assert sorted(r.zrange(IDS, 0, -1)) == [b"r2", b"r3", b"r4"]      # the newest three by time
        sync.prune(records_before=1003.0, rollups_before=1003.0)
        assert sorted(r.zrange(IDS, 0, -1)) == [b"r3", b"r4"]
    finally:
        sync.close()
        ledger.close()
        _fresh(r)


def test_records_without_an_id_are_copied_each_and_hold_up_nothing(tmp_path, redis_url):
    # The file's id column allows NULL (a record an SDK caller built without one): such a record cannot be told
    # apart from another, so each counts; the records after it are copied too.
    r = redis.Redis.from_url(redis_url)
    _fresh(r)
    ledger = Ledger(str(tmp_path / "a.sqlite"))
    sync = RedisSync(redis_url, ledger.path)
    try:
        sync.push(final=True)
        for ident in (None, None, "after"):
            ledger.append(LedgerRecord(id=ident, ts=1000.0, route="r", uncached_input=2))   # type: ignore[arg-type]
        sync.push(final=True)
        totals = {k.decode(): int(v) for k, v in r.hgetall(TOTALS).items()}
    finally:
        sync.close()
        ledger.close()
        _fresh(r)
    assert sync.failures == 0
    assert totals["requests"] == 3 and totals["input_tokens"] == 6
