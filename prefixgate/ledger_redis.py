"""Copying ledger rows from a replica's SQLite file to the Redis stream and totals every replica shares
(the cursor and its guarantees: ledger_copy). The Lua script below checks and moves the cursor in the
same step that adds the rows.
"""

from __future__ import annotations

import json

import redis

from prefixgate.ledger import STREAM, TOTALS
from prefixgate.ledger_copy import RowCopier
from prefixgate.ledger_rollup import picodollars

CURSOR = "prefixgate:ledger:synced:"
# KEYS: cursor, stream, totals. ARGV: expected cursor, new cursor, requests, cache read, input tokens,
# cost and savings in integer picodollars (cost "" when no record was priced), then one JSON record
# each. Returns the cursor as it now stands.
COPY = """
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return current end
-- A script is not rolled back when a call fails: the totals go first (one that would overflow undoes those
-- already added, back to the values read before, and fails the batch), the stream after, so a failed batch adds
-- nothing and its retry no duplicate.
local sums = {{'requests', ARGV[3]}, {'cache_read_tokens', ARGV[4]}, {'input_tokens', ARGV[5]}}
if ARGV[6] ~= '' then
  sums[4] = {'cost_picousd', ARGV[6]}
  sums[5] = {'savings_picousd', ARGV[7]}
end
local before = {}
for i, sum in ipairs(sums) do
  before[i] = redis.call('HGET', KEYS[3], sum[1])
  local added = redis.pcall('HINCRBY', KEYS[3], sum[1], sum[2])
  if type(added) == 'table' and added.err then
    for j = 1, i - 1 do
      if before[j] then redis.call('HSET', KEYS[3], sums[j][1], before[j]) else redis.call('HDEL', KEYS[3], sums[j][1]) end
    end
    return redis.error_reply(added.err)
  end
end
for i = 8, #ARGV do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', 1000000, '*', 'record', ARGV[i])
end
redis.call('SET', KEYS[1], ARGV[2])
return ARGV[2]
"""


class RedisSync(RowCopier):
    store = "redis"
    errors = (redis.RedisError, OSError)

    def __init__(self, redis_url: str, path: str) -> None:
        super().__init__(path)
        self._start = self.first_configured("redis_start")
        self._cursor_key = CURSOR + self.ledger_id
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self._copy = self._redis.register_script(COPY)

    def _stored_position(self) -> int:
        # A ledger new to Redis starts from the rows written since Redis was first configured for it.
        stored = self._redis.get(self._cursor_key)
        return int(stored) if stored is not None else self._start

    def _apply(self, expected: int, new: int, rows: list[tuple]) -> int:
        records = self.decode(rows)
        priced = [r for r in records if r["cost_usd"] is not None]
        cost = str(sum(picodollars(r["cost_usd"]) for r in priced)) if priced else ""
        savings = str(sum(picodollars(r["savings_usd"] or "0") for r in priced))
        cache_read = sum(r["cache_read"] or 0 for r in records)
        inputs = sum((r["uncached_input"] or 0) + (r["cache_read"] or 0) + sum(r["cache_writes"].values()) for r in records)
        return int(self._copy(keys=[self._cursor_key, STREAM, TOTALS], args=[
            expected, new, len(records), cache_read, inputs, cost, savings, *(json.dumps(r) for r in records)]))

    def close(self) -> None:
        self._redis.close()
        super().close()
