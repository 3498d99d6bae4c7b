"""Hashes every gateway replica reads from Redis (who owns a stored id, which upstream holds it), written there
off the request path. A write Redis missed (it rested, `prefixgate/redis_outage.py`, or did not answer) is made once
it answers again, though this replica write nothing more, so another replica is not left without the value for the
value's whole lifetime; the newest `MAX_MISSED` are kept."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from prefixgate.gateway.shared_first import started
from prefixgate.redis_outage import PROBE_TIMEOUT_S, RetryWindow

MAX_MISSED = 100_000


class SharedLater:
    def __init__(self, redis: Any, window: RetryWindow, clock: Callable[[], float] = time.time) -> None:
        self._redis = redis
        self._window = window       # the owner's: a write while Redis rests is a missed one at once
        self._clock = clock
        self._writes: set[asyncio.Task] = set()
        self._missed: dict[str, tuple[dict[str, str], float]] = {}     # key -> fields, when it expires (wall time)
        self._unset: dict[str, tuple[str, str]] = {}        # key -> (field, an older key) deletions Redis missed

    def set(self, key: str, fields: dict[str, str], ttl_s: float) -> None:
        """Set `fields` of hash `key`, which then lasts `ttl_s`, in the background (the caller may be answering
        a request)."""
        if self._unset.get(key, ("", ""))[0] in fields:
            del self._unset[key]    # set again since: the deletion is over
        missed = self._missed.pop(key, None)
        if missed is not None:      # older: made later, after this write, it would undo this one's expiry
            fields = {**missed[0], **fields}
        task = asyncio.get_running_loop().create_task(self._write(key, fields, self._clock() + ttl_s))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        started(task)       # the request's answer waits for it (shared_first.py)

    def forget(self, key: str, field: str) -> None:
        """A field no longer true (deleted): never written later."""
        fields, expires = self._missed.pop(key, ({}, 0.0))
        kept = {name: value for name, value in fields.items() if name != field}
        if kept:
            self._missed[key] = (kept, expires)

    async def unset(self, key: str, field: str, older: str) -> None:
        """Delete `field` of hash `key` and the key `older` (an older version's name for it) now, or, if Redis misses
        it, once it answers: a deleted id's owner left in Redis would own it again on every replica."""
        self.forget(key, field)
        self._unset[key] = (field, older)
        while len(self._unset) > MAX_MISSED:
            del self._unset[next(iter(self._unset))]
        if not await self._unset_now(key):
            self._window.retry(self._resent)

    async def _unset_now(self, key: str) -> bool:
        field, older = self._unset[key]
        if await self._window.ask(self._redis.pipeline(transaction=False).hdel(key, field).delete(older).execute) is None:
            return False
        if self._unset.get(key) == (field, older):
            del self._unset[key]
        return True

    async def drain(self) -> None:
        """Wait for the writes under way, then try those Redis missed once more after its window and the probe's
        ping (once: it may never answer; a window another client began may still hold the writes a closing replica
        made last)."""
        if self._writes:
            await asyncio.gather(*self._writes)
        await self._window.stop()
        if self._missed or self._unset:
            await self._window.rested(max(self._window.outage.until - time.monotonic(), 0.0) + PROBE_TIMEOUT_S + 0.1)
            await self._resent()

    async def _write(self, key: str, fields: dict[str, str], expires: float) -> None:
        if await self._set(key, fields, expires):
            await self._resent()
        else:
            self._window.retry(self._resent)

    async def _resent(self) -> bool:
        """The writes Redis missed, made now; False while some remain."""
        for key in list(self._unset):
            if key in self._unset and not await self._unset_now(key):
                return False
        while self._missed:
            key, (fields, expires) = self._missed.popitem()
            if expires > self._clock() and not await self._set(key, fields, expires):
                return False
        return True

    async def _set(self, key: str, fields: dict[str, str], expires: float) -> bool:
        # One round trip; MULTI so that no replica sees the fields without their expiry.
        if await self._window.ask(self._redis.pipeline(transaction=True).hset(key, mapping=fields).expire(
                key, max(1, int(expires - self._clock()))).execute) is not None:
            return True
        # Missed (the window logged the outage once): two missed writes of one key, the later's fields over the
        # earlier's, as Redis would have them.
        earlier = self._missed.pop(key, ({}, 0.0))[0]
        self._missed[key] = ({**earlier, **fields}, expires)
        while len(self._missed) > MAX_MISSED:
            del self._missed[next(iter(self._missed))]
        return False
