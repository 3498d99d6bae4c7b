"""Who owns each piece of provider-side state the gateway relays: explicit caches (Gemini and Vertex
`cachedContents`), stored Responses, and anything stored later (kind is a free string: "cached_content",
"response", "interaction", ...).

Every such resource lives in the gateway's own provider account, so the provider cannot tell tenants apart:
the gateway records, when a resource is created through it, which tenant created it, and answers any other
tenant as if the resource did not exist. An id the gateway never saw created belongs to nobody and is refused
to every keyed caller (fail closed). On an open gateway (no keys) there is one party and nothing is checked.

Kept in the ledger's SQLite file (it survives a restart) and, with `redis_url`, in Redis as well, so every
replica knows every owner; while Redis is down this replica answers from its own file, and the owners it could
not share then are shared once Redis answers again (`shared_later`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from redis.exceptions import RedisError

from prefixgate.gateway.shared_later import SharedLater
from prefixgate.policies.schema import CallerKey

T = TypeVar("T")
# How long an owner is remembered when the resource's own lifetime is not known (OpenAI keeps stored
# responses 30 days); a resource outliving its record becomes nobody's, which refuses, never leaks.
DEFAULT_TTL_S = 31 * 86400
_REDIS_ERRORS = (RedisError, OSError)
PRUNE_EVERY = 1000


def principal(key: CallerKey | None) -> str | None:
    """The party that owns what `key` creates: its tenant, else the key itself (a key *named* like a tenant
    is not that tenant). None on an open gateway, where every caller is one party."""
    if key is None:
        return None
    return f"tenant:{key.tenant}" if key.tenant else f"key:{key.key_sha256}"


class Owners:
    """owner of (kind, id) -> principal; `allows` and `only_own` are the checks endpoints make."""

    REDIS_PREFIX = "prefixgate:owner:"

    def __init__(self, sqlite_path: str, redis_url: str = "", clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(sqlite_path, timeout=10, check_same_thread=False, isolation_level=None, uri=True)
        # As the ledger's appends: a commit is a write to the WAL, not an fsync (it survives the process, not a power cut).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS owners (kind TEXT NOT NULL, id TEXT NOT NULL, owner TEXT NOT NULL, "
                         "expires REAL NOT NULL, PRIMARY KEY (kind, id))")
        self._db.execute("CREATE INDEX IF NOT EXISTS owners_expires ON owners (expires)")
        self._recorded = 0
        self._redis = None
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            self._shared = SharedLater(self._redis, "owner", clock)

    def record(self, kind: str, ident: str, owner: str | None, ttl_s: float = DEFAULT_TTL_S) -> None:
        """`owner` created (kind, ident); remembered for `ttl_s`. Nothing is kept for an open gateway's None.
        In this replica's file when this returns (a follow-up may come at once); in Redis a moment later."""
        if owner is None or not ident:
            return
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?)", (kind, ident, owner, self._clock() + ttl_s))
            self._recorded += 1
            if self._recorded % PRUNE_EVERY == 1:       # expired rows refuse anyway; pruning only bounds the file
                self._db.execute("DELETE FROM owners WHERE expires < ?", (self._clock(),))
        if self._redis is not None:
            self._shared.set(f"{self.REDIS_PREFIX}{kind}:{ident}", owner, ttl_s)

    async def owner(self, kind: str, ident: str) -> str | None:
        if self._redis is not None:
            try:
                found = await self._redis.get(f"{self.REDIS_PREFIX}{kind}:{ident}")
                if found is not None:
                    return found.decode()
            except _REDIS_ERRORS:
                pass        # this replica's own file still answers
        with self._lock:
            row = self._db.execute("SELECT owner FROM owners WHERE kind = ? AND id = ? AND expires >= ?",
                                   (kind, ident, self._clock())).fetchone()
        return row[0] if row else None

    async def allows(self, kind: str, ident: str, caller: str | None) -> bool:
        """Whether `caller` (a principal) may see or touch (kind, ident)."""
        return caller is None or await self.owner(kind, ident) == caller

    async def only_own(self, kind: str, items: Iterable[T], ident_of: Callable[[T], str], caller: str | None) -> list[T]:
        """The items of a list call that `caller` owns."""
        return [item for item in items if await self.allows(kind, ident_of(item), caller)]

    async def forget(self, kind: str, ident: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM owners WHERE kind = ? AND id = ?", (kind, ident))
        if self._redis is not None:
            self._shared.forget(f"{self.REDIS_PREFIX}{kind}:{ident}")
            try:
                await self._redis.delete(f"{self.REDIS_PREFIX}{kind}:{ident}")
            except _REDIS_ERRORS:
                pass        # its expiry ends it

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._shared.drain()
        with self._lock:
            self._db.close()
        if self._redis is not None:
            await self._redis.aclose()
