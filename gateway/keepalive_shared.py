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
  back after the gap is credited with the saving on whichever replica it reaches;
- in the same read, a request asks for its session's and its static prefix's latest use anywhere (`Elsewhere`):
  the gap model learns the gap from the session's previous turn on whichever replica answered it (and how many
  turns it has had), not from the turn this replica last saw (twice the real gap, with two replicas);
- each replica's gap counts (`lifetime.GapModel`'s bins) are added to one hash per route and shape, and the totals
  read back, by the keep-alive worker (`share_gaps` over `prefixgate.summed_counts`, each tick for a model that
  counted something, every `REREAD_S` for the others): a replica just started decides on what the others learnt.

Places are hashes (no tenant, key or credential in Redis) and every key expires (a touch after twice the entry's
TTL, a lease after a refresh's timeout, a route's gap counts after `GAPS_TTL_S` without a request). While Redis does not answer, each replica decides on its own view (the
behaviour of a single replica) and says so in its log; without `redis_url` nothing here is used.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass

from prefixgate.cache_planner.lifetime import MAX_WEIGHT, GapBook
from prefixgate.redis_outage import ERRORS as _ERRORS
from prefixgate.redis_outage import RetryWindow, outage_of
from prefixgate.summed_counts import SummedCounts

log = logging.getLogger("prefixgate.keepalive")

TOUCH = "prefixgate:keepalive:touch:"
LEASE = "prefixgate:keepalive:lease:"
KEPT = "prefixgate:keepalive:kept:"
GAPS = "prefixgate:keepalive:gaps:"
GAPS_TTL_S = 86400
REREAD_S = 10.0         # a model that counted nothing here reads the others' counts this often
RECENT = 32             # prefix keys of a request touched: the turns since another replica's request fit in these
MAX_PENDING = 1000      # touches on their way to Redis; past this a request's touch is dropped (as without Redis)
MAX_MISSED = 10_000     # releases and kept entries Redis missed, to resend: the newest (an outage of hours refreshes
                        # on and on, each session's place a new one)

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
    `request` (the latest request that did), `turns` (that request's session's requests so far) and `anchor` (the
    place was that session's anchor: its deepest; a place another conversation with the same start touched is not).
    Zero: never seen, or Redis did not say."""

    touched: float = 0.0
    request: float = 0.0
    turns: int = 0
    anchor: bool = False

    @property
    def value(self) -> str:
        return f"{self.touched!r} {self.request!r} {self.turns}{' anchor' if self.anchor else ''}"

    @classmethod
    def of(cls, raw: bytes | str | None) -> Seen:
        fields = [*(raw.decode() if isinstance(raw, bytes) else raw or "").split(" "), "", "", "", ""]
        return cls(float(fields[0] or 0), float(fields[1] or 0), int(fields[2] or 0), fields[3] == "anchor")


@dataclass(frozen=True)
class Kept:
    """What a replica's refreshes kept of a conversation's entry, for the replica its next request reaches (that
    request's record is credited with the saving, `keepalive_saved_usd`, as the session's own replica would)."""

    last_request: float     # the session's latest request, by the gateways' clock
    written_ttl_s: float    # the lifetime that request wrote: a gap past it read only what refreshes kept
    refreshes: int
    tokens: int             # the entry's tokens
    margin: str             # USD per million tokens a read saves over writing again (write price less read price)


@dataclass(frozen=True)
class Elsewhere:
    """What a request asked of Redis while it was upstream: what refreshes kept of its session (None: nothing), its
    session's latest use (its deepest place any request touched) and its static prefix's."""

    kept: Kept | None = None
    session: Seen = Seen()
    static: Seen = Seen()


def place(*parts: object) -> str:
    """A session's place in Redis: a hash of what identifies it (its group and prefix key, or its static key)."""
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()[:32]


class SharedSessions:
    def __init__(self, redis_url: str, lease_s: float) -> None:
        import redis
        import redis.asyncio as aioredis

        self._redis = aioredis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._claim = self._redis.register_script(CLAIM)
        self._release = self._redis.register_script(RELEASE)
        self.window = RetryWindow(log, "keep-alive: redis unreachable (%s); each replica refreshes its own view of "
                                  "sessions and learns gaps from its own requests until it answers (a session another "
                                  "replica used may be refreshed twice)",
                                  "keep-alive: redis answers again; sessions are shared between replicas",
                                  outage=outage_of(redis_url))
        # The gap models' counts, halved (as a model alone halves its own) past MAX_WEIGHT returned and censored idle
        # times; written by the keep-alive worker each tick (`share_gaps`), on a client of its own.
        self._counts_client = redis.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._gaps = SummedCounts(self._counts_client, self.window, GAPS_TTL_S, every_s=0.0,
                                  reread_s=REREAD_S, cap=MAX_WEIGHT, weighed=("r|", "c|"))
        self.lease_ms = int(lease_s * 1000)
        self._pending: set[asyncio.Task] = set()
        # (place, "release" | "kept") -> what Redis did not get, and when it would have expired there (monotonic)
        self._missed: dict[tuple[str, str], tuple[list, float]] = {}

    def touch(self, places: list[str], anchor: str, now: float, ttl_s: float, turns: int) -> None:
        """A request, its session's `turns`-th anchored at `anchor`, used these places at `now` (off the request
        path: never waits for Redis)."""
        if len(self._pending) >= MAX_PENDING:
            return
        values = {p: Seen(now, now, turns, p == anchor).value for p in places}
        task = asyncio.get_running_loop().create_task(self._touch(values, int(ttl_s * 2000)))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _touch(self, values: dict[str, str], px: int) -> None:
        if self.window.resting():
            return
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for p, value in values.items():
                    pipe.set(TOUCH + p, value, px=max(1, px))
                await pipe.execute()
            self.window.answered()
        except _ERRORS as e:
            self.window.failed(e)

    async def claim(self, where: str) -> tuple[str, Seen] | None:
        """Take `where`'s lease: (its token, the place's latest use), or None while another replica holds it. Redis
        not answering: ("", nothing seen): this replica decides alone."""
        if self.window.resting():
            return "", Seen()
        token = uuid.uuid4().hex
        try:
            taken, seen = await self._claim(keys=[LEASE + where, TOUCH + where], args=[token, self.lease_ms])
        except _ERRORS as e:
            self.window.failed(e)
            return "", Seen()
        self.window.answered()
        if not taken:
            return None
        return token, Seen.of(seen)

    async def release(self, where: str, token: str, seen: Seen | None, ttl_s: float) -> None:
        """Give `where`'s lease back; `seen`: the place's use to record (a refresh read it). Kept and resent once
        Redis answers when it did not: a touch left out would let another replica, its lease expired, take the place
        as unused since and pay for the same refresh again (the script keeps the later use and frees only our lease,
        so a late one is harmless)."""
        value = seen.value if seen is not None else ""
        if token or value:      # neither: nothing taken (Redis did not answer the claim) and nothing to record
            await self._send(where, "release", [token, value, repr(seen.touched if seen else 0.0)], ttl_s * 2)

    async def keeping(self, where: str, kept: Kept, ttl_s: float) -> None:
        """A refresh kept `where`'s entry: what it kept, for whichever replica the session's next request reaches
        (resent once Redis answers, as `release`'s touch is)."""
        await self._send(where, "kept", [json.dumps(kept.__dict__)], ttl_s * 2)

    async def _send(self, where: str, what: str, args: list, lasts_s: float, resent: bool = False) -> bool:
        """Send a release (its touch) or a kept entry, which lasts `lasts_s` in Redis; one it does not get is kept (a
        place's latest, until it would have expired) and resent."""
        px = max(1, int(lasts_s * 1000))
        if what == "release":
            call = lambda: self._release(keys=[LEASE + where, TOUCH + where], args=[*args[:2], px, args[2]])  # noqa: E731
        else:
            call = lambda: self._redis.set(KEPT + where, args[0], px=px)  # noqa: E731
        if await self.window.ask(call) is not None:
            return True
        missed = (args, time.monotonic() + lasts_s)
        if resent:
            self._missed.setdefault((where, what), missed)  # a later one kept while this was sent goes instead
        else:
            self._missed.pop((where, what), None)
            self._missed[where, what] = missed
        while len(self._missed) > MAX_MISSED:
            del self._missed[next(iter(self._missed))]
        self.window.retry(self._resend)
        return False

    async def _resend(self) -> bool:
        """Send what Redis missed, each place's latest, for what is left of its lifetime (one whose lifetime ended
        meanwhile is dropped: resent, it would show a place used, or an entry kept, long after the fact); true once
        nothing is left."""
        for (where, what), missed in list(self._missed.items()):
            if self._missed.get((where, what)) is not missed:
                continue    # a later one was kept meanwhile
            del self._missed[where, what]
            args, expires = missed
            left = expires - time.monotonic()
            if left > 0 and not await self._send(where, what, args, left, resent=True):
                return False
        return not self._missed

    async def elsewhere(self, places: list[str], static: str | None) -> Elsewhere:
        """What refreshes kept of the deepest of `places` (a request's prefix keys) that any replica kept, the latest
        use of the deepest that was a session's anchor (the session this request continues), and of `static` (the
        request's static prefix), in one read."""
        touches = [TOUCH + p for p in (*places, *([static] if static else []))]
        if self.window.resting():
            return Elsewhere()
        try:
            found = await self._redis.mget([*(KEPT + p for p in places), *touches]) if places else []
        except _ERRORS as e:
            self.window.failed(e)
            return Elsewhere()
        kept, touched = found[:len(places)], found[len(places):]
        deepest = next((v for v in reversed(kept) if v), None)
        return Elsewhere(Kept(**json.loads(deepest)) if deepest else None,
                         next((seen for v in reversed(touched[:len(places)]) if (seen := Seen.of(v)).anchor), Seen()),
                         Seen.of(touched[len(places)] if static else None))

    async def share_gaps(self, gaps: GapBook, now: float) -> None:
        """Add what `gaps`' models counted to every replica's counts and read the totals back (`now`: monotonic)."""
        known = [(GAPS + place(*key), model) for key, model in gaps.models() if model.unshared is not None]
        for key, model in known:
            if model.unshared:
                self._gaps.counted(key, model)
        batch = self._gaps.take(now, known)
        if batch:       # the models are the event loop's: only the round trip leaves it
            self._gaps.settle(batch, await asyncio.to_thread(self._gaps.send, batch))

    async def aclose(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await self.window.stop()
        await self._redis.aclose()
        self._counts_client.close()
