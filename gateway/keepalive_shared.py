"""Keep-alive's sessions as gateway replicas sharing Redis see them together.

Each replica holds the sessions of the requests it answered (`gateway.keepalive`). Behind a balancer that is not
sticky a conversation's turns alternate between replicas, and each would judge the session idle from its own view:
one refreshes the entry another replica's request just read (buying nothing), then both keep refreshing it (each
idle gap paid and recorded twice). Here a session's latest use is shared, and a refresh is sent under a lease:

- every request *touches*, in Redis, the places its prefix keeps: its last `RECENT` prefix keys in its group (a
  session anchored at any of them is the one it continued: a turn adds a few blocks, so the session another replica
  answered just before is among them) and the route's static prefix;
- a refresh takes its place's lease (SET NX PX, one round trip that also reads the place's latest touch) so exactly
  one replica sends it, then touches the place; a replica whose place was used after its own last look does not
  send: a conversation continued elsewhere stops here (the replica that answered it keeps it), an entry refreshed
  elsewhere is taken as touched then and planned again;
- a refresh leaves what it kept (`Kept`), and a request asks for it while it is upstream, so the turn that comes
  back after the gap is credited with the saving on whichever replica it reaches.

Places are hashes (no tenant, key or credential in Redis) and every key expires (a touch after twice the entry's
TTL, a lease after a refresh's timeout). While Redis does not answer, each replica decides on its own view (the
behaviour of a single replica) and says so in its log; without `redis_url` nothing here is used.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass

from redis.exceptions import RedisError

log = logging.getLogger("prefixgate.keepalive")

TOUCH = "prefixgate:keepalive:touch:"
LEASE = "prefixgate:keepalive:lease:"
KEPT = "prefixgate:keepalive:kept:"
RECENT = 32             # prefix keys of a request touched: the turns since another replica's request fit in these
MAX_PENDING = 1000      # touches on their way to Redis; past this a request's touch is dropped (as without Redis)
_ERRORS = (RedisError, OSError)

# Take the lease when free, and read the place's latest touch in the same step.
CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('GET', KEYS[2]) or ''}
end
return {0, ''}
"""
# Touch the place unless a later use is there already, and give the lease back (only ours: one that expired and
# was taken since is another's). Values are "touched request", compared as numbers and stored as sent.
RELEASE = """
local old = redis.call('GET', KEYS[2])
if ARGV[2] ~= '' and (not old or tonumber(string.match(old, '^(%S+)')) < tonumber(ARGV[4])) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""


@dataclass(frozen=True)
class Seen:
    """A place's latest use anywhere, by the gateways' clock: `touched` (a request or a refresh read it) and
    `request` (the latest request that did). Zero: never seen, or Redis did not say."""

    touched: float = 0.0
    request: float = 0.0


@dataclass(frozen=True)
class Kept:
    """What a replica's refreshes kept of a conversation's entry, for the replica its next request reaches (that
    request's record is credited with the saving, `keepalive_saved_usd`, as the session's own replica would)."""

    last_request: float     # the session's latest request, by the gateways' clock
    written_ttl_s: float    # the lifetime that request wrote: a gap past it read only what refreshes kept
    refreshes: int
    tokens: int             # the entry's tokens
    margin: str             # USD per million tokens a read saves over writing again (write price less read price)


def place(*parts: object) -> str:
    """A session's place in Redis: a hash of what identifies it (its group and prefix key, or its static key)."""
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()[:32]


class SharedSessions:
    def __init__(self, redis_url: str, lease_s: float) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._claim = self._redis.register_script(CLAIM)
        self._release = self._redis.register_script(RELEASE)
        self.lease_ms = int(lease_s * 1000)
        self._pending: set[asyncio.Task] = set()
        self._down = False

    def touch(self, places: list[str], now: float, ttl_s: float) -> None:
        """A request used these places at `now` (off the request path: never waits for Redis)."""
        if len(self._pending) >= MAX_PENDING:
            return
        task = asyncio.get_running_loop().create_task(self._touch(places, f"{now!r} {now!r}", int(ttl_s * 2000)))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _touch(self, places: list[str], value: str, px: int) -> None:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for p in places:
                    pipe.set(TOUCH + p, value, px=max(1, px))
                await pipe.execute()
            self._up()
        except _ERRORS as e:
            self._went_down(e)

    async def claim(self, where: str) -> tuple[str, Seen] | None:
        """Take `where`'s lease: (its token, the place's latest use), or None while another replica holds it. Redis
        not answering: ("", nothing seen): this replica decides alone."""
        token = uuid.uuid4().hex
        try:
            taken, seen = await self._claim(keys=[LEASE + where, TOUCH + where], args=[token, self.lease_ms])
        except _ERRORS as e:
            self._went_down(e)
            return "", Seen()
        self._up()
        if not taken:
            return None
        touched, _, request = (seen.decode() if isinstance(seen, bytes) else seen or "").partition(" ")
        return token, Seen(float(touched or 0), float(request or 0))

    async def release(self, where: str, token: str, seen: Seen | None, ttl_s: float) -> None:
        """Give `where`'s lease back; `seen`: the place's use to record (a refresh read it)."""
        if not token:
            return
        value = f"{seen.touched!r} {seen.request!r}" if seen is not None else ""
        try:
            await self._release(keys=[LEASE + where, TOUCH + where], args=[token, value, max(1, int(ttl_s * 2000)),
                                                                           repr(seen.touched if seen else 0.0)])
        except _ERRORS as e:
            self._went_down(e)      # the lease expires on its own

    async def keeping(self, where: str, kept: Kept, ttl_s: float) -> None:
        """A refresh kept `where`'s entry: what it kept, for whichever replica the session's next request reaches."""
        try:
            await self._redis.set(KEPT + where, json.dumps(kept.__dict__), px=max(1, int(ttl_s * 2000)))
        except _ERRORS as e:
            self._went_down(e)

    async def kept(self, places: list[str]) -> Kept | None:
        """What refreshes kept of the deepest of `places` (a request's prefix keys) that any replica kept."""
        try:
            found = await self._redis.mget([KEPT + p for p in places]) if places else []
        except _ERRORS as e:
            self._went_down(e)
            return None
        deepest = next((v for v in reversed(found) if v), None)
        return Kept(**json.loads(deepest)) if deepest else None

    def _went_down(self, e: BaseException) -> None:
        if not self._down:
            log.warning("keep-alive: redis unreachable (%s); each replica refreshes its own view of sessions until it "
                        "answers (a session another replica used may be refreshed twice)", type(e).__name__)
        self._down = True

    def _up(self) -> None:
        if self._down:
            log.warning("keep-alive: redis answers again; sessions are shared between replicas")
        self._down = False

    async def aclose(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await self._redis.aclose()
