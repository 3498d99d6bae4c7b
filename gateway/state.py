"""Counters shared by gateway replicas: in this process, or in Redis when `redis_url` is set.

Budgets and rate limits count here, so several replicas behind a load balancer enforce one limit.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable

from prefixgate.policies import limits
from prefixgate.redis_outage import ERRORS as _ERRORS
from prefixgate.redis_outage import RetryWindow, outage_of

log = logging.getLogger("prefixgate.gateway")
# Counters are named per key and window (`rpm:<key>:<minute>`): new ones come every window, for ever. Expired ones are
# dropped once the counters have doubled since the last purge, and grown by at least this many (one pass per as many
# new counters as it kept).
PURGE_AFTER = 1024


class _Purge:
    """When a table that gains an entry per key and window drops the entries `alive` says are over."""

    def __init__(self) -> None:
        self.at = PURGE_AFTER

    def __call__(self, table: dict, alive: Callable[[tuple], bool]) -> dict:
        if len(table) < self.at:
            return table
        kept = {k: v for k, v in table.items() if alive(v)}
        self.at = max(2 * len(kept), len(kept) + PURGE_AFTER)
        return kept


class MemoryCounters:
    """One process's counters with expiry (a replica alone, or tests)."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[float, float]] = {}
        self._purge = _Purge()
        self._marks: set[str] = set()      # carries made (`carry`)

    async def add(self, key: str, amount: float, ttl_s: int, once: str = "") -> float:
        now = time.monotonic()
        self._values = self._purge(self._values, lambda v: not v[1] or v[1] >= now)
        value, expires = self._values.get(key, (0.0, 0.0))
        if expires and expires < now:
            value, expires = 0.0, 0.0
        value += amount
        self._values[key] = (value, expires or (now + ttl_s if ttl_s else 0.0))
        return value

    async def get(self, key: str) -> float:
        value, expires = self._values.get(key, (0.0, 0.0))
        return 0.0 if expires and expires < time.monotonic() else value

    async def reserve(self, counter: str, hold: str, nano: int, budget_nano: int, hold_s: int,
                      least: int = 0, replaces: tuple[str, int] | None = None) -> int:
        return nano     # one process: `Limits`' own reservations are every reservation

    async def unreserve(self, counter: str, hold: str, nano: int) -> None:
        return None

    async def renew(self, counter: str, holds: list[tuple[str, int]], hold_s: int) -> None:
        return None

    async def carry(self, mark: str, source: str, target: str, ttl_s: int, made: str = "") -> None:
        # `made` is never here: a store in memory starts empty, with no earlier version's marks.
        if mark not in self._marks:
            self._marks.add(mark)
            if spent := await self.get(source):
                await self.add(target, spent, ttl_s)

    async def close(self) -> None:
        return None


# KEYS: a budget's spent counter, its holds (a sorted set: "<id>:<nanodollars>" by expiry, on Redis's clock).
# ARGV: hold id, nanodollars, budget, seconds held, least (0: all of it or nothing; else as much as the budget has
# left, at least this), the hold this one replaces ("": none; counted as gone, and dropped once this one is placed).
# The nanodollars held (0: nothing to hold, and room left), or refused: -1 (limits.SPENT) where the spent counter alone
# leaves no room, -2 (limits.HELD) where the holds take what it leaves.
RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local held = 0
for _, hold in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if hold ~= ARGV[6] then held = held + tonumber(string.match(hold, ':(%d+)$')) end
end
local free = tonumber(ARGV[3]) - tonumber(redis.call('GET', KEYS[1]) or '0')
local room = free - held
local nano, least = tonumber(ARGV[2]), tonumber(ARGV[5])
if least > 0 then nano = math.min(nano, math.floor(room)) end
if room <= 0 or nano < least then
  if free <= 0 or free < least then return -1 end
  return -2
end
if ARGV[6] ~= '' then redis.call('ZREM', KEYS[2], ARGV[6]) end
if nano > 0 then
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[1] .. ':' .. string.format('%d', nano))
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
return nano
"""

# KEYS: a budget's holds. ARGV: seconds held, then the holds to hold that long from now (those still there).
RENEW = """
local t = redis.call('TIME')
local expiry = tonumber(t[1]) + tonumber(t[2]) / 1e6 + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i]) end
redis.call('EXPIRE', KEYS[1], ARGV[1], 'GT')
"""

# KEYS: a counter, the mark of one add to it. ARGV: amount, the counter's ttl (0: none), the mark's ttl. Adds unless
# the mark is there already (this add was made); the counter's value and PTTL either way.
ADD_ONCE = """
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[3]) then
  redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
  if tonumber(ARGV[2]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[2], 'NX') end
end
return {redis.call('GET', KEYS[1]) or '0', redis.call('PTTL', KEYS[1])}
"""
# KEYS: a carry's mark, the counter carried from, the counter carried into, a mark an earlier version wrote for the
# same carry. ARGV: the third's ttl (0: none). Adds the second to the third unless either mark is there; the mark is
# written in the same step, and never expires.
CARRY = """
if redis.call('EXISTS', KEYS[4]) == 0 and redis.call('SET', KEYS[1], '1', 'NX') then
  local spent = redis.call('GET', KEYS[2])
  if spent then
    redis.call('INCRBYFLOAT', KEYS[3], spent)
    if tonumber(ARGV[1]) > 0 then redis.call('EXPIRE', KEYS[3], ARGV[1], 'NX') end
  end
end
"""
# How long an add made `once` is remembered: longer than a replica takes to resend it after Redis answers again.
ONCE_S = 600


class RedisCounters:
    """Counters in Redis: INCRBYFLOAT plus an expiry set when the key is created (one Lua script per add).

    While Redis is unreachable the replica counts in memory and keeps serving (its limits then hold per
    replica), from what Redis last said each counter held: a key that had spent its budget stays refused
    through an outage instead of starting again from nothing. What it counted meanwhile is added to Redis
    once Redis answers again. An add that failed mid-way (a timeout: a frozen Redis may still run it when it
    wakes) is in doubt: every add carries a mark (a request's spend its reservation's id, any other its own), and
    one in doubt is resent with it, so it counts once either way. A hold's release Redis missed is resent too, as
    soon as it answers: left there, the hold would block the key's budget on every replica until it expired.
    """

    PREFIX = "prefixgate:counter:"
    HOLDS = "prefixgate:held:"
    ONCE = "prefixgate:once:"
    RETRY_S = 1.0

    def __init__(self, url: str) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._reserve = self._redis.register_script(RESERVE)
        self._renew = self._redis.register_script(RENEW)
        self._add_once = self._redis.register_script(ADD_ONCE)
        self._carry = self._redis.register_script(CARRY)
        # key -> (value Redis last gave, when it expires there: inf never), what an outage counts on from.
        self.seen: dict[str, tuple[float, float]] = {}
        self._purge_seen = _Purge()
        # key -> (amount counted locally, ttl, when its window is over: 0 never). Counted while Redis is down, so a
        # long outage adds a counter per key and window: those of ended windows (never read again) are dropped.
        self.backlog: dict[str, tuple[float, int, float]] = {}
        self._purge = _Purge()
        # once -> (key, amount, ttl, when its window is over): adds in doubt, resent with their mark (those of ended
        # windows dropped, as the backlog's: a long outage puts one here each time Redis is tried again).
        self.doubtful: dict[str, tuple[str, float, int, float]] = {}
        self._purge_doubtful = _Purge()
        # hold (as the holds' set names it) -> (its counter, when it expires at the latest): releases Redis missed.
        self.unheld: dict[str, tuple[str, float]] = {}
        self._purge_unheld = _Purge()
        # Shared with every client of this Redis in the process: a request meets one timeout, not one per client.
        self.window = RetryWindow(log, "redis counters unreachable (%s); counting in this replica until it answers",
                                  "redis counters answer again", self.RETRY_S, outage_of(url))

    async def add(self, key: str, amount: float, ttl_s: int, once: str = "") -> float:
        """`once`: an id that makes this add count at most once, even resent after a timeout. An add without one
        gets its own: a request per minute, tokens, a keep-alive cap are in doubt after a timeout as a spend is."""
        now = time.monotonic()
        over = now + ttl_s if ttl_s else 0.0
        if await self._available():
            once = once or uuid.uuid4().hex
            try:
                return await self._add(key, amount, ttl_s, once)
            except _ERRORS as e:
                self.window.failed(e)
                self._doubt(once, key, amount, ttl_s, over)
                return self._last_known(key)
        self.backlog = self._purge(self.backlog, lambda v: not v[2] or v[2] >= now)
        pending, _, over = self.backlog.get(key, (0.0, ttl_s, over))
        self.backlog[key] = (pending + amount, ttl_s, over)
        self.window.retry(self._available)      # the other replicas see it though nothing else here calls Redis
        return self._last_known(key)

    async def get(self, key: str) -> float:
        if await self._available():
            try:
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.get(self.PREFIX + key)
                    pipe.pttl(self.PREFIX + key)
                    value, ttl_ms = await pipe.execute()
                return self._saw(key, float(value) if value is not None else 0.0, ttl_ms)
            except _ERRORS as e:
                self.window.failed(e)
        return self._last_known(key)

    async def _add(self, key: str, amount: float, ttl_s: int, once: str) -> float:
        # An add in doubt is resent only while its counter's window lasts: its mark need not outlive that.
        mark_s = min(ONCE_S, ttl_s) if ttl_s else ONCE_S
        value, ttl_ms = await self._add_once(keys=[self.PREFIX + key, self.ONCE + once], args=[amount, ttl_s, mark_s])
        return self._saw(key, float(value), ttl_ms)

    async def reserve(self, counter: str, hold: str, nano: int, budget_nano: int, hold_s: int,
                      least: int = 0, replaces: tuple[str, int] | None = None) -> int:
        replaced = f"{replaces[0]}:{replaces[1]}" if replaces else ""
        if await self._available():
            try:
                held = int(await self._reserve(keys=[self.PREFIX + counter, self.HOLDS + counter],
                                               args=[hold, nano, budget_nano, hold_s, least, replaced]))
                self.window.answered()
                return held
            except _ERRORS as e:
                self.window.failed(e)
        if replaces:    # the replaced hold may still be there: dropped as a missed release is
            await self.unreserve(counter, *replaces)
        return nano     # Redis down: this replica's own reservations bind (and the spend it last saw)

    async def unreserve(self, counter: str, hold: str, nano: int) -> None:
        member = f"{hold}:{nano}"
        if await self._available():
            try:
                await self._redis.zrem(self.HOLDS + counter, member)
                self.window.answered()
                return
            except _ERRORS as e:
                self.window.failed(e)
        now = time.monotonic()
        self.unheld = self._purge_unheld(self.unheld, lambda v: v[1] >= now)
        self.unheld[member] = (counter, now + limits.HOLD_S)
        self.window.retry(self._available)      # resent once Redis answers, even if nothing else here calls it by then

    async def renew(self, counter: str, holds: list[tuple[str, int]], hold_s: int) -> None:
        if await self._available():
            try:
                await self._renew(keys=[self.HOLDS + counter], args=[hold_s, *(f"{h}:{n}" for h, n in holds)])
                self.window.answered()
            except _ERRORS as e:
                self.window.failed(e)       # they expire on their own, as a dead replica's would

    async def carry(self, mark: str, source: str, target: str, ttl_s: int, made: str = "") -> None:
        """Made or not in one step (a timeout leaves Redis with both or neither): while Redis is down, not made."""
        if await self._available():
            try:
                keys = [self.PREFIX + k for k in (mark, source, target, made or mark + ":none")]
                await self._carry(keys=keys, args=[ttl_s])
                self.window.answered()
            except _ERRORS as e:
                self.window.failed(e)

    def _saw(self, key: str, value: float, ttl_ms: int) -> float:
        """What Redis answered for `key` (an add's or a get's: Redis answers)."""
        self.window.answered()
        now = time.monotonic()
        self.seen = self._purge_seen(self.seen, lambda v: v[1] >= now)
        if ttl_ms == -2:                # no such counter
            self.seen.pop(key, None)
        else:
            self.seen[key] = (value, now + ttl_ms / 1000 if ttl_ms >= 0 else math.inf)
        return value

    def _last_known(self, key: str) -> float:
        """While Redis is down: what it last held for `key` (unless expired since), plus what this replica counted."""
        now = time.monotonic()
        value, expires = self.seen.get(key, (0.0, math.inf))
        pending, _, over = self.backlog.get(key, (0.0, 0, 0.0))
        doubt = sum(amount for k, amount, _, ends in self.doubtful.values() if k == key and (not ends or ends >= now))
        return (value if expires >= now else 0.0) + (pending if not over or over >= now else 0.0) + doubt

    async def _available(self) -> bool:
        """False while Redis is known down; on the first call after that, resync the backlog first."""
        if self.window.resting():
            return False
        while self.backlog:
            # Taken before it is sent: callers that arrive while it is in flight resync the rest, never it again.
            key = next(iter(self.backlog))
            amount, ttl, over = self.backlog.pop(key)
            once = uuid.uuid4().hex
            try:
                # Shielded: a caller hanging up (its task cancelled) must not lose an amount already taken off.
                await asyncio.shield(self._add(key, amount, ttl, once))
            except _ERRORS as e:
                self.window.failed(e)
                self._doubt(once, key, amount, ttl, over)      # in doubt like any add: resent with its mark
                return False
        while self.doubtful:
            once = next(iter(self.doubtful))
            key, amount, ttl, over = self.doubtful.pop(once)
            if over and over < time.monotonic():
                continue        # its window is over: never read again
            try:
                await asyncio.shield(self._add(key, amount, ttl, once))
            except _ERRORS as e:
                self.window.failed(e)
                self._doubt(once, key, amount, ttl, over)
                return False
        while self.unheld:
            member = next(iter(self.unheld))
            counter, expires = self.unheld.pop(member)
            if expires < time.monotonic():
                continue        # expired in Redis by now
            try:
                await asyncio.shield(self._redis.zrem(self.HOLDS + counter, member))
            except _ERRORS as e:
                self.window.failed(e)
                self.unheld[member] = (counter, expires)
                return False
        return True

    def _doubt(self, once: str, key: str, amount: float, ttl_s: int, over: float) -> None:
        """An add that may or may not have reached Redis: resent with its mark once Redis answers."""
        now = time.monotonic()
        self.doubtful = self._purge_doubtful(self.doubtful, lambda v: not v[3] or v[3] >= now)
        self.doubtful[once] = (key, amount, ttl_s, over)
        self.window.retry(self._available)

    @property
    def outages(self) -> int:
        return self.window.outages

    async def close(self) -> None:
        await self.window.stop()
        await self._redis.aclose()
