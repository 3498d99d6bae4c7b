"""Where each stored response or interaction lives: the upstream that answered it.

A `resp_...` id belongs to the upstream organisation (and key) that created it, so a follow-up naming it
(`previous_response_id`, GET, DELETE, `input_items`, `cancel`) must go back there or it 404s. The gateway
remembers id -> upstream for the ones it relays, for as long as ownership remembers the id: in the ledger's
SQLite file (a restart keeps them; the most recent `MAX_REMEMBERED` also in memory), and with `redis_url` in
Redis, shared with every gateway replica (a follow-up behind a load balancer lands on any of them); one
recorded while Redis did not answer goes there once it does (`shared_later`). With several replicas of one
upstream (or accounts), chained requests are pinned to the one that holds the chain. An id whose home is not
known goes to the route's normal choice (which, for one upstream, is the same place).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from redis.exceptions import RedisError

from prefixgate.gateway.ownership import DEFAULT_TTL_S, PRUNE_EVERY
from prefixgate.gateway.shared_later import SharedLater

MAX_REMEMBERED = 100_000


class ResponseHomes:
    REDIS_PREFIX = "prefixgate:home:"

    def __init__(self, sqlite_path: str = "", limit: int = MAX_REMEMBERED, redis_url: str = "",
                 clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self._clock = clock
        self._homes: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._db = None
        self._recorded = 0
        if sqlite_path:
            self._db = sqlite3.connect(sqlite_path, timeout=10, check_same_thread=False, isolation_level=None, uri=True)
            self._db.execute("PRAGMA synchronous=NORMAL")       # as the ledger's appends and the owners
            self._db.execute("CREATE TABLE IF NOT EXISTS response_homes (id TEXT PRIMARY KEY, upstream TEXT NOT NULL, "
                             "expires REAL NOT NULL)")
            self._db.execute("CREATE INDEX IF NOT EXISTS response_homes_expires ON response_homes (expires)")
        self._redis = None
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            self._shared = SharedLater(self._redis, "home", clock)

    def remember(self, response_id: object, upstream: str) -> None:
        """Known here when this returns (a follow-up may come at once); in Redis a moment later."""
        if not isinstance(response_id, str) or not response_id:
            return
        self._keep(response_id, upstream)
        if self._db is not None:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO response_homes VALUES (?, ?, ?)",
                                 (response_id, upstream, self._clock() + DEFAULT_TTL_S))
                self._recorded += 1
                if self._recorded % PRUNE_EVERY == 1:
                    self._db.execute("DELETE FROM response_homes WHERE expires < ?", (self._clock(),))
        if self._redis is not None:
            self._shared.set(self.REDIS_PREFIX + response_id, upstream, DEFAULT_TTL_S)

    def home_of(self, response_id: object) -> str | None:
        """The home this replica knows (`find` first asks the other replicas)."""
        if not isinstance(response_id, str) or not response_id:
            return None
        home = self._homes.get(response_id)
        if home is None and self._db is not None:
            with self._lock:
                row = self._db.execute("SELECT upstream FROM response_homes WHERE id = ? AND expires >= ?",
                                       (response_id, self._clock())).fetchone()
            if row is not None:
                home = row[0]
                self._keep(response_id, home)
        return home

    async def find(self, response_id: object) -> str | None:
        """The home of `response_id`: this replica's, else the one another replica shared (kept here after)."""
        home = self.home_of(response_id)
        if home is not None or self._redis is None or not isinstance(response_id, str) or not response_id:
            return home
        try:
            found = await self._redis.get(self.REDIS_PREFIX + response_id)
        except (RedisError, OSError):
            return None     # the route's normal choice, as without Redis
        if found is None:
            return None
        self._keep(response_id, found.decode())
        return found.decode()

    def _keep(self, response_id: str, upstream: str) -> None:
        self._homes[response_id] = upstream
        self._homes.move_to_end(response_id)
        while len(self._homes) > self.limit:
            self._homes.popitem(last=False)

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._shared.drain()
            await self._redis.aclose()
        if self._db is not None:
            with self._lock:
                self._db.close()
