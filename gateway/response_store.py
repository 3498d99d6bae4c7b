"""Where the response cache keeps its entries: this process's memory, bounded in bytes per route, or Redis
(shared by every replica, each entry expiring there at its TTL).

A store holds opaque bytes under opaque keys (hashes: no tenant name or prompt text ever appears in a key).
It never judges what it holds; `response_cache` decides what is stored and reads entries defensively. Each
entry may name the answer id its replay hands out, and the stored answer its request continues (a
`previous_response_id`), so that `forget` can drop both kinds once that answer is deleted upstream.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar

from prefixgate.redis_outage import ERRORS, Resting, RetryWindow, outage_of

T = TypeVar("T")
log = logging.getLogger("prefixgate.gateway")
# Redis key prefix: entries live beside the gateway's other shared state under their own name.
REDIS_PREFIX = "prefixgate:response:"
ID_PREFIX = "prefixgate:response-id:"     # answer id (hashed, `id_key`) -> the key of the entry handing it out
AFTER_PREFIX = "prefixgate:response-after:"     # answer id (hashed) -> the keys of the entries continuing it (a set)


def id_key(ident: str) -> str:
    """The key under which the key of the entry handing out answer id `ident` is kept (a hash, as every key)."""
    return hashlib.sha256(b"answer-id\x1f" + ident.encode()).hexdigest()


class StoreError(Exception):
    """The store could not answer (Redis unreachable, timed out): the cache treats it as a miss."""


class StoreResting(StoreError):
    """Redis not called: it rests after a call of this process failed (that client logged the outage)."""


class MemoryStore:
    """One route's entries in this process: least recently used first out past `max_bytes` (keys and values
    counted), each dropped at its TTL when next touched."""

    def __init__(self, max_bytes: int, on_evict: Callable[[int], None] = lambda n: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, tuple[float, bytes, str | None, str | None]] = OrderedDict()
        self._ids: dict[str, str] = {}      # an entry's answer id -> its key
        self._after: dict[str, set[str]] = {}   # an answer id -> the keys of the entries whose requests continue it
        self._on_evict = on_evict
        self._clock = clock

    async def get(self, key: str) -> bytes | None:
        found = self._entries.get(key)
        if found is None:
            return None
        if found[0] <= self._clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return found[1]

    async def put(self, key: str, value: bytes, ttl_s: float, ident: str | None = None, after: str | None = None) -> None:
        """`ident`: the answer id the entry's replay hands out; `after`: the stored answer its request continues."""
        self._drop(key)
        size = len(key) + len(value)
        if size > self.max_bytes:
            return
        self._entries[key] = (self._clock() + ttl_s, value, ident, after)
        if ident:
            self._ids[ident] = key
        if after:
            self._after.setdefault(after, set()).add(key)
        self.bytes += size
        evicted = 0
        while self.bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest)
            evicted += 1
        if evicted:
            self._on_evict(evicted)

    async def delete(self, key: str) -> None:
        self._drop(key)

    async def forget(self, ident: str) -> None:
        """Drop the entry whose replay hands out answer id `ident`, and those whose requests continue it."""
        for key in [self._ids.get(ident), *self._after.get(ident, ())]:
            if key is not None:
                self._drop(key)

    def _drop(self, key: str) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self.bytes -= len(key) + len(found[1])
            if found[2] and self._ids.get(found[2]) == key:
                del self._ids[found[2]]
            chained = self._after.get(found[3] or "")
            if chained is not None:
                chained.discard(key)
                if not chained:
                    del self._after[found[3]]   # type: ignore[arg-type]

    async def close(self) -> None:
        self._entries.clear()
        self._ids.clear()
        self._after.clear()
        self.bytes = 0


class RedisStore:
    """Entries in Redis, shared by the replicas that name the same Redis; Redis expires each at its TTL and its
    own `maxmemory` policy bounds the whole (the route's `max_mb` still bounds each entry)."""

    def __init__(self, url: str) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        # No lines of its own: the cache logs each bypass.
        self._window = RetryWindow(log, "", "", outage=outage_of(url))

    async def _call(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await self._window.call(call)
        except Resting as e:
            raise StoreResting(str(e)) from None
        except ERRORS as e:
            raise StoreError(f"redis: {type(e).__name__}") from e

    def retry(self, done: Callable[[], Awaitable[bool]]) -> None:
        """`done` after each window until it is true (`RetryWindow.retry`)."""
        self._window.retry(done)

    async def get(self, key: str) -> bytes | None:
        return await self._call(lambda: self._redis.get(REDIS_PREFIX + key))

    async def put(self, key: str, value: bytes, ttl_s: float, ident: str | None = None, after: str | None = None) -> None:
        px = max(1, int(ttl_s * 1000))
        pipe = self._redis.pipeline(transaction=False)
        pipe.set(REDIS_PREFIX + key, value, px=px)
        if ident:
            pipe.set(ID_PREFIX + id_key(ident), key, px=px)
        if after:
            chained = AFTER_PREFIX + id_key(after)
            pipe.sadd(chained, key)
            # As long as its longest-lived entry (GT alone never sets an expiry on a set that has none).
            pipe.pexpire(chained, px, nx=True)
            pipe.pexpire(chained, px, gt=True)
        await self._call(pipe.execute)

    async def delete(self, key: str) -> None:
        await self._call(lambda: self._redis.delete(REDIS_PREFIX + key))

    async def forget(self, ident: str) -> None:
        """Drop the entry whose replay hands out answer id `ident`, and those whose requests continue it (from any
        replica on this Redis)."""
        index, chained = ID_PREFIX + id_key(ident), AFTER_PREFIX + id_key(ident)

        async def drop() -> None:
            key = await self._redis.get(index)
            keys = [*([key] if key is not None else []), *await self._redis.smembers(chained)]
            await self._redis.delete(index, chained, *(REDIS_PREFIX + k.decode() for k in keys))
        await self._call(drop)

    async def close(self) -> None:
        await self._window.stop()
        await self._redis.aclose()
