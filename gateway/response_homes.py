"""Where each stored response or interaction lives: the upstream that answered it.

A `resp_...` id belongs to the upstream organisation (and key) that created it, so a follow-up naming it
(`previous_response_id`, GET, DELETE, `input_items`, `cancel`) must go back there or it 404s. The gateway
remembers id -> upstream for the ones it relays, bounded (oldest out first); with several replicas of one
upstream (or accounts), chained requests are pinned to the one that holds the chain. With `redis_url` the
home is shared with every gateway replica (a follow-up behind a load balancer lands on any of them), for as
long as ownership remembers the id; without Redis a follow-up that lands on another replica falls back to
the route's normal choice (which, for one upstream, is the same place), as it does for a home Redis has not
been given yet (`shared_later`: one recorded while Redis did not answer goes there once it does).
"""

from __future__ import annotations

from collections import OrderedDict

from redis.exceptions import RedisError

from prefixgate.gateway.ownership import DEFAULT_TTL_S
from prefixgate.gateway.shared_later import SharedLater

MAX_REMEMBERED = 100_000


class ResponseHomes:
    REDIS_PREFIX = "prefixgate:home:"

    def __init__(self, limit: int = MAX_REMEMBERED, redis_url: str = "") -> None:
        self.limit = limit
        self._homes: OrderedDict[str, str] = OrderedDict()
        self._redis = None
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            self._shared = SharedLater(self._redis, "home")

    def remember(self, response_id: object, upstream: str) -> None:
        """Known here when this returns (a follow-up may come at once); in Redis a moment later."""
        if not isinstance(response_id, str) or not response_id:
            return
        self._keep(response_id, upstream)
        if self._redis is not None:
            self._shared.set(self.REDIS_PREFIX + response_id, upstream, DEFAULT_TTL_S)

    def home_of(self, response_id: object) -> str | None:
        """The home this replica knows (`find` first asks the other replicas)."""
        return self._homes.get(response_id) if isinstance(response_id, str) else None

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
