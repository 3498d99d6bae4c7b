"""The Gemini and Vertex explicit caches (`cachedContents`) this gateway created, kept over time.

A cache bills storage per token-hour for as long as it exists, whether or not a request reads it. The
gateway watches each one it created, by the idle gaps of the requests that use it (a `GapModel` per
route and model from `cache_planner.lifetime`, the same model keep-alive prices refreshes with):

- near its expiry, it extends the TTL (PATCH `ttl`, Google's update) when `lifetime.keepalive` says the
  expected saving of the next request's read over creating it again beats the extension's storage, and
  otherwise lets it expire;
- before that, it deletes a cache (DELETE) once the chance of a request coming back before the expiry is
  worth less than the storage left to pay.

Creating a cache bills its storage for the whole TTL asked for (on the creating request's record); an
extension bills the hours it adds, and a deletion credits the hours it did not use, each on a ledger record
of its own (`kind` `cache_extend`, `cache_delete`), priced per token-hour at the model's published storage
price (`providers.pricing`), and billed to the key that created the cache. Calls go to the upstream that
holds the cache with the credential that created it. Each replica looks after the caches it created; with
Redis, a use on any replica is seen by the creator (`prefixgate:explicit-used:`), and a deleted cache is
withdrawn from the planner's shared state so no replica sends a request against it.

A creation whose answer never came (timed out, or cut off) may have made the cache all the same, which Google
then bills unseen: each cache is created under a `displayName` of its own, and after such a failure the
upstream's caches are searched for it (a few times: Google may finish it after the gateway gave up); once found,
its writing and the storage it used are booked (`cache_create`) and it is deleted. A search reads at most
`find_pages` pages of the list in `find_s` seconds (Google lists a project's caches, per location on Vertex, in no
documented order and with no filter, so a project with thousands would make it long): past either, the cache is left
unresolved, on a `cache_create` record of no known cost whose note says so.

Meanwhile the creating key's budget holds what the cache may cost at worst (`Limits.hold`, room or not: the money may
be spent already): its tokens by the create body's size, written and stored for the whole TTL it asked for. Found, the
hold becomes what it cost; not there once the list was read to its end, it is released; unresolved, it is held until
the TTL is over, then booked at that worst case on a `cache_create` record of its own, as it is at once when the
gateway stops before (mid-search too: its holds go with it); found while its DELETE is out when the gateway stops, it
is booked as stored until it expires. Without the hold a budgeted key whose creations kept timing out bought storage
no budget saw.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from prefixgate.cache_planner.lifetime import GapBook, keepalive
from prefixgate.compact_json import compact_bytes
from prefixgate.cost import MTOK, Cost, ledger_fields, price_usage
from prefixgate.errors import RequestError
from prefixgate.gateway.cache_create_doubt import FIND_TRIES, Rivals
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.ledger import LedgerRecord
from prefixgate.policies.limits import Reservation
from prefixgate.providers.cached_contents import parse_rfc3339
from prefixgate.redis_outage import RetryWindow, outage_of
from prefixgate.usage import Usage, prompt_estimate

if TYPE_CHECKING:
    from prefixgate.cost import Price
    from prefixgate.dialects.wire import WireFormat
    from prefixgate.gateway.proxy import Call, Prepared, Proxy
    from prefixgate.policies.schema import CallerKey, Upstream

log = logging.getLogger("prefixgate.gateway")
USED = "prefixgate:explicit-used:"
TICK_S = 5.0
# Extend this long before the expiry: the planner stops sending requests against a cache with under a
# minute left, and the call itself takes time.
MARGIN_S = 120.0
# A cache idle for less than the implicit cache's lifetime is not "unused": its next request may come yet.
MIN_IDLE_S = 300.0
MAX_TRACKED = 10_000
DISPLAY_PREFIX = "prefixgate-"
PAGE_SIZE = 1000        # the most cachedContents.list gives a page (more is taken as 1000)
FIND_PAGES = 10         # one search reads at most this many pages...
FIND_S = 30.0           # ...for at most this long


@dataclass
class Entry:
    """One explicit cache the gateway created, and whose it is."""

    name: str
    upstream: Upstream
    wire: WireFormat
    model: str
    credential: str | None          # the key that created it, which the upstream knows it by
    caller: CallerKey | None
    route: str                      # the policy route, for the ledger
    planner_route: str              # the planner's route (its state holds the cache), and the gap model's
    prefix_hash: str
    tokens: int
    price: Price | None
    expires: float
    last_used: float


@dataclass
class Search:
    """One search of an upstream's caches: the ones wanted (the first alone, unless every one was asked for), or why
    part of the list went unread ("" once read to its end)."""

    found: list[dict] = field(default_factory=list)
    unread: str = ""
    capped: bool = False    # unread for the list's length (a later search would stop there too), not a failure


@dataclass(frozen=True)
class Doubt:
    """What a creation in doubt may cost at worst, and the budget hold that keeps it from the key's other spending."""

    usage: Usage
    cost: Cost | None
    ttl_s: float
    held: Reservation


class ExplicitCaches:
    def __init__(self, proxy: Proxy, clock: Callable[[], float] = time.time, tick_s: float = TICK_S) -> None:
        self.proxy = proxy
        self.clock = clock
        self.tick_s = tick_s
        self.page_size, self.find_pages, self.find_s = PAGE_SIZE, FIND_PAGES, FIND_S
        catalog = proxy.catalog
        self.ttl_s = catalog.gemini.default_explicit_ttl_s
        self.gaps = GapBook(prior_ttls=lambda _: (float(catalog.gemini.implicit_ttl_s), float(self.ttl_s)))
        self.entries: dict[str, Entry] = {}
        self._task: asyncio.Task | None = None
        self._finding: set[asyncio.Task] = set()
        self._redis = None
        if proxy.settings.redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(proxy.settings.redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            self._window = RetryWindow(log, "explicit caches: redis unreachable (%s); a use on another replica goes "
                                       "unseen until it answers", "explicit caches: redis answers again",
                                       outage=outage_of(proxy.settings.redis_url))
        # A caller's creates (cache_create_doubt), by what they asked, in flight and in doubt on every replica.
        self.rivals = Rivals(clock, self._redis, self._window if self._redis is not None else None)

    async def aclose(self) -> None:
        for task in [self._task, *self._finding]:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.rivals.aclose()
        if self._redis is not None:
            await self._redis.aclose()

    # ---- on the request path --------------------------------------------------------------------------

    async def left_behind(self, call: Call, prep: Prepared) -> None:
        """The cache created for `prep`, whose upstream then failed and another target answered: its writing and
        storage were billed all the same, on a record of their own (kind `cache_create`), since the request's
        record prices its answering target alone."""
        usage = prep.extra_usage or Usage()
        price = self.proxy.accounts.price(prep.price_rows, prep.upstream, prep.model, usage, call.route.price)
        cost = price_usage(usage, price, prep.storage_token_hours) if price is not None else None
        await self._book(call.caller.key, call.route.name, prep.upstream, prep.model, prep.wire, prep.plan.prefix_hash,
                         usage, cost, "cache_create", f"cache: created for request {call.id}, which "
                         f"{prep.upstream.name} then failed and another target answered")

    def created(self, call: Call, prep: Prepared, name: str, expires: float, tokens: int) -> None:
        """A cache the gateway just created for `prep`: watched from now on."""
        if len(self.entries) >= MAX_TRACKED:
            return      # past the bound a cache simply lives out its TTL, as it would without this module
        now = self.clock()
        price = self.proxy.accounts.price(prep.price_rows, prep.upstream, prep.model, Usage(cache_writes={"explicit": tokens}),
                                          call.route.price)
        self.entries[name] = Entry(name, prep.upstream, prep.wire, prep.model, prep.key, call.caller.key, call.route.name,
                                   prep.plan.state_route, prep.plan.prefix_hash, tokens, price, expires, now)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    @staticmethod
    def named(body: dict) -> tuple[dict, str]:
        """A `cachedContents.create` body under a displayName of its own (by which `in_doubt` finds the cache)."""
        tag = DISPLAY_PREFIX + uuid.uuid4().hex
        return {**body, "displayName": tag}, tag

    def in_doubt(self, call: Call, prep: Prepared, tag: str) -> None:
        """The creation of the cache named `tag` got no readable answer: it may exist (and bill) all the same.
        Searched for in the background; found, it is booked and deleted."""
        self.searching(self._find(call, prep, tag))

    def searching(self, search: Coroutine) -> None:
        """`search` (for a creation in doubt) run in the background, cancelled when the gateway stops."""
        task = asyncio.get_running_loop().create_task(search)
        self._finding.add(task)
        task.add_done_callback(self._finding.discard)

    async def _doubt(self, call: Call, prep: Prepared) -> Doubt:
        """What the cache `prep` asked for may cost at worst, held against the creating key's budget."""
        create = prep.plan.cache_create or {}
        try:
            ttl_s = float(str(create.get("ttl") or "").removesuffix("s"))
        except ValueError:
            ttl_s = float(self.ttl_s)
        usage = Usage(cache_writes={"explicit": prompt_estimate(compact_bytes(create)).uncached_input})
        tokens = usage.cache_writes["explicit"]
        price = self.proxy.accounts.price(prep.price_rows, prep.upstream, prep.model, usage, call.route.price)
        cost = price_usage(usage, price, tokens * Decimal(str(ttl_s)) / 3600) if price is not None else None
        key = call.caller.key
        held = await self.proxy.limits.hold(key, cost.total) if key is not None and cost is not None else Reservation()
        return Doubt(usage, cost, ttl_s, held)

    async def _find(self, call: Call, prep: Prepared, tag: str) -> None:
        doubt = await self._doubt(call, prep)
        try:
            for attempt in range(1, FIND_TRIES + 1):
                await asyncio.sleep(self.tick_s * attempt)
                search = await self.search(prep.upstream, prep.wire, prep.key, lambda c: c.get("displayName") == tag)
                if search.found or search.capped:
                    break
        except asyncio.CancelledError:      # the gateway stops mid-search: unresolved, and its hold goes with it
            await self._book_worst(call, prep, tag, "was still searched for when the gateway stopped", doubt)
            raise
        if not search.found:
            if search.unread:
                await self._unresolved(call, prep, tag, search.unread, doubt)
            else:
                self.proxy.limits.release(doubt.held)
                log.info("explicit caches: the creation of %s got no answer, and no such cache appeared", tag)
            return
        found = search.found[0]
        try:
            name, tokens = found["name"], int((found.get("usageMetadata") or {}).get("totalTokenCount") or 0)
            expires = parse_rfc3339(found["expireTime"], "expireTime")
            created = parse_rfc3339(found["createTime"], "createTime") if found.get("createTime") else self.clock()
        except (RequestError, KeyError, TypeError, ValueError):
            log.warning("explicit caches: %s found, but unreadable: %r", tag, found)
            await self._unresolved(call, prep, tag, "it was found, but its answer could not be read", doubt)
            return
        price = self.proxy.accounts.price(prep.price_rows, prep.upstream, prep.model,
                                          Usage(cache_writes={"explicit": tokens}), call.route.price)
        entry = Entry(name, prep.upstream, prep.wire, prep.model, prep.key, call.caller.key, call.route.name,
                      prep.plan.state_route, prep.plan.prefix_hash, tokens, price, expires, self.clock())
        try:
            deleted = await self._call(entry, "DELETE", None) is not None
        except asyncio.CancelledError:
            # The gateway stops while the DELETE is out: booked now, as if it lived out its TTL (it may have), or its
            # hold went with the replica and nothing booked the cache.
            await self._book_found(call, prep, tag, entry, created, None, doubt, "the gateway stopped during its deletion")
            raise
        await self._book_found(call, prep, tag, entry, created, self.clock() if deleted else None, doubt)

    async def _book_found(self, call: Call, prep: Prepared, tag: str, entry: Entry, created: float,
                          deleted: float | None, doubt: Doubt, kept: str = "its deletion failed") -> None:
        """A cache in doubt, found: its writing and its storage from `created` until it was `deleted` (None: not
        known to be, for the reason `kept`, so until it expires) booked on a `cache_create` record, and its hold
        settled."""
        usage = Usage(cache_writes={"explicit": entry.tokens})
        ended = entry.expires if deleted is None else min(deleted, entry.expires)
        hours = Decimal(str(max(0.0, ended - created))) / 3600
        cost = price_usage(usage, entry.price, entry.tokens * hours) if entry.price is not None else None
        await self._book(call.caller.key, call.route.name, prep.upstream, prep.model, prep.wire, prep.plan.prefix_hash,
                         usage, cost, "cache_create", f"cache: explicit cache {entry.name} created for request {call.id}, "
                         f"whose creation got no answer; found by its displayName {tag}, "
                         + ("deleted" if deleted is not None else f"left to expire ({kept})"), doubt.held)

    async def search(self, upstream: Upstream, wire: WireFormat, key: str | None, wanted: Callable[[dict], bool],
                     every: bool = False) -> Search:
        """The upstream's caches (`cachedContents.list`, page by page, within `find_pages` and `find_s`) searched for
        the `wanted` one (`every`: all of them, the list read to its end)."""
        token, pages, found = "", 0, []
        try:
            async with asyncio.timeout(self.find_s):
                while pages < self.find_pages:
                    query = urlencode({"pageSize": self.page_size, **({"pageToken": token} if token else {})})
                    resp = await self.proxy.upstream.forward(upstream, wire, "GET", wire.explicit_cache_path or "", query,
                                                             b"", key)
                    data, pages = json.loads(resp.body or b"{}"), pages + 1
                    found += [c for c in data.get("cachedContents") or [] if isinstance(c, dict) and wanted(c)]
                    if found and not every:
                        return Search(found=found[:1])
                    token = data.get("nextPageToken") or ""
                    if not token:
                        return Search(found=found)
        except TimeoutError:
            return Search(unread=f"the list was not read to its end in {self.find_s:g} s ({pages} pages)", capped=True)
        except (UpstreamFailure, ValueError, AttributeError) as e:
            why = getattr(e, "message", None) or f"unreadable answer ({type(e).__name__})"
            log.warning("explicit caches: listing %s's caches failed: %s", upstream.name, why)
            return Search(unread=f"the list could not be read: {why}")
        return Search(unread=f"the list goes on past {pages} pages of {self.page_size}", capped=True)

    async def _unresolved(self, call: Call, prep: Prepared, tag: str, why: str, doubt: Doubt) -> None:
        """A creation in doubt the search could not settle: on the ledger, of no known cost, for an operator; its
        worst case held against the key's budget until its TTL is over, then booked."""
        log.warning("explicit caches: the creation of %s for request %s is unresolved: %s", tag, call.id, why)
        worst = f"${doubt.cost.total:.6f}" if doubt.cost is not None else "an unknown cost (no price)"
        await self._book(call.caller.key, call.route.name, prep.upstream, prep.model, prep.wire, prep.plan.prefix_hash,
                         Usage(), None, "cache_create", f"cache: unresolved: the creation of an explicit cache "
                         f"for request {call.id} got no answer, and the search of {prep.upstream.name}'s caches for its "
                         f"displayName {tag} stopped ({why}); if Google made it, it bills its writing and its storage "
                         f"for its TTL ({doubt.ttl_s:g}s), at most {worst}: held against the key's budget until then, and "
                         "booked at that; not deleted")
        over, when = self.clock() + doubt.ttl_s, "has outlived its TTL"
        try:
            while self.clock() < over:
                await asyncio.sleep(self.tick_s)
        except asyncio.CancelledError:
            when = "was still in its TTL when the gateway stopped"
            raise
        finally:
            await self._book_worst(call, prep, tag, when, doubt)

    async def _book_worst(self, call: Call, prep: Prepared, tag: str, when: str, doubt: Doubt) -> None:
        """An unresolved cache booked at its worst case, and its hold settled: at its TTL's end, or when the gateway
        stops first (a rolling restart: the hold goes with the replica and nothing would book the cache later, so
        the key could spend that money again)."""
        await self._book(call.caller.key, call.route.name, prep.upstream, prep.model, prep.wire, prep.plan.prefix_hash,
                         doubt.usage, doubt.cost, "cache_create", f"cache: the explicit cache {tag} of request {call.id}, "
                         f"unresolved, {when}: booked at its worst case (its tokens by the create body's size, written "
                         "and stored for the whole TTL), since Google may have billed that", doubt.held)

    async def used(self, prep: Prepared) -> None:
        """A request to a format with explicit caches: a return of its static prefix (the gap model learns from
        every one, before any cache exists, as the planner's reuse statistics do), and a use of its cache."""
        if prep.wire.explicit_cache_path is None:
            return
        now = self.clock()
        self.gaps.observe(prep.plan.state_route, prep.model, prep.plan.prefix_hash, now)
        name = prep.plan.conversation.cache_params.get("cachedContent")
        if not isinstance(name, str):
            return
        entry = self.entries.get(name)
        if entry is not None:
            entry.last_used = now
        elif self._redis is not None:
            # Another replica created it: tell it (the creator decides).
            await self._window.ask(lambda: self._redis.set(USED + name, repr(now), px=int(self.ttl_s * 2000)))  # type: ignore[union-attr]

    # ---- over time --------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            try:
                await self.tick()
            except Exception:   # one bad answer must not end the watch over every other cache
                log.exception("explicit caches: tick failed")

    async def tick(self) -> None:
        """Extend, delete or let expire each watched cache, by the clock."""
        for entry in list(self.entries.values()):
            now = self.clock()
            if entry.expires <= now:
                del self.entries[entry.name]
                continue
            await self._seen_elsewhere(entry)
            if entry.price is None or entry.price.storage_per_hour <= 0:
                continue
            model = self.gaps.model(entry.planner_route, entry.model)
            idle, left = now - entry.last_used, entry.expires - now
            gain = entry.tokens * (entry.price.input - entry.price.cache_read) / MTOK
            storage_per_s = entry.tokens * entry.price.storage_per_hour / MTOK / 3600
            if left <= MARGIN_S:
                extend = self.ttl_s - left
                decision = keepalive(model, idle, left, self.ttl_s, float(entry.tokens * entry.price.input / MTOK),
                                     float(entry.tokens * entry.price.cache_read / MTOK),
                                     float(storage_per_s * Decimal(str(extend))), now=now, margin_s=MARGIN_S)
                if decision.refresh:
                    await self._extend(entry, now, decision.reason)
                else:
                    del self.entries[entry.name]     # it expires at its TTL: nothing more to pay or do
                continue
            if idle < MIN_IDLE_S:
                continue
            back = model.p_return(idle, idle + left, now)
            if Decimal(str(back)) * gain < storage_per_s * Decimal(str(left)):
                await self._delete(entry, now, f"P(a request within its last {left / 60:.0f} min | idle {idle / 60:.0f} min)"
                                               f"={back:.2f}: its storage costs more than the read would save")

    async def _seen_elsewhere(self, entry: Entry) -> None:
        if self._redis is None:
            return
        raw = await self._window.ask(lambda: self._redis.get(USED + entry.name))  # type: ignore[union-attr]
        if raw is not None and float(raw) > entry.last_used:
            entry.last_used = float(raw)
            self.gaps.observe(entry.planner_route, entry.model, entry.prefix_hash, entry.last_used)

    async def _extend(self, entry: Entry, now: float, reason: str) -> None:
        held = Reservation()
        if entry.caller is not None and entry.price is not None:
            estimate = entry.tokens * entry.price.storage_per_hour / MTOK * Decimal(str(self.ttl_s)) / 3600
            try:    # the key that created the cache pays its extension, within its budget; no request it sent, it
                # takes nothing of its rate limits (nor is refused by them: the cache its requests read would go)
                held = await self.proxy.limits.admit(replace(entry.caller, rate_limit=None), estimate)
            except RequestError as e:
                log.info("explicit caches: %s left to expire: %s", entry.name, e.message)
                del self.entries[entry.name]
                return
        data = await self._call(entry, "PATCH", {"ttl": f"{int(self.ttl_s)}s"})
        if data is None:
            self.proxy.limits.release(held)
            return
        try:
            expires = parse_rfc3339(data["expireTime"], "expireTime")
        except (RequestError, KeyError, TypeError):
            expires = now + self.ttl_s
        added = max(expires - entry.expires, 0.0)
        entry.expires = expires
        state = self.proxy.planner_state
        route = state.route(entry.planner_route)
        route.remember_explicit(entry.prefix_hash, entry.name, expires)
        state.share_explicit(entry.planner_route, entry.prefix_hash, entry.name, expires)
        await self._record(entry, "cache_extend", added,
                           f"cache: extended explicit cache {entry.name} by {added / 3600:.2f} h ({reason})", held)

    async def _delete(self, entry: Entry, now: float, reason: str) -> None:
        state = self.proxy.planner_state
        explicit = state.route(entry.planner_route).explicit
        # Withdrawn before the DELETE goes out, not after: a request planned while it is on its way would be sent
        # against the cache being deleted. From the other replicas too: published as expiring now (the planner
        # takes none under a minute).
        withdrawn = explicit.pop(entry.prefix_hash, None)
        state.share_explicit(entry.planner_route, entry.prefix_hash, entry.name, time.time() + 1)
        if await self._call(entry, "DELETE", None) is None:
            if withdrawn is not None and entry.prefix_hash not in explicit:    # given back, unless replaced meanwhile
                state.route(entry.planner_route).remember_explicit(entry.prefix_hash, *withdrawn)
                state.share_explicit(entry.planner_route, entry.prefix_hash, *withdrawn)
            return
        del self.entries[entry.name]
        await self._record(entry, "cache_delete", -(entry.expires - now),
                           f"cache: deleted unused explicit cache {entry.name}; {reason}")

    async def _call(self, entry: Entry, method: str, body: dict | None) -> dict | None:
        path = f"{entry.wire.explicit_cache_path}/{entry.name.rsplit('/', 1)[-1]}"
        try:
            resp = await self.proxy.upstream.forward(entry.upstream, entry.wire, method, path, "",
                                                     compact_bytes(body) if body is not None else b"", entry.credential)
            return json.loads(resp.body or b"{}")
        except (UpstreamFailure, ValueError) as e:
            if isinstance(e, UpstreamFailure) and e.status is None and not e.connect_failed:
                # No answer: Google may have made the call all the same (an extension it bills, a deletion that
                # ended the cache). What it holds now says which.
                held = await self._held(entry, path)
                if held is not None and method == "PATCH" and held:
                    return held     # its expiry: extended or not
                if held is not None and method == "DELETE" and not held:
                    return {}       # deleted
            # Gone already (expired, or deleted by its owner through the gateway): nothing left to look after.
            log.warning("explicit caches: %s %s failed: %s", method, entry.name, getattr(e, "message", type(e).__name__))
            self.entries.pop(entry.name, None)
            return None

    async def _held(self, entry: Entry, path: str) -> dict | None:
        """The cache as Google holds it now ({} once gone: Gemini's 403, Vertex's 404), or None if unknown."""
        try:
            resp = await self.proxy.upstream.forward(entry.upstream, entry.wire, "GET", path, "", b"", entry.credential)
            found = json.loads(resp.body or b"{}")
            return found if isinstance(found, dict) and found.get("expireTime") else None
        except UpstreamFailure as e:
            return {} if e.status in (403, 404) else None
        except ValueError:
            return None

    async def _record(self, entry: Entry, kind: str, seconds: float, note: str, held: Reservation = Reservation()) -> None:
        """A ledger record of the storage an extension adds (or a deletion gives back: negative)."""
        hours = Decimal(str(seconds)) / 3600
        cost = (None if entry.price is None else
                Cost(storage=entry.tokens * hours * entry.price.storage_per_hour / MTOK))
        await self._book(entry.caller, entry.route, entry.upstream, entry.model, entry.wire, entry.prefix_hash,
                         Usage(), cost, kind, note, held)

    async def _book(self, key: CallerKey | None, route: str, upstream: Upstream, model: str, wire: WireFormat,
                    prefix_hash: str, usage: Usage, cost: Cost | None, kind: str, note: str,
                    held: Reservation = Reservation()) -> None:
        """A cache's own ledger record (not a request's), counted, and its cost settled against the key's budget."""
        rec = LedgerRecord(
            id=uuid.uuid4().hex[:20], ts=time.time(), key=key.name if key else "", tenant=key.tenant if key else "",
            route=route, target=upstream.name, provider=upstream.provider or upstream.kind, model=model,
            dialect=wire.name, status=200, **ledger_fields(usage, cost), prefix_hash=prefix_hash,
            explanation=[note], kind=kind)
        self.proxy.ledger.append(rec)
        self.proxy.metrics.observe(rec)
        if key is not None and cost is not None and cost.total > 0:
            await self.proxy.limits.settle(key, held, sum(usage.cache_writes.values()), cost.total)
        else:
            self.proxy.limits.release(held)     # an extension that added no time: nothing billed, nothing held
