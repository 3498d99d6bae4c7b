"""Copying ledger rows from a replica's SQLite file to the Redis stream and totals every replica shares
(the cursor and its guarantees: ledger_copy). The Lua script below checks and moves the cursor in the
same step that adds the rows.

A record id can reach Redis from two replicas' files (SDK records exported into both): Redis remembers the
ids it has added, scored by the record's time, and adds a known id to neither the totals nor the stream, as
Postgres does by its primary key. It remembers them as long as the stream can hold their records (the last
`KEEP_IDS` by time) and, like Postgres's records, for the ledger's record retention.

Money totals are exact integers, and Redis's integers stop at 2**63: in picodollars that is $9.2M, which a
fleet's lifetime spend can pass (every batch after that would fail). So each amount is two fields: whole
dollars (`cost_usd`, `savings_usd`) and the picodollars below one dollar (`cost_picousd`, `savings_picousd`,
carried into the dollars at 10**12). The total is dollars + picodollars / 10**12. A total written whole in
picodollars by an earlier version is split the first time a batch touches it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TypeVar

import redis

from prefixgate.ledger import STREAM, TOTALS
from prefixgate.ledger_copy import RowCopier, log
from prefixgate.ledger_rollup import picodollars
from prefixgate.redis_outage import RetryWindow, outage_of

T = TypeVar("T")

CURSOR = "prefixgate:ledger:synced:"
IDS = "prefixgate:ledger:ids"
KEEP_IDS = 1_000_000                # the stream's length cap
PICO = 10**12
# KEYS: cursor, stream, totals, ids. ARGV: expected cursor, new cursor, ids to keep, then per record: id ("" for a
# record without one: never a duplicate), time, cache read, input tokens, cost and savings each as whole dollars
# and picodollars in [0, 10**12) (cost "" when unpriced), JSON record. Returns the cursor as it now stands.
COPY = """
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return current end
-- A whole-picodollar total from an earlier version: its last 12 digits stay, the rest move to the dollars.
for _, pair in ipairs({{'cost_picousd', 'cost_usd'}, {'savings_picousd', 'savings_usd'}}) do
  local old = redis.call('HGET', KEYS[3], pair[1])
  if old and string.match(old, '^%d+$') and #old > 12 then
    redis.call('HINCRBY', KEYS[3], pair[2], string.sub(old, 1, -13))
    redis.call('HSET', KEYS[3], pair[1], (string.gsub(string.sub(old, -12), '^0+(%d)', '%1')))
  end
end
local fields = {'requests', 'cache_read_tokens', 'input_tokens', 'cost_usd', 'cost_picousd', 'savings_usd',
                'savings_picousd'}
local before = {}
for i, name in ipairs(fields) do before[i] = redis.call('HGET', KEYS[3], name) end
local fresh = {}
for i = 4, #ARGV, 9 do
  if ARGV[i] == '' or redis.call('ZADD', KEYS[4], 'NX', ARGV[i + 1], ARGV[i]) == 1 then fresh[#fresh + 1] = i end
end
-- A script is not rolled back when a call fails: the ids and totals go first (a total that would overflow
-- undoes them, back to what was read before, and fails the batch), the stream after, so a failed batch adds
-- nothing and its retry no duplicate.
local function add(name, amount)
  local added = redis.pcall('HINCRBY', KEYS[3], name, amount)
  if type(added) == 'table' and added.err then
    for j, field in ipairs(fields) do
      if before[j] then redis.call('HSET', KEYS[3], field, before[j]) else redis.call('HDEL', KEYS[3], field) end
    end
    for _, i in ipairs(fresh) do if ARGV[i] ~= '' then redis.call('ZREM', KEYS[4], ARGV[i]) end end
    return added.err
  end
end
-- An amount: its dollars, then its picodollars, carrying a whole dollar out of the picodollars (each part
-- added is below 10**12, so one carry restores the bound).
local function money(name, dollars, pico)
  local failed = add(name .. '_usd', dollars) or add(name .. '_picousd', pico)
  if failed then return failed end
  if tonumber(redis.call('HGET', KEYS[3], name .. '_picousd')) >= 1e12 then
    return add(name .. '_picousd', '-1000000000000') or add(name .. '_usd', 1)
  end
end
local failed = add('requests', #fresh)
for _, i in ipairs(fresh) do
  if failed then break end
  failed = add('cache_read_tokens', ARGV[i + 2]) or add('input_tokens', ARGV[i + 3])
    or (ARGV[i + 4] ~= '' and (money('cost', ARGV[i + 4], ARGV[i + 5])
                               or money('savings', ARGV[i + 6], ARGV[i + 7]))) or nil
end
if failed then return redis.error_reply(failed) end
for _, i in ipairs(fresh) do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'record', ARGV[i + 8])
end
local over = redis.call('ZCARD', KEYS[4]) - tonumber(ARGV[3])
if over > 0 then redis.call('ZREMRANGEBYRANK', KEYS[4], 0, over - 1) end
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
        # The server's one outage: a copy that fails rests every client of it, and no copy is tried while it rests
        # (RowCopier logs the outage and its end: the window logs nothing of its own).
        self._window = RetryWindow(log, "", "", outage=outage_of(redis_url))

    def resting(self) -> bool:
        return self._window.resting()

    def _asked(self, call: Callable[[], T]) -> T:
        """`call`'s answer; a failure (raised) rests every client of the server, an answer ends its outage."""
        try:
            answer = call()
        except self.errors as e:
            self._window.failed(e)
            raise
        self._window.answered()
        return answer

    def _stored_position(self) -> int:
        # A ledger new to Redis starts from the rows written since Redis was first configured for it.
        stored = self._asked(lambda: self._redis.get(self._cursor_key))
        return int(stored) if stored is not None else self._start

    def _apply(self, expected: int, new: int, rows: list[tuple]) -> int:
        args: list = [expected, new, KEEP_IDS]
        for r in self.decode(rows):
            priced = r["cost_usd"] is not None
            inputs = (r["uncached_input"] or 0) + (r["cache_read"] or 0) + sum(r["cache_writes"].values())
            ts = r["ts"] if isinstance(r["ts"], int | float) and math.isfinite(r["ts"]) else 0.0
            cost = divmod(picodollars(r["cost_usd"]), PICO) if priced else ("", "")
            args += [r["id"] if isinstance(r["id"], str) else "", repr(ts), r["cache_read"] or 0, inputs,
                     *cost, *divmod(picodollars(r["savings_usd"] or "0"), PICO), json.dumps(r)]
        return int(self._asked(lambda: self._copy(keys=[self._cursor_key, STREAM, TOTALS, IDS], args=args)))

    def prune(self, records_before: float, rollups_before: float) -> None:
        # The ids of records past the ledger's retention, as Postgres deletes those records (while Redis rests:
        # at the next prune).
        if not self.resting():
            self._asked(lambda: self._redis.zremrangebyscore(IDS, "-inf", f"({records_before!r}"))

    def close(self) -> None:
        self._redis.close()
        super().close()
