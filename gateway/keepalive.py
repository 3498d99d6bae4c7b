"""Keep-alive: refresh an idle session's prompt cache while it is likely to come back, when that pays.

A *session* is one conversation of one key on one route: its latest answered request, the prefix that request
left in the provider's cache (through its deepest checkpoint), and what it costs to refresh it. A later request
whose planned prefix contains that request's whole prompt (the prefix key of its last block, `anchor`)
continues the session. The route's static prefix (tools, system) is also kept as a session of its own
(`level` "static", one per tenant, route and credential): every request touches it, one that starts a
conversation is its return, and it is refreshed when the route goes quiet, as `plan --keepalive` does. While a
session is idle the
economics (`cache_planner.lifetime`: the route's gap model against the refresh's price) say when, if ever, a
refresh pays; this module does the rest:

- sends the refresh (`cache_planner.keepalive.refresh_body`: the cheapest request the provider accepts for the
  same prefix) through the same upstream with the same credential as the session's requests (the caller's own
  key on an open gateway, else the route's), never another's;
- holds it to the route's caps (`policies/keepalive.py`: per route and per key, USD per period, shared through
  the gateway's counter store) and to the key's own budget and rate limits (admission, as for any request);
- never sends one once the cache's TTL has run out (it would pay a full write) and stops a session whose refresh
  read fewer tokens than expected (the provider evicted early: refreshing it again buys nothing);
- writes each refresh as a ledger row of kind `keepalive` (billed to the session's key), and on the session's
  next request records what the refreshes saved (`keepalive_saved_usd`: the tokens read that the cache would
  have lost without them, at the write price less the read price);
- on a route that allows it (`upgrade`, the default) and a Claude (Anthropic Messages) upstream, keeps the
  answer's text (its wire format's `reply_collector`) so that, when the economics expect it to save more than
  re-reading, the refresh is instead an *upgrade* (`cache_planner.keepalive.upgrade_body`: the prefix, the
  answer marked with the longest TTL the model offers, a filler turn): a hit never lengthens an entry, but the
  answer is new to the cache, and the caller's next turn reads the prefix through it for an hour. A caller
  whose next turn does not read it (it sent the answer back otherwise) stops upgrades on its tenant's route.

Time is `clock` (the `clock_offset_file` setting moves it in tests): the worker wakes every `tick_s` of real
time and sends what is due by that clock, so a test advances the clock instead of waiting out a gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from prefixgate import tokens
from prefixgate.cache_planner.held import MAX_HELD
from prefixgate.cache_planner.keepalive import (
    FILLER_TOKENS,
    Refresh,
    refresh_body,
    refresh_cost,
    static_mark,
    through,
    upgrade_body,
    upgrade_cost,
)
from prefixgate.cache_planner.lifetime import GapBook, keepalive, turn_context
from prefixgate.cache_planner.lifetime import KeepAlive as KeepAliveDecision
from prefixgate.compact_json import compact_bytes
from prefixgate.cost import MTOK, Price, cost_note, ledger_fields, price_usage
from prefixgate.dialects import request_dialect
from prefixgate.dialects.wire import WireFormat
from prefixgate.errors import RequestError
from prefixgate.gateway.accounting import CLIENT_CLOSED
from prefixgate.gateway.auth import party_of
from prefixgate.gateway.keepalive_shared import RECENT, Elsewhere, Kept, Seen, SharedSessions, place
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.ir import Conversation
from prefixgate.ledger import LedgerRecord
from prefixgate.ledger_rollup import KEEPALIVE_PAIR, keepalive_pair
from prefixgate.policies.limits import nanodollars
from prefixgate.policies.periods import window
from prefixgate.policies.schema import CallerKey, Route, Upstream
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.usage import Usage

if TYPE_CHECKING:
    from prefixgate.gateway.proxy import Call, Prepared, Proxy

log = logging.getLogger("prefixgate.keepalive")

KIND = "keepalive"
# A static prefix's session stopped for this stays stopped (nothing a refresh could keep: planning it again on each
# request would only cost); after any other stop, the next request that touches the prefix starts it again.
FOR_GOOD = ("no refresh",)
# Sessions hold the body a refresh re-sends: past this many bytes of them, the least recently active go first.
MAX_BODY_BYTES = 64 << 20
MAX_SESSIONS = 20_000
# Tenant/routes whose learned state (gap model, what the route refused) is kept, least recently used forgotten: on
# an open gateway each caller key is a tenant, so this grows with callers.
MAX_ROUTES = 1024
TICK_S = 1.0
TIMEOUT_S = 60.0
_UNIT_S = {"s": 1, "m": 60, "h": 3600}


def ttl_seconds(ttl: str) -> float:
    """A checkpoint's lifetime as written ("5m", "1h", "30m", "12h", "300s") in seconds."""
    return float(ttl[:-1]) * _UNIT_S[ttl[-1]]


@dataclass
class Session:
    """One conversation kept warm: where its latest request went and what it left in the cache."""

    ident: str                      # stable across the conversation's requests (the gap model's session)
    group: tuple[str, str, str]     # (party, key name, route): sessions never cross these
    key: CallerKey | None
    route: Route
    dialect: str                    # the caller's format (its records name it)
    anchor: str                     # prefix key of the latest request's last block: a continuation contains it
    upstream: Upstream              # where the latest request went, with what and how
    wire: WireFormat
    planner: str                    # whose caching rules apply (which refresh the provider accepts)
    rows: str                       # whose price rows bill it
    model: str
    credential: str | None          # the key it went with (the caller's own on an open gateway, else the route's)
    headers: dict[str, str]         # the headers it went with (a same-provider caller's own, e.g. anthropic-beta)
    prefix_hash: str
    body: bytes                     # until planned: the latest request as sent; then: the refresh's body
    cached_tokens: int              # what the latest request left in the cache (read + written): a refresh reads it
    ttl: str                        # the lifetime in force for that prefix ("5m", "1h", ...)
    price: Price                    # the model's price at that request's size
    touched: float                  # when the cache was last touched (a request or a refresh), by the clock
    last_request: float             # when the session's latest request was answered, by the clock
    planned: bool = False           # its refresh is built (off the request path) and priced
    prewarm: bool = False           # that refresh is a pre-warm (no output: `max_tokens: 0`, `prewarm: true`)
    expected_usd: Decimal = Decimal(0)  # what one refresh should cost
    due: float | None = None        # when to send it, by the clock; None: let the cache expire
    reason: str = ""                # why (the economics' words)
    refreshes: int = 0              # refreshes since the latest request
    stopped: str = ""               # why keep-alive stopped for it (kept: a continuation is still the same session)
    written_ttl: str = ""           # the lifetime the latest request wrote (`ttl` once an upgrade lengthened it)
    reply: list | None = None       # the answer's text blocks, until the upgrade is built from them
    reply_tokens: int = 0           # the answer's output tokens: what an upgrade writes
    upgrade: bytes = b""            # once planned: the upgrade's body (empty: none possible, or sent)
    upgrade_ttl: str = ""           # the lifetime it writes
    upgrade_key: str = ""           # its last mark's prefix key: the entry the planner holds once it is written
    upgrade_usd: Decimal = Decimal(0)   # what it should cost, less the write the next request would pay anyway
    upgrade_bill: Decimal = Decimal(0)  # what it should be billed (caps and budgets hold it to this)
    upgrading: bool = False         # the refresh due is the upgrade
    upgraded: bool = False          # the cache holds the upgrade (the next request should read all of it)
    planner_route: str = ""         # the route's key in the planner's state (it holds the upgrade's entry: `held`)
    turns: int = 1                  # the session's requests so far: its gap model's context (`turn_context`)
    level: str = "conversation"     # or "static": the route's static prefix (tools, system) on its own
    mark: int = -1                  # a static session's: its checkpoint's block (its refresh stops there)
    static: tuple = ()              # where the static prefix's session is, in `KeepAlive.statics` (its own, on one)
    touched_since: bool = False     # a static session's: a request touched it since it was last scheduled

    @property
    def ttl_s(self) -> float:
        return ttl_seconds(self.ttl)

    @property
    def slot(self) -> tuple[str, str, str, str]:
        return (*self.group, self.ident)

    @property
    def gap_route(self) -> str:
        return f"{self.group[0]}/{self.route.name}"


def upgrades(route: Route, wire: WireFormat) -> bool:
    """Whether keep-alive may upgrade this route's sessions through their answers (see the module's docstring)."""
    return route.keepalive.on and route.keepalive.upgrade and wire.resends_replies


def collects_replies(route: Route, wire: WireFormat, keeps_body: bool) -> bool:
    """Whether a request's answer is collected (`call.reply`): for keep-alive's upgrade through it, or for the
    ledger with the request's body (`LedgerRecord.response`: an exported trace can then be planned with upgrades)."""
    return upgrades(route, wire) or (keeps_body and wire.resends_replies)


@dataclass(frozen=True)
class Cap:
    counter: str            # its counter in the gateway's counter store (shared through Redis)
    usd: float
    ttl: int
    what: str               # "route cap" or "key cap": the stop's reason
    route: str
    key: str | None         # None: every key's refreshes on the route
    since: int              # the window's start, unix seconds
    until: float            # its end (inf: the window of period "total")


class KeepAlive:
    def __init__(self, proxy: Proxy, clock: Callable[[], float] = time.time, tick_s: float = TICK_S) -> None:
        self.proxy = proxy
        self.clock = clock
        self.tick_s = tick_s
        # Every session seen, least recently active first; stopped ones stay (with no body) so a continuation keeps
        # its identity in the gap model; `anchors` finds one by (group, anchor).
        self.sessions: OrderedDict[tuple[str, str, str, str], Session] = OrderedDict()
        self.anchors: dict[tuple[tuple[str, str, str], str], Session] = {}
        # The static prefixes on their own, one per (party, route, credential, prefix key): the provider keeps one
        # entry per credential, so the route's keys that share one share its keep-alive (billed to the key whose
        # request planned it).
        self.statics: dict[tuple[str, str, str, str], Session] = {}
        self.body_bytes = 0
        self._restored: dict[str, float] = {}   # cap counters started from the ledger (without Redis): window end
        # Replicas sharing Redis share each session's latest use and take turns refreshing it (`keepalive_shared`).
        redis_url = proxy.settings.redis_url
        self.shared = SharedSessions(redis_url, TIMEOUT_S + 5) if redis_url else None
        # Per tenant and route: the idle gaps its sessions showed (tenants never share learned state; replicas
        # sharing Redis add theirs up).
        self.gaps = GapBook(2 * MAX_ROUTES, shared=self.shared is not None)   # conversations and the static prefix
        self.no_upgrade = RouteFlags(MAX_ROUTES)    # tenant/route where an upgrade was not read or was refused
        self.no_prewarm = RouteFlags(MAX_ROUTES)    # tenant/route whose upstream refused a pre-warm
        self._task: asyncio.Task | None = None
        r = proxy.metrics.registry
        self.m_refreshes = Counter("prefixgate_keepalive_refreshes", "Keep-alive refreshes sent", ("route",), registry=r)
        self.m_bought = Counter("prefixgate_keepalive_bought_usd", "What keep-alive refreshes cost", ("route",), registry=r)
        self.m_saved = Counter("prefixgate_keepalive_saved_usd", "What reads only refreshes kept alive saved",
                               ("route",), registry=r)
        self.m_stops = Counter("prefixgate_keepalive_stops", "Sessions keep-alive stopped refreshing, by reason",
                               ("route", "reason"), registry=r)
        r.register(_Gauges(self))

    # ---- the request path: sessions begin, continue and are credited here ---------------------------

    def observe(self, call: Call, rec: LedgerRecord) -> None:
        """A caller's request has its record (before the ledger has it): continue or open its session, and
        credit the refreshes that kept what it read alive. Cheap, synchronous, never fails the caller."""
        prep = call.prepared
        if not call.route.keepalive.on or prep is None or rec.status != 200 or rec.kind:
            return
        try:
            self._observe(call, prep, rec)
        except Exception:   # keep-alive is an optimisation: the caller's answer never fails for it
            log.exception("keep-alive could not track request %s", call.id)

    def looking(self, call: Call, prep: Prepared) -> None:
        """A request is going upstream: with replicas sharing Redis, ask (while it is out) what other replicas'
        refreshes kept of the session it continues, so its record can be credited when it is answered, and when
        that session and its static prefix were last used anywhere (the gaps its gap models learn)."""
        if self.shared is None or not call.route.keepalive.on:
            return
        conv = prep.plan.conversation
        keys, mark = conv.prefix_keys(), static_mark(conv)
        static = place(*static_where(self._group(call, prep)[0], call.route.name, prep.key, keys[mark[0]])) \
            if mark is not None else None
        call.kept_elsewhere = asyncio.get_running_loop().create_task(
            self.shared.elsewhere(self._places(call, prep, keys), static))

    def _places(self, call: Call, prep: Prepared, keys: list[str]) -> list[str]:
        """The places in Redis of the request's latest prefix keys: asked while it is out, touched when it is
        answered, hashed once (again only for another group: a failover to another upstream's party)."""
        group = self._group(call, prep)
        if call.places is None or call.places[0] != group:
            call.places = group, [place(*group, k) for k in keys[-RECENT:]]
        return call.places[1]

    def _group(self, call: Call, prep: Prepared) -> tuple[str, str, str]:
        party = party_of(call.caller, prep.upstream, call.dialect)    # open gateway: per caller credential
        return party, call.caller.key.name if call.caller.key else "", call.route.name

    def _observe(self, call: Call, prep: Prepared, rec: LedgerRecord) -> None:
        now = self.clock()
        keys = prep.plan.conversation.prefix_keys()
        if not keys:
            return
        group = self._group(call, prep)
        party = group[0]
        gap_route = f"{party}/{call.route.name}"
        earlier = self._continued(group, keys)
        usage = rec.usage
        if earlier is not None:
            self._drop(earlier)
            if earlier.refreshes and now - earlier.last_request > ttl_seconds(earlier.written_ttl) and usage.cache_read:
                self._credit(earlier, rec, min(usage.cache_read, earlier.cached_tokens), now)
            if earlier.upgraded and now < earlier.touched + earlier.ttl_s and usage.cache_read < earlier.cached_tokens:
                # The caller sent the answer back otherwise than it came (edited, re-rendered): what the upgrade
                # wrote is never read on this route, so it sends no more upgrades.
                self.no_upgrade.add(gap_route, call.route.name)
                self.m_stops.labels(call.route.name, "upgrade unread").inc()
                log.info("keep-alive stops upgrading on route %s: a caller's next turn did not read its answer",
                         call.route.name)
        asked = call.kept_elsewhere
        found = _answer(asked) if asked is not None and asked.done() else Elsewhere()
        elsewhere = found.kept      # not answered yet: no credit (as without Redis)
        if elsewhere is not None and (earlier is None or earlier.last_request < elsewhere.last_request) \
                and now - elsewhere.last_request > elsewhere.written_ttl_s and usage.cache_read:
            # Another replica answered the session's latest turn and kept it: its saving is credited here.
            self._credited(rec, min(usage.cache_read, elsewhere.tokens), Decimal(elsewhere.margin),
                           elsewhere.refreshes, now - elsewhere.last_request, call.route.name)
        ident = earlier.ident if earlier is not None else uuid.uuid4().hex[:16]
        turns = earlier.turns + 1 if earlier is not None else 1
        marks = prep.plan.conversation.checkpoints()
        cached, ttl = usage.cache_read + usage.cache_write, ttl_in_force(prep.plan.conversation, marks)
        price = self.proxy.accounts.price(prep.price_rows, prep.upstream, prep.model, usage, call.route.price)
        session = Session(ident, group, call.caller.key, call.route, call.dialect, keys[-1], prep.upstream, prep.wire,
                          prep.planner, prep.price_rows, prep.model, prep.key, self.proxy._headers(call, prep), prep.plan.prefix_hash, prep.body,
                          cached, ttl or "5m", price or Price(Decimal(0), Decimal(0), Decimal(0)), now, now,
                          written_ttl=ttl or "5m",
                          reply=call.reply if upgrades(call.route, prep.wire) and gap_route not in self.no_upgrade else None,
                          reply_tokens=usage.output, planner_route=prep.plan.state_route, turns=turns)
        if earlier is not None and earlier.stopped == "early eviction":
            session.stopped = earlier.stopped      # the provider does not keep this session's prefix: stay stopped
        elif not cached or ttl is None or price is None:
            session.stopped = "nothing cached" if not cached or ttl is None else "unpriced"
        if price is not None:
            self._observe_static(session, prep, keys, marks, earlier is not None, rec)
        static = self.statics.get(session.static)
        places = (self._places(call, prep, keys) + ([place(*session.static)] if session.static else [])
                  if self.shared is not None else [])
        learn = partial(self._learn, session, earlier, static.anchor if static is not None else None, places,
                        max(session.ttl_s, static.ttl_s if static is not None else 0.0))
        if asked is None or asked.done():
            learn(found)
        else:   # the gaps it ended are learnt once Redis has said when its session was last used elsewhere
            asked.add_done_callback(lambda task: learn(_answer(task)))
        self._keep(session)
        self._start()

    def _learn(self, session: Session, earlier: Session | None, static_key: str | None, places: list[str],
               longest_s: float, found: Elsewhere) -> None:
        """The idle times a request ended, into its route's gap models: from its session's (and static prefix's)
        latest request on any replica (`found`), else on this one; then, with replicas, the request's own use."""
        now, since = session.last_request, None
        latest = found.session
        if (earlier.last_request if earlier is not None else 0.0) < latest.request < now:
            # Another replica answered the session's latest turn: the gap runs from it, in its context.
            session.turns = max(latest.turns, session.turns - 1) + 1
            since = latest.request, turn_context(session.turns - 1)
        self.gaps.observe(session.gap_route, "", session.ident, now, context=turn_context(session.turns), since=since)
        if static_key is not None:
            # A request that starts a session is the static prefix's return; one that continues a session ends its
            # idle time censored.
            other = found.static.request
            self.gaps.observe(session.gap_route, "static", static_key, now,
                              returned=earlier is None and since is None, since=(other, "") if 0 < other < now else None)
        if self.shared is not None and places:
            self.shared.touch(places, place(*session.group, session.anchor), now, longest_s, session.turns)

    def _observe_static(self, session: Session, prep: Prepared, keys: list[str], marks: list, continued: bool,
                        rec: LedgerRecord) -> None:
        """The static prefix's entry on its own (as in trace mode): every request of the route touches it, and it
        serves the sessions that start (the gaps it shows are learnt in `_learn`). While the route is quiet, its own
        refreshes keep it."""
        conv = prep.plan.conversation
        deepest = static_mark(conv)
        if deepest is None:
            return
        index, mark = deepest
        key, now = keys[index], session.last_request
        if marks[-1][2] is mark:
            # Nothing of the conversation is marked (the deepest mark is the static prefix's): its entry is the
            # static prefix's, kept below, not twice.
            session.stopped = session.stopped or "static prefix only"
        where = static_where(session.group[0], session.route.name, session.credential, key)
        credential = where[2]
        session.static = where
        found = self.statics.get(where)
        if found is not None and not continued and found.refreshes and rec.usage.cache_read \
                and now - found.last_request > ttl_seconds(found.written_ttl):
            self._credit(found, rec, min(rec.usage.cache_read, found.cached_tokens), now)
        ttl = mark.ttl or "5m"
        if found is not None and self.sessions.get(found.slot) is found and found.stopped in FOR_GOOD:
            return
        if found is not None and self.sessions.get(found.slot) is found and not found.stopped and found.ttl == ttl:
            # The same entry: this request read it (or wrote it again, with the same TTL), and restarted its TTL.
            found.touched = found.last_request = now
            found.refreshes, found.due, found.touched_since = 0, None, True
            self.sessions.move_to_end(found.slot)
            return
        if found is not None:
            self._drop(found)
        static = Session(f"static-{credential[:8]}-{key[:16]}", session.group, session.key, session.route, session.dialect, key,
                         session.upstream, session.wire, session.planner, session.rows, session.model,
                         session.credential, session.headers, session.prefix_hash, prep.body, 0, ttl, session.price,
                         now, now, written_ttl=ttl, level="static", mark=index, static=where)
        self.statics[where] = static
        self._keep(static)

    def _continued(self, group: tuple[str, str, str], keys: list[str]) -> Session | None:
        """The session of `group` whose latest prefix this request's prefix contains (the deepest such)."""
        return next((found for k in reversed(keys) if (found := self.anchors.get((group, k))) is not None), None)

    def _keep(self, session: Session) -> None:
        if session.stopped:
            session.body = b""
        self.sessions[session.slot] = session
        if session.level != "static":      # a request continues a conversation, never the static prefix
            self.anchors[(session.group, session.anchor)] = session
        self.body_bytes += len(session.body)
        while self.body_bytes > MAX_BODY_BYTES or len(self.sessions) > MAX_SESSIONS:
            self._drop(next(iter(self.sessions.values())))

    def _drop(self, session: Session) -> None:
        if self.statics.get(session.static) is session:
            del self.statics[session.static]
        if self.sessions.get(session.slot) is session:     # never another session that took its slot
            del self.sessions[session.slot]
            self.body_bytes -= len(session.body) + len(session.upgrade)
            if self.anchors.get((session.group, session.anchor)) is session:
                del self.anchors[(session.group, session.anchor)]

    def _credit(self, session: Session, rec: LedgerRecord, kept: int, now: float) -> None:
        """`kept` tokens read that the cache would have lost without the session's refreshes: what reading them
        saved over writing them again, on the request's record."""
        p = session.price
        self._credited(rec, kept, p.write_price(session.written_ttl) - p.cache_read, session.refreshes,
                       now - session.last_request, session.route.name)

    def _credited(self, rec: LedgerRecord, kept: int, margin: Decimal, refreshes: int, gap_s: float, route: str) -> None:
        saved = kept * margin / MTOK
        if saved <= 0:
            return
        rec.keepalive_saved_usd = str(saved)
        rec.explanation = [*rec.explanation, f"keepalive: read {kept} tokens that {refreshes} refresh(es) kept "
                                              f"alive over a {gap_s:.0f} s gap; saved ${saved}"]
        self.m_saved.labels(route).inc(float(saved))

    # ---- the worker ------------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="prefixgate-keepalive")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            try:
                await self.tick()
            except Exception:
                log.exception("keep-alive tick failed; retried at the next")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.shared is not None:
            await self.shared.aclose()

    async def tick(self) -> int:
        """Plan new sessions' refreshes, then send every refresh due by the clock, one at a time (so each sees
        the caps the one before spent). Returns how many were sent."""
        if self.shared is not None:
            await self.shared.share_gaps(self.gaps, time.monotonic())     # before deciding on what they say
        for session in [s for s in self.sessions.values() if not s.planned and not s.stopped]:
            await self._plan(session)
        for session in [s for s in self.sessions.values() if s.touched_since and s.planned and not s.stopped]:
            session.touched_since = False
            self._schedule(session, self.clock())     # a request restarted its TTL: when is it due now?
        now = self.clock()
        due = sorted((s for s in self.sessions.values() if s.due is not None and s.due <= now and not s.stopped),
                     key=lambda s: s.due or 0)
        sent = 0
        for session in due:
            if self.sessions.get(session.slot) is session:     # a request may have continued it meanwhile
                sent += await self._refresh(session)
        return sent

    async def _plan(self, session: Session) -> None:
        """Build the session's refresh (and upgrade) from its latest request (off the event loop: the body may be
        large)."""
        sent = await asyncio.to_thread(json.loads, session.body)
        if session.level == "static":
            sent = await asyncio.to_thread(through, session.planner, sent, session.mark, session.model)
            session.cached_tokens = await asyncio.to_thread(_tokens_through, session, sent)
        refresh = await asyncio.to_thread(refresh_body, session.planner, sent, session.model, session.ttl_s,
                                          self.proxy.catalog, session.gap_route not in self.no_prewarm)
        reply, session.reply = session.reply, None
        longest = self._longest_ttl(session) if reply is not None else None
        upgrade = await asyncio.to_thread(upgrade_body, session.planner, sent, reply, longest) if longest else None
        upgrade_bytes = await asyncio.to_thread(compact_bytes, upgrade.body) if upgrade is not None else b""
        upgrade_key = await asyncio.to_thread(self._held_key, session, upgrade.body) if upgrade is not None else ""
        if self.sessions.get(session.slot) is not session:
            return
        if refresh is None or refresh.kind != "generate":
            # Nothing cached a request could keep (a Gemini explicit cache's TTL is extended elsewhere, not here).
            self._stop(session, "no refresh", count=False)
            return
        if not await self._use(session, refresh):
            return
        session.planned = True
        if upgrade is not None and longest is not None:
            session.upgrade, session.upgrade_ttl, session.upgrade_key = upgrade_bytes, longest, upgrade_key
            self.body_bytes += len(session.upgrade)
            session.upgrade_bill, session.upgrade_usd = upgrade_cost(upgrade, session.price, session.cached_tokens,
                                                                     session.reply_tokens, session.ttl, longest)
        self._schedule(session, self.clock())

    def _longest_ttl(self, session: Session) -> str | None:
        """The longest lifetime the model's marks may ask for, when longer than the one in force."""
        try:
            ttls = resolve_model(session.planner, session.model, self.proxy.catalog).breakpoint_ttls
        except UnknownModel:
            return None
        longest = max(ttls, key=ttl_seconds, default=None)
        return longest if longest is not None and ttl_seconds(longest) > session.ttl_s else None

    def _schedule(self, session: Session, now: float) -> None:
        """When to refresh `session` next, if ever (`due` None: let its cache expire)."""
        p, tokens = session.price, session.cached_tokens

        def decide(ttl_s: float, cost: Decimal) -> KeepAliveDecision:
            """Refreshing at `cost` each, every `ttl_s`, against letting the entry expire."""
            # Whether a session comes back after a break depends on how long it has gone on (as in trace mode).
            model = (self.gaps.model(session.gap_route, "static") if session.level == "static" else
                     self.gaps.model(session.gap_route, "").given(turn_context(session.turns), now=now))
            return keepalive(model, now - session.last_request,
                             session.touched + session.ttl_s - now, ttl_s,
                             float(tokens * p.write_price(session.ttl) / MTOK), float(tokens * p.cache_read / MTOK),
                             float(cost), now=now)

        decision = decide(session.ttl_s, session.expected_usd)
        session.upgrading = False
        if session.upgrade:
            upgrade = decide(ttl_seconds(session.upgrade_ttl), session.upgrade_usd)
            if upgrade.refresh and upgrade.at is not None and upgrade.expected_saving > decision.expected_saving:
                decision, session.upgrading = upgrade, True
        session.reason = decision.reason
        if decision.refresh and decision.at is not None:
            session.due = session.last_request + decision.at
        elif session.level == "static":
            session.due = None      # kept, planned, until a request touches it and asks again (`touched_since`)
        else:
            # Until its next request (which asks again): a refresh does not pay, or nothing on the route repeats.
            self._stop(session, decision.reason, count=False)

    def _stop(self, session: Session, reason: str, *, count: bool = True) -> int:
        """Keep-alive stops for `session` until its next request (for good after an early eviction): its cache is
        left to expire. `count`: a stop /metrics counts (not a decision that a refresh does not pay)."""
        if self.sessions.get(session.slot) is session:     # else a request continued it meanwhile: already gone
            self.body_bytes -= len(session.body) + len(session.upgrade)
        session.body, session.upgrade, session.due, session.stopped = b"", b"", None, reason
        session.reply = None
        if count:
            self.m_stops.labels(session.route.name, reason).inc()
            log.info("keep-alive stopped for a session of route %s: %s", session.route.name, reason)
        return 0

    async def _refresh(self, session: Session) -> int:
        if self.shared is None:
            return await self._send(session)
        where = place(*session.static) if session.level == "static" else place(*session.group, session.anchor)
        claim = await self.shared.claim(where)
        if claim is None:
            return 0    # another replica is refreshing it: what that leaves in Redis decides here at a later tick
        token, seen = claim
        before = session.touched
        try:
            if self.sessions.get(session.slot) is not session:
                return 0    # a request continued it while the lease was taken
            if seen.request > session.last_request and session.level != "static":
                # The replica that answered it keeps it now, and counts its return: here it is no longer away.
                self.gaps.model(session.gap_route, "").close(session.ident, self.clock(), counted=False)
                return self._stop(session, "continued elsewhere")
            if seen.touched > session.touched:
                # Used elsewhere since this replica last looked (a request, or a refresh of the same entry): the
                # entry lives from then; when to refresh it is asked again.
                session.touched, session.last_request = seen.touched, max(session.last_request, seen.request)
                self._schedule(session, self.clock())
                return 0
            return await self._send(session)
        finally:
            read = Seen(session.touched, session.last_request, session.turns, session.level != "static") \
                if session.touched > before else None
            await self.shared.release(where, token, read, session.ttl_s)
            if read is not None and session.level != "static":
                p = session.price
                kept = Kept(session.last_request, ttl_seconds(session.written_ttl), session.refreshes,
                            session.cached_tokens, str(p.write_price(session.written_ttl) - p.cache_read))
                await self.shared.keeping(where, kept, session.ttl_s)

    async def _send(self, session: Session) -> int:
        now = self.clock()
        if now >= session.touched + session.ttl_s:
            return self._stop(session, "expired")      # too late: it would pay a full write
        expected = session.upgrade_bill if session.upgrading else session.expected_usd
        caps = self._caps(session)   # the windows of now: the reservation is settled in the same ones
        capped = await self._reserve(caps, expected)
        if capped:
            return self._stop(session, capped)
        key, held, cost = session.key, None, Decimal(0)
        started = time.perf_counter()
        usage, status, error = None, 200, ""
        unanswered: Usage | None = None     # what a refresh that may have run without answering is billed
        body = session.upgrade if session.upgrading else session.body
        try:
            # Whatever happens from here (an answer, a failure, an unexpected error, the worker cancelled at
            # shutdown), `finally` settles what was reserved: a cap or a budget never keeps a hold on money that
            # was not spent.
            try:
                held = await self.proxy.limits.admit(key, expected) if key is not None else None
            except RequestError as e:
                return self._stop(session, _refused_by(e))
            try:
                resp = await self.proxy.upstream.send(session.upstream, session.wire, session.model, body, False,
                                                      session.headers, session.credential, TIMEOUT_S)
                conv = await asyncio.to_thread(session.wire.parse_request, body, model=session.model)
                read = session.wire.usage_of(json.loads(resp.body or b"{}"), conv)
                if read.unreadable:     # impossible usage (usage.impossible_usage): recorded as unreadable
                    raise ValueError(read.unreadable)
                usage = read
            except UpstreamFailure as f:
                status, error = f.status or 502, f.message
                if f.timed_out:     # sent whole: the provider may have run it, billing what it was sent to do
                    status, unanswered = 504, _sent_for(session)
            except (ValueError, RequestError) as e:
                status, error = 502, f"refresh answer unreadable ({type(e).__name__})"
            except asyncio.CancelledError:
                # The gateway stops while the refresh is out: sent, it may be run and billed all the same, as a
                # caller's request it hung up on is (recorded at its estimate, 499); settled at that in `finally`.
                unanswered = _sent_for(session)
                cost = self._book(self._entry(session, unanswered, CLIENT_CLOSED, "the gateway stopped first",
                                              time.perf_counter() - started, "the gateway stopped while it was out"))
                raise
            rec = self._entry(session, usage or unanswered, status, error, time.perf_counter() - started,
                              estimated="no answer within the timeout" if unanswered is not None else "")
            # No await from the answer to its record: whoever reads the record (an operator, a test) may send the
            # session's next turn at once, and that turn must find the session as the refresh left it (the upgrade's
            # entry held, its tokens to credit).
            outcome = self._answered(session, usage, now) if usage is not None else ""
            cost = self._book(rec)
        finally:
            billed = usage or unanswered
            if key is not None and held is not None:
                await self.proxy.limits.settle(key, held, billed.input_total + billed.output if billed else 0, cost)
            await self._settle(caps, expected, cost)
        if usage is None:
            if session.upgrading and 400 <= status < 500:
                # The provider refuses the upgrade's shape (a model that takes no pre-warm here, or no filler
                # turn): the route's sessions are kept by re-reading instead, this one from now.
                self.no_upgrade.add(session.gap_route, session.route.name)
                self.m_stops.labels(session.route.name, "upgrade refused").inc()
                log.info("keep-alive stops upgrading on route %s: the provider refused one (%s)", session.route.name, error)
                if self.sessions.get(session.slot) is session:   # else a request continued it: its bytes went back
                    self.body_bytes -= len(session.upgrade)
                    session.upgrade, session.upgrading = b"", False
                    self._schedule(session, now)
                return 1
            if 400 <= status < 500 and session.prewarm:
                return await self._without_prewarm(session, error, now)
            return self._stop(session, "failed")
        self.m_refreshes.labels(session.route.name).inc()
        self.m_bought.labels(session.route.name).inc(float(cost))
        if outcome == "kept" or outcome == "upgraded" and await self._after_upgrade(session, body):
            self._schedule(session, now)
        return 1

    def _answered(self, session: Session, usage: Usage, now: float) -> str:
        """Take in the answer of `session`'s refresh, sent at `now`, without yielding to the event loop: `kept` (or
        `upgraded`) when the session goes on from it, `stopped` when it was evicted early, `continued` when a request
        continued the session while the refresh was out (that request rules now)."""
        session.refreshes += 1
        if session.upgrading and session.upgrade_key:
            # Whether or not a request continued the session: the entry is in the cache either way.
            self._hold(session, now)
        if self.sessions.get(session.slot) is not session:
            return "continued"
        # A static prefix's size is our estimate until a refresh reads it: there, writing anything is the sign.
        evicted = usage.cache_write > 0 if session.level == "static" else usage.cache_read < session.cached_tokens
        if evicted:
            # The provider dropped the prefix before its TTL (its cache is best effort): this refresh wrote it
            # again, and refreshing on would buy nothing the session can count on.
            self._stop(session, "early eviction")
            return "stopped"
        session.touched = now
        if session.level == "static":
            session.cached_tokens = usage.cache_read
        elif not session.upgrading:
            # A refresh of the conversation reads its static prefix's mark too (an upgrade takes that off).
            static = self.statics.get(session.static)
            if static is not None and self.sessions.get(static.slot) is static and not static.stopped:
                static.touched, static.touched_since = now, True
        if not session.upgrading:
            return "kept"
        # The session's cache is now its prefix through the answer, living the upgrade's TTL; later refreshes
        # re-read that (the caller's next request still contains the session's anchor).
        self.body_bytes -= len(session.upgrade)
        session.upgrade, session.upgrading, session.upgraded = b"", False, True
        session.ttl, session.cached_tokens = session.upgrade_ttl, usage.cache_read + usage.cache_write
        return "upgraded"

    async def _without_prewarm(self, session: Session, error: str, now: float) -> int:
        """The upstream refused the pre-warm (a provider or platform that takes no `max_tokens: 0`, or an API
        version without `prewarm`): the route's refreshes ask for the least output instead, this one from now
        (its cache has not expired: the retry goes out at the next tick)."""
        self.no_prewarm.add(session.gap_route, session.route.name)
        self.m_stops.labels(session.route.name, "pre-warm refused").inc()
        log.info("keep-alive stops pre-warming on route %s: the provider refused one (%s)", session.route.name, error)
        # The refused body is itself a refresh of the same prefix: its refresh without a pre-warm is the one to send.
        sent = await asyncio.to_thread(json.loads, session.body)
        refresh = await asyncio.to_thread(refresh_body, session.planner, sent, session.model, session.ttl_s,
                                          self.proxy.catalog, False)
        if refresh is None:
            return self._stop(session, "failed")
        if await self._use(session, refresh):
            self._schedule(session, now)
        return 1

    async def _use(self, session: Session, refresh: Refresh) -> bool:
        """`refresh` is what `session` sends from now: its body (held, and counted against the bound) and price.
        False, and nothing changed, when a request continued the session meanwhile (it is no longer held: the
        bytes it holds were given back when it was dropped)."""
        body = await asyncio.to_thread(compact_bytes, refresh.body)
        if self.sessions.get(session.slot) is not session:
            return False
        self.body_bytes += len(body) - len(session.body)
        session.body, session.prewarm = body, refresh.prewarm
        session.expected_usd = refresh_cost(refresh, session.price, session.cached_tokens)
        return True

    async def _after_upgrade(self, session: Session, upgrade: bytes) -> bool:
        """The session's refreshes from now re-read what `upgrade` wrote, built as any refresh: without a pre-warm
        where the route's upstream refused one. False when there is none, or a request continued the session."""
        sent = await asyncio.to_thread(json.loads, upgrade)
        refresh = await asyncio.to_thread(refresh_body, session.planner, sent, session.model, session.ttl_s,
                                          self.proxy.catalog, session.gap_route not in self.no_prewarm)
        if refresh is None:
            self._stop(session, "no refresh", count=False)
            return False
        return await self._use(session, refresh)

    @staticmethod
    def _held_key(session: Session, upgrade: dict) -> str:
        """The prefix key of `upgrade`'s last mark: the entry it writes (empty where the planner cannot read it)."""
        try:
            conv = request_dialect(session.planner, upgrade).parse_request(upgrade, model=session.model)
        except RequestError:
            return ""
        marked = [i for i, block in enumerate(conv.blocks()) if block.checkpoint is not None]
        return conv.prefix_keys()[marked[-1]] if marked else ""

    def _hold(self, session: Session, sent_at: float) -> None:
        """Tell the planner of the entry the upgrade sent at `sent_at` wrote (the prefix through the answer, living
        the upgrade's TTL): the session's later requests mark it again, so it outlives the turns after it
        (`cache_planner.held`)."""
        if session.planner_route:
            state = self.proxy.planner_state
            route = state.route(session.planner_route)
            route.held.note(session.upgrade_key, session.upgrade_ttl, sent_at + ttl_seconds(session.upgrade_ttl))
            state.commit(session.planner_route, route)

    # ---- caps and records ------------------------------------------------------------------------------

    def _caps(self, session: Session) -> list[Cap]:
        """The route's and the key's keep-alive caps, in the windows of now (wall time, as budgets and the ledger)."""
        policy = session.route.keepalive
        current = window(policy.period, time.time(), policy.timezone)
        route, key, since = session.route.name, session.group[1], int(current.start)
        return [Cap(f"keepalive:{route}:{current.id}", policy.route_usd, current.ttl, "route cap", route, None, since, current.end),
                Cap(f"keepalive:{route}:{key}:{current.id}", policy.key_usd, current.ttl, "key cap", route, key, since, current.end)]

    async def _reserve(self, caps: list[Cap], expected: Decimal) -> str:
        """Add the refresh's expected cost to each cap's counter before sending it, and name the first cap that
        takes it past its limit (what was added is given back). The add is one atomic step on Redis, so gateways
        sharing it never both pass a cap with room for one refresh (a check, then a spend, would let both)."""
        amount, added = nanodollars(expected), []

        async def give_back() -> None:
            for done in added:
                await self.proxy.counters.add(done.counter, -amount, done.ttl)

        try:
            for cap in caps:
                await self._restore(cap)
                total = await self.proxy.counters.add(cap.counter, amount, cap.ttl)
                added.append(cap)
                if total > nanodollars(cap.usd):
                    await give_back()
                    return cap.what
        except BaseException:
            # Cancelled mid-way (a shutdown, during a round trip to Redis): what was added goes back, else the shared
            # cap would stay held by a refresh never sent until its window ends.
            await asyncio.shield(give_back())
            raise
        return ""

    async def _restore(self, cap: Cap) -> None:
        """Without Redis the counters start empty: a window's first look starts it from what the ledger says
        refreshes spent in it (its rollups, as budgets': a month outlasts the raw records), so a restart forgives no
        cap."""
        if self.proxy.settings.redis_url or cap.counter in self._restored:
            return
        # A counter is looked at only while its window lasts: those of windows that have ended are forgotten.
        now = time.time()
        self._restored = {c: until for c, until in self._restored.items() if until > now}
        self._restored[cap.counter] = cap.until
        dim, name = ("route", cap.route) if cap.key is None else (KEEPALIVE_PAIR, keepalive_pair(cap.route, cap.key))
        pico = await asyncio.to_thread(self.proxy.ledger.spend_pico, cap.since, dim, name, "keepalive_bought_pico")
        if pico:
            await self.proxy.counters.add(cap.counter, -(-pico // 1000), cap.ttl)

    async def _settle(self, caps: list[Cap], expected: Decimal, cost: Decimal) -> None:
        """The refresh reserved `expected` on `caps` and was billed `cost` (0: not sent, or failed)."""
        delta = nanodollars(cost) - nanodollars(expected)
        if delta:
            for cap in caps:
                await self.proxy.counters.add(cap.counter, delta, cap.ttl)

    def _book(self, rec: LedgerRecord) -> Decimal:
        """Write a refresh's ledger row (spend and tokens on /metrics, as on the dashboard: not a caller's latency);
        what it cost."""
        self.proxy.ledger.append(rec)
        self.proxy.metrics.observe(rec)
        return Decimal(rec.cost_usd or 0)

    def _entry(self, session: Session, usage: Usage | None, status: int, error: str, took_s: float,
               estimated: str = "") -> LedgerRecord:
        """The refresh's ledger row (not yet written): kind keepalive, billed to the session's key and tenant
        (`estimated`: why `usage` is what it was sent to do, `_sent_for`, as no answer said what it was billed)."""
        cost = price_usage(usage, session.price) if usage is not None else None
        if cost is not None:
            # Without caching no refresh is sent: it costs what it costs and saves nothing itself (what it kept is
            # credited on the request that reads it, `keepalive_saved_usd`).
            cost = replace(cost, without_cache=Decimal(0))
        upstream = session.upstream
        note = cost_note(usage, cost, f"{session.rows}/{upstream.base_model(session.model)}") if usage is not None else None
        expected = session.cached_tokens
        read = "nothing said (no answer)" if estimated else usage.cache_read if usage is not None else 0
        what = (f"upgrade to {session.upgrade_ttl} through the answer" if session.upgrading else
                "refresh of the static prefix" if session.level == "static" else "refresh")
        explanation = [f"keepalive: {what} {session.refreshes + 1} of session {session.ident}; expected to read "
                       f"{expected} cached tokens, read {read}", f"keepalive: {session.reason}", *([note] if note else [])]
        if estimated:
            explanation.insert(1, f"usage estimated: {estimated}, though the provider may have run the refresh and "
                                  "billed what it was sent to do (read the cached tokens; an upgrade also writes the answer)")
        key = session.key
        rec = LedgerRecord(
            id=uuid.uuid4().hex[:20], ts=time.time(), key=key.name if key else "", tenant=key.tenant if key else "",
            route=session.route.name, target=upstream.name, provider=upstream.provider or upstream.kind,
            model=session.model, dialect=session.dialect, status=status, **ledger_fields(usage or Usage(), cost),
            latency_ms=took_s * 1000, prefix_hash=session.prefix_hash, explanation=explanation, error=error,
            kind=KIND)
        return rec


class RouteFlags:
    """The tenant/routes where keep-alive learned that something does not pay or is refused, the `size` most
    recently set or asked about kept. Forgetting one costs at most one more refused or unread refresh, where
    keeping every caller's would grow without bound."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._routes: OrderedDict[str, str] = OrderedDict()    # tenant/route -> the route's name

    def add(self, route: str, name: str) -> None:
        self._routes[route] = name
        self._routes.move_to_end(route)
        while len(self._routes) > self.size:
            self._routes.popitem(last=False)

    def __contains__(self, route: object) -> bool:
        if route not in self._routes:
            return False
        self._routes.move_to_end(route)   # type: ignore[arg-type]
        return True

    def __len__(self) -> int:
        return len(self._routes)

    def by_name(self) -> dict[str, int]:
        """How many tenants each route name has here."""
        counts: dict[str, int] = {}
        for name in list(self._routes.values()):
            counts[name] = counts.get(name, 0) + 1
        return counts


class _Gauges(Collector):
    """What keep-alive holds, read at each scrape: sessions per route, level and state (`due`: a refresh is
    scheduled; `idle`: none pays now, its next request decides again; `stopped`: for a reason in `..._stops`),
    and the bytes of bodies they hold against the bound."""

    def __init__(self, keepalive: KeepAlive) -> None:
        self.keepalive = keepalive

    def collect(self):  # noqa: ANN201 -- prometheus_client's collector protocol
        counts: dict[tuple[str, str, str], int] = {}
        for s in list(self.keepalive.sessions.values()):
            state = "stopped" if s.stopped else "due" if s.due is not None else "idle"
            counts[(s.route.name, s.level, state)] = counts.get((s.route.name, s.level, state), 0) + 1
        sessions = GaugeMetricFamily("prefixgate_keepalive_sessions", "Sessions keep-alive holds, by state "
                                     f"(at most {MAX_SESSIONS})", labels=("route", "level", "state"))
        for labels, n in sorted(counts.items()):
            sessions.add_metric(labels, n)
        held = GaugeMetricFamily("prefixgate_keepalive_body_bytes", "Bytes of refresh bodies the sessions hold "
                                 f"(at most {MAX_BODY_BYTES})", value=self.keepalive.body_bytes)
        off = GaugeMetricFamily("prefixgate_keepalive_tenants_without", "Tenants a route sends no keep-alive upgrade "
                                f"(unread or refused) or pre-warm (refused) for (at most {MAX_ROUTES} of each in all)",
                                labels=("route", "what"))
        for what, flags in (("upgrade", self.keepalive.no_upgrade), ("prewarm", self.keepalive.no_prewarm)):
            for route, n in sorted(flags.by_name().items()):
                off.add_metric((route, what), n)
        anchors = GaugeMetricFamily("prefixgate_keepalive_held_entries", "Hour-long entries the planner's routes in "
                                    f"this replica hold by marking them again (at most {MAX_HELD} a route)",
                                    value=self.keepalive.proxy.planner_state.held_entries())
        return [sessions, held, off, anchors]


def _answer(asked: asyncio.Task) -> Elsewhere:
    """What a request's question to Redis (`KeepAlive.looking`) found; nothing where it was cancelled or failed."""
    return asked.result() if not asked.cancelled() and asked.exception() is None else Elsewhere()


def static_where(party: str, route: str, credential: str | None, key: str) -> tuple[str, str, str, str]:
    """Where a static prefix's session is (`KeepAlive.statics`, and hashed, in Redis): the provider keeps one entry per
    credential, named here by a hash of it."""
    return party, route, hashlib.sha256(credential.encode()).hexdigest()[:16] if credential else "", key


def _refused_by(refusal: RequestError) -> str:
    """The stop reason of a refresh its key's admission refused: the key's rate limit (a limit with a size: requests
    or tokens per minute), else its budget (spent, or held by its running requests)."""
    limited = refusal.limited
    return "rate limit" if limited is not None and limited.limit is not None else "budget"


def _sent_for(session: Session) -> Usage:
    """What `session`'s refresh, sent whole but unanswered, is billed if the provider ran it: the prefix read, and for
    an upgrade its filler turn and the answer written with the upgrade's TTL (what `upgrade_cost` held it at)."""
    if not session.upgrading:
        return Usage(cache_read=session.cached_tokens)
    return Usage(uncached_input=FILLER_TOKENS, cache_read=session.cached_tokens,
                 cache_writes={session.upgrade_ttl: session.reply_tokens})


def _tokens_through(session: Session, body: dict) -> int:
    """Our estimate of a static session's prefix: the tokens of its blocks through its checkpoint (the provider's
    own count replaces it once a refresh has read the entry)."""
    conv = request_dialect(session.planner, body).parse_request(body, model=session.model)
    encoding = tokens.encoding_for(session.planner, session.model)
    return sum(tokens.block_tokens(block, encoding) for block in conv.blocks()[:session.mark + 1])


def ttl_in_force(conv: Conversation, marks: list) -> str | None:
    """The lifetime of the deepest cached prefix of a planned request (`conv`, its `checkpoints()`): its last
    checkpoint's, or the top-level automatic marker's (Anthropic's `cache_control` on the request); None where
    nothing was marked."""
    if marks:
        return marks[-1][2].ttl
    auto = conv.params.get("cache_control")
    return str(auto.get("ttl", "5m")) if isinstance(auto, dict) else None
