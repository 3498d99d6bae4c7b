"""A caller's own `cachedContents.create` that got no answer: Google may have made the cache all the same.

The create went out and no answer came (`UpstreamFailure.in_doubt`: the upstream did not answer in time, or the
connection broke before its answer was read): the cache may exist in the gateway's project, billed for its writing and its storage, owned by
no tenant (invisible to the caller who made it, unlisted, never deleted). It is searched for in the upstream's
caches (`ExplicitCaches.search`, a few times: Google may finish it after the gateway gave up), then:

- found, it is the caller's (its list, get and delete work for them alone) and booked as the create would have
  been, its hold settled at that cost;
- not there when the list is last read to its end, its hold is released (Google made nothing);
- unresolved (the list unreadable or too long, several caches that could be it, another create that could have
  made it: `Asked`, or the search failing in a way no one foresaw), it is booked at the worst case the create held, on a row that says it is in doubt: a tenant
  charged for a cache that may not exist is better than one whose budget an unseen cache overspent.

A caller hanging up mid-create does not reach here: the call is not cancelled (cache_scope answers no disconnect),
so its answer is booked and owned as any other.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from prefixgate.errors import RequestError
from prefixgate.providers.cached_contents import parse_rfc3339

if TYPE_CHECKING:
    from prefixgate.dialects.wire import WireFormat
    from prefixgate.gateway.explicit_caches import ExplicitCaches
    from prefixgate.policies.schema import Upstream
    from prefixgate.redis_outage import RetryWindow

log = logging.getLogger("prefixgate.gateway")
DEFAULT_TTL_S = 3600.0      # a create naming no lifetime lives an hour (Gemini's and Vertex's default)
CLOCK_SKEW_S = 30.0         # Google's createTime against this host's clock
LATE_S = 60.0               # how long after the gateway gave up Google may still make it
TTL_SLACK_S = 60.0          # expireTime - createTime against the ttl asked (made while the clock ran)
FIND_TRIES = 4              # searches for a creation in doubt, `tick_s` x 1, 2, 3, 4 after it
KEPT_S = 3600.0             # a caller's create in doubt, or the cache found for it, kept in mind this long
SHARED = "prefixgate:cache-creates:"


@dataclass(frozen=True)
class Asked:
    """What a create asked for, as the cache Google made of it shows it again.

    Matched, not tagged: the planner's own creates carry a displayName of the gateway's (`ExplicitCaches.named`),
    but a caller's displayName is the caller's field (Google shows it back in get and list, and no update changes
    it), so a tag would be a visible change to what they made. A cache shows neither its contents nor who asked for
    it, so a match must never be a guess between tenants: a cache is taken only when, at the last search (Google may
    make the caller's after another that fits), exactly one cache no one owns fits, older than one search's wait (a
    create answered meanwhile is booked by then: its owner recorded, or on an open gateway its home), and no `rival` (another create a cache could fit as
    well) is in flight or was in doubt at the same time on this replica (`ExplicitCaches.creating`, `doubts`: of two
    in doubt at once, with one of them made, either could take it). A rival's lifetime need not be spelt alike: no
    ttl is Google's default hour, "3600s" and "3630s" fit one cache, and an expireTime may fit a ttl. Anything else is
    a doubt, booked at the worst case. With Redis, another replica's creates are rivals as this one's (`Rivals`)."""

    upstream: str
    model: str
    display_name: str
    ttl_s: float | None         # asked as a duration (or nothing: Google's default hour)
    expire: float | None        # asked as an expiry
    sent: float
    failed: float = 0.0
    id: str = field(default_factory=lambda: uuid.uuid4().hex, compare=False)

    def rival(self, other: Asked, in_flight: bool = False) -> bool:
        """Whether one cache could fit both this create and `other` (still `in_flight`: its window not closed yet):
        the same upstream, model and displayName, lifetimes one cache's could match, windows that meet."""
        if (other.upstream, other.model, other.display_name) != (self.upstream, self.model, self.display_name):
            return False
        if self.expire is not None and other.expire is not None:
            if abs(self.expire - other.expire) > 2.0:   # each fits an expiry within 1 s of its own
                return False
        elif self.expire is None and other.expire is None:
            if abs((self.ttl_s or DEFAULT_TTL_S) - (other.ttl_s or DEFAULT_TTL_S)) > 2 * TTL_SLACK_S:
                return False        # (an expiry against a duration: one cache may fit both)
        ends = math.inf if in_flight else other.failed + LATE_S
        return other.sent - CLOCK_SKEW_S <= self.failed + LATE_S and self.sent - CLOCK_SKEW_S <= ends

    def fits(self, cache: dict) -> bool:
        try:
            created = parse_rfc3339(cache.get("createTime"), "createTime")
            expires = parse_rfc3339(cache.get("expireTime"), "expireTime")
        except RequestError:
            return False
        if str(cache.get("model") or "").rpartition("models/")[2] != self.model:
            return False
        if (cache.get("displayName") or "") != self.display_name:
            return False
        if not self.sent - CLOCK_SKEW_S <= created <= self.failed + LATE_S:
            return False
        if self.expire is not None:
            return abs(expires - self.expire) <= 1.0
        return abs(expires - created - (self.ttl_s or DEFAULT_TTL_S)) <= TTL_SLACK_S


Book = Callable[[dict | None, str], Awaitable[None]]
T = TypeVar("T")


async def unless_lost(read: Awaitable[T], book: Book, stopped: str, failed: str, *logged: object) -> T | None:
    """What `read` (a background search for a call in doubt, or its reading again) found; None once it is booked in
    doubt instead: `book(None, stopped)` when the gateway stops meanwhile (then cancelled on), `book(None, failed)`
    (its `{}` the error's type) when it fails in a way no one foresaw, logged with `logged` (a message and its
    arguments): a bug or an answer of the wrong shape must not leave the hold unbooked."""
    try:
        return await read
    except asyncio.CancelledError:
        await book(None, stopped)
        raise
    except Exception as e:
        log.exception(*logged)
        await book(None, failed.format(type(e).__name__))
        return None


async def resolve(caches: ExplicitCaches, upstream: Upstream, wire: WireFormat, key: str | None, asked: Asked,
                  owned: Callable[[str], Awaitable[bool]], book: Book, release: Callable[[], None]) -> None:
    """Search for the cache `asked` may have made: `book(cache, "")` once found, `book(None, why)` if unresolved
    (also when the gateway stops mid-search, or the search fails unforeseen), `release()` if there is none."""
    searched = await unless_lost(
        _search(caches, upstream, wire, key, asked, owned), book, "the gateway stopped while it was searched for",
        "its search failed ({})", "cached contents: the search for a create of %s in doubt (upstream %s, displayName "
        "%r, sent at %.3f, create %s) failed", asked.model, asked.upstream, asked.display_name, asked.sent, asked.id)
    if searched is None:
        return
    found, why = searched
    if found is not None:
        await book(found, "")
    elif why:
        log.warning("cached contents: a create of %s in doubt is unresolved: %s", asked.model, why)
        await book(None, why)
    else:
        log.info("cached contents: a create of %s got no answer, and no such cache appeared", asked.model)
        release()


async def _search(caches: ExplicitCaches, upstream: Upstream, wire: WireFormat, key: str | None, asked: Asked,
                  owned: Callable[[str], Awaitable[bool]]) -> tuple[dict | None, str]:
    """The cache `asked` made (claimed), or None and why it is in doubt ("": none was made)."""
    for attempt in range(1, FIND_TRIES + 1):
        await asyncio.sleep(caches.tick_s * attempt)
        search = await caches.search(upstream, wire, key, asked.fits, every=True)
        if search.capped:
            break       # a longer list would stop there again
    if search.unread:
        return None, search.unread
    free = [c for c in search.found if not await owned(str(c.get("name", "")))]
    rivalled = await caches.rivals.of(asked) if free else ""
    free = [c for c in free if c.get("name") not in caches.rivals.claimed]      # after the last await: no race
    if free and rivalled:
        return None, rivalled
    if any(parse_rfc3339(c["createTime"], "createTime") > caches.clock() - caches.tick_s for c in free):
        return None, "a cache that fits is too new to tell from another's create"
    if len(free) > 1:
        return None, f"{len(free)} caches no one owns fit what it asked"
    if free:
        caches.rivals.claim(free[0]["name"])
    return (free[0] if free else None), ""


class Rivals:
    """A caller's creates (`Asked`) in flight and in doubt (the last `KEPT_S`), which a cache found for another could
    be the cache of; and the caches found (`claimed`: kept as long, owned by then). With Redis, every replica's: one
    hash per upstream, model and displayName, a field per create (one Redis missed while it did not answer goes
    unseen by the other replicas; one a stopped replica left in flight is a rival for `KEPT_S`)."""

    def __init__(self, clock: Callable[[], float], redis: Any = None, window: RetryWindow | None = None) -> None:
        self.clock, self._redis, self._window = clock, redis, window
        self.creating: list[Asked] = []
        self.doubts: list[Asked] = []
        self.claimed: dict[str, float] = {}
        self._sharing: set[asyncio.Task] = set()

    def began(self, asked: Asked) -> None:
        self.creating.append(asked)
        self._share(asked, asked.sent, None)

    def doubted(self, asked: Asked) -> None:
        self.doubts = [a for a in self.doubts if a.failed > self.clock() - KEPT_S] + [asked]
        self._share(asked, asked.sent, asked.failed)

    def ended(self, asked: Asked) -> None:
        """`asked` is answered (its cache owned, or refused) or `doubted`: no longer in flight."""
        self.creating = [a for a in self.creating if a is not asked]
        if not any(a.id == asked.id for a in self.doubts):
            self._share(asked, None, None)

    def claim(self, name: str) -> None:
        now = self.clock()
        self.claimed = {n: at for n, at in self.claimed.items() if at > now - KEPT_S} | {name: now}

    async def of(self, asked: Asked) -> str:
        """Why a cache that fits `asked` could be another create's ("" when none could)."""
        shared = await self._shared(asked)
        if shared is None:
            return "the other replicas' creates could not be read"
        flying = [*self.creating, *(a for a in shared if not a.failed)]
        if any(asked.rival(a, in_flight=True) for a in flying if a.sent > self.clock() - KEPT_S) or any(
                asked.rival(a) for a in [*self.doubts, *shared] if a.failed and a.id != asked.id):
            return "another create whose cache could fit what this one asked is in flight or in doubt"
        return ""

    async def aclose(self) -> None:
        await asyncio.gather(*self._sharing, return_exceptions=True)

    @staticmethod
    def _key(asked: Asked) -> str:
        named = json.dumps([asked.upstream, asked.model, asked.display_name]).encode()
        return SHARED + hashlib.sha256(named).hexdigest()

    def _share(self, asked: Asked, sent: float | None, failed: float | None) -> None:
        """`asked` in flight (`sent`), in doubt (and `failed`), or gone (None), for every replica to read."""
        if self._redis is None or self._window is None:
            return
        key, redis = self._key(asked), self._redis

        async def write() -> object:
            if sent is None:
                return await redis.hdel(key, asked.id)
            value = json.dumps([sent, failed, asked.ttl_s, asked.expire])
            return await redis.pipeline(transaction=False).hset(key, asked.id, value).expire(key, int(KEPT_S * 2)).execute()

        task = asyncio.get_running_loop().create_task(self._window.ask(write))
        self._sharing.add(task)
        task.add_done_callback(self._sharing.discard)

    async def _shared(self, asked: Asked) -> list[Asked] | None:
        """The creates every replica shared that `asked` could be told from (None: Redis did not answer)."""
        if self._redis is None or self._window is None:
            return []
        found = await self._window.ask(lambda: self._redis.hgetall(self._key(asked)))
        if found is None:
            return None
        creates = []
        for ident, value in found.items():
            sent, failed, ttl_s, expire = json.loads(value)
            creates.append(Asked(asked.upstream, asked.model, asked.display_name, ttl_s, expire, sent, failed or 0.0,
                                 ident.decode()))
        return [a for a in creates if a.id != asked.id]
