"""Counters shared by gateway replicas: in this process, or in Redis when `redis_url` is set.

Budgets and rate limits count here, so several replicas behind a load balancer enforce one limit.
"""

from __future__ import annotations

import time


class MemoryCounters:
    """One process's counters with expiry (a replica alone, or tests)."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[float, float]] = {}

    async def add(self, key: str, amount: float, ttl_s: int) -> float:
        now = time.monotonic()
        value, expires = self._values.get(key, (0.0, 0.0))
        if expires and expires < now:
            value, expires = 0.0, 0.0
        value += amount
        self._values[key] = (value, expires or (now + ttl_s if ttl_s else 0.0))
        return value

    async def get(self, key: str) -> float:
        value, expires = self._values.get(key, (0.0, 0.0))
        return 0.0 if expires and expires < time.monotonic() else value

    async def close(self) -> None:
        return None


class RedisCounters:
    """Counters in Redis: INCRBYFLOAT plus an expiry set when the key is created (atomic per call)."""

    PREFIX = "prefixgate:counter:"

    def __init__(self, url: str) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.from_url(url)

    async def add(self, key: str, amount: float, ttl_s: int) -> float:
        k = self.PREFIX + key
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incrbyfloat(k, amount)
            if ttl_s:
                pipe.expire(k, ttl_s, nx=True)
            value, *_ = await pipe.execute()
        return float(value)

    async def get(self, key: str) -> float:
        value = await self._redis.get(self.PREFIX + key)
        return float(value) if value is not None else 0.0

    async def close(self) -> None:
        await self._redis.aclose()
