"""Copying ledger rows from a replica's SQLite file to the Redis stream and totals every replica shares.

The copy is a cursor over SQLite rowids. How far it got is stored in Redis and moved by the same
script that adds the rows, which first checks the cursor is where this replica thinks it is: a copy
that timed out on our side but ran on Redis's (a frozen Redis catching up) is then not applied twice,
and a crash or outage can neither skip rows nor count them twice. While Redis is down the rows wait in
SQLite (bounded by disk, not memory) and go over when it is back. A ledger new to Redis (no cursor
there) starts from the rows written since it was opened.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import uuid

import redis

from prefixgate.ledger import COLUMNS, STREAM, TOTALS, decode_row
from prefixgate.ledger_rollup import picodollars

BATCH = 512
MAX_BATCHES_PER_TICK = 20
RETRY_S = (0.2, 5.0)            # back-off after a failed copy: first wait, longest wait
CURSOR = "prefixgate:ledger:synced:"
# KEYS: cursor, stream, totals. ARGV: expected cursor, new cursor, requests, cache read, input tokens,
# cost and savings in integer picodollars (cost "" when no record was priced), then one JSON record
# each. Returns the cursor as it now stands.
COPY = """
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return current end
for i = 8, #ARGV do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', 1000000, '*', 'record', ARGV[i])
end
redis.call('HINCRBY', KEYS[3], 'requests', ARGV[3])
redis.call('HINCRBY', KEYS[3], 'cache_read_tokens', ARGV[4])
redis.call('HINCRBY', KEYS[3], 'input_tokens', ARGV[5])
if ARGV[6] ~= '' then
  redis.call('HINCRBY', KEYS[3], 'cost_picousd', ARGV[6])
  redis.call('HINCRBY', KEYS[3], 'savings_picousd', ARGV[7])
end
redis.call('SET', KEYS[1], ARGV[2])
return ARGV[2]
"""

log = logging.getLogger("prefixgate.ledger")


class RedisSync:
    def __init__(self, redis_url: str, path: str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10, uri=True)
        self._db.execute("CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT)")
        self._db.execute("INSERT OR IGNORE INTO ledger_meta VALUES ('ledger_id', ?)", (uuid.uuid4().hex,))
        ledger_id = self._db.execute("SELECT value FROM ledger_meta WHERE key = 'ledger_id'").fetchone()[0]
        self._cursor_key = CURSOR + ledger_id
        self._opened_at = self._db.execute("SELECT coalesce(max(rowid), 0) FROM requests").fetchone()[0]
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self._copy = self._redis.register_script(COPY)
        self._position: int | None = None
        self._retry_at = 0.0
        self._wait = RETRY_S[0]
        self.failures = 0           # copies that failed (Redis down); the rows stayed in SQLite
        self._down_since: float | None = None

    @property
    def position(self) -> int:
        """The last rowid copied to Redis (0 until the first copy: nothing may be pruned yet)."""
        return self._position or 0

    def push(self, final: bool = False) -> int:
        """Copy what SQLite holds beyond the cursor; returns the rows copied. Never raises."""
        now = time.monotonic()
        if now < self._retry_at and not final:
            return 0
        copied = 0
        try:
            if self._position is None:
                stored = self._redis.get(self._cursor_key)
                self._position = int(stored) if stored is not None else self._opened_at
            for _ in range(MAX_BATCHES_PER_TICK if not final else 1_000_000):
                n = self._copy_batch()
                copied += n
                if n < BATCH:
                    break
        except (redis.RedisError, OSError) as e:
            self.failures += 1
            if self._down_since is None:
                self._down_since = now
                log.warning("redis ledger copy failed (%s); rows wait in SQLite and go over when it is back",
                            type(e).__name__)
            self._retry_at = now + self._wait
            self._wait = min(self._wait * 2, RETRY_S[1])
            return copied
        if self._down_since is not None:
            log.warning("redis ledger copy resumed after %.1f s", now - self._down_since)
            self._down_since = None
        self._wait = RETRY_S[0]
        return copied

    def _copy_batch(self) -> int:
        rows = self._db.execute(f"SELECT rowid, {', '.join(COLUMNS)} FROM requests WHERE rowid > ? ORDER BY rowid "
                                f"LIMIT {BATCH}", (self._position,)).fetchall()
        if not rows:
            return 0
        records = [decode_row(dict(zip(COLUMNS, row[1:], strict=True))) for row in rows]
        priced = [r for r in records if r["cost_usd"] is not None]
        cost = str(sum(picodollars(r["cost_usd"]) for r in priced)) if priced else ""
        savings = str(sum(picodollars(r["savings_usd"] or "0") for r in priced))
        cache_read = sum(r["cache_read"] or 0 for r in records)
        inputs = sum((r["uncached_input"] or 0) + (r["cache_read"] or 0) + sum(r["cache_writes"].values()) for r in records)
        stands = int(self._copy(keys=[self._cursor_key, STREAM, TOTALS], args=[
            self._position, rows[-1][0], len(records), cache_read, inputs, cost, savings,
            *(json.dumps(r) for r in records)]))
        self._position = stands
        # A cursor found elsewhere (a timed-out copy that did run, another worker on this file): go on from it.
        return len(records) if stands == rows[-1][0] else BATCH

    def close(self) -> None:
        self._redis.close()
        self._db.close()
