"""Sticky placement on load-balanced routes: a prefix stays on the target where its cache is warm.

On a route with `balance` (policies/balance.py) each session's prefix is pinned to the upstream that last
answered it, for as long as the TTL in force there: the longest checkpoint TTL the planner wrote, else the
catalogue's rule for that provider (Claude's default TTL, OpenAI's in-memory idle time or its 24 h
retention, Gemini's implicit TTL). Within that time the pinned target is tried first and the route's
ranking only orders the failover; the proxy's retry policy decides what fails over (429, 5xx, timeouts,
connection errors), never the caller's own 4xx. A *flip* is a prefix answered by a target other than its
pin, where it was cold: by failover while the pin was live, or after it expired. Its re-write cost (tokens
re-written x (write price - cached price) at the new target's price) goes on the ledger record (`flip`,
`flip_from`, `flip_tokens`, `flip_cost_usd`), into the rollups (dashboard) and `/metrics`.

A pin is keyed by the caller's party, the route, the prompt's shape (tools and system prompt with volatile
values masked: `cache_planner.fingerprint`) and its first turn, so every turn of one session shares it, and
hashed with the server secret: one tenant's pins neither reveal nor steer another's. Pins live in this
process (oldest out past `MAX_PINS`) and, with Redis, under `prefixgate:sticky:` so replicas agree; a Redis
that does not answer leaves each replica with its own pins until it does.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from prefixgate.cache_planner import fingerprint
from prefixgate.cache_planner.regimes import regime_of
from prefixgate.cache_planner.rewrite import SYSTEM_ROLES
from prefixgate.cost import MTOK
from prefixgate.dialects import wire_format
from prefixgate.gateway.auth import party_of
from prefixgate.ir import ttl_seconds
from prefixgate.policies.balance import expected_cost, rank
from prefixgate.providers.rules import Catalog
from prefixgate.redis_outage import ERRORS as _ERRORS
from prefixgate.redis_outage import RetryWindow, outage_of
from prefixgate.usage import Usage

if TYPE_CHECKING:
    from prefixgate.cache_planner import Plan
    from prefixgate.cost import Price
    from prefixgate.gateway.proxy import Call, Prepared, Proxy
    from prefixgate.policies.schema import TargetRef

log = logging.getLogger("prefixgate.gateway")
PREFIX = "prefixgate:sticky:"
MAX_PINS = 100_000
MAX_STATS = 10_000
# A pin outlives its TTL by this much (in memory and Redis), so a prefix that comes back after its cache
# expired is still known as a flip by expiry rather than looking new.
KEEP_EXPIRED_S = 3600.0
# Hit rates decay by this much per answer: a target's recent behaviour, not its whole history.
DECAY = 0.95
RETRY_S = 1.0


@dataclass(frozen=True)
class Pin:
    target: str         # the upstream whose cache holds the prefix
    expires: float      # unix seconds when it goes cold there
    tokens: int         # the prefix tokens warm there


@dataclass(frozen=True)
class Placement:
    """What a balanced request found: its pin key, the pin (None: a new prefix) and when it looked."""

    key: str
    pin: Pin | None
    at: float
    party: str = "-"        # whose pins and hit rates these are (`auth.party_of`)


@dataclass(frozen=True)
class Flip:
    reason: str                 # failover (the pin was live) or expired
    source: str                 # the upstream the prefix was warm on
    tokens: int                 # prompt tokens written again at the new target
    cost: Decimal | None        # their write price less what reading them would have cost; None: unpriced


def flip_fields(flip: Flip | None) -> dict:
    """The ledger record's flip columns."""
    if flip is None:
        return {}
    return {"flip": flip.reason, "flip_from": flip.source, "flip_tokens": flip.tokens,
            "flip_cost_usd": None if flip.cost is None else str(flip.cost)}


def ttl_in_force(catalog: Catalog, plan: Plan) -> tuple[str, int]:
    """(write TTL label, seconds a prefix stays warm after an answer): the planner's longest checkpoint TTL,
    else its provider's rule in the catalogue (the target's cache regime says which)."""
    ttls = [c.ttl for _, _, c in plan.conversation.checkpoints()]
    if ttls:
        label = max(ttls, key=ttl_seconds)
        return label, ttl_seconds(label)
    return regime_of(plan.target.provider).warm_for(plan.target, catalog, plan.conversation.params)


class Sticky:
    def __init__(self, secret: bytes, redis_url: str = "", clock: Callable[[], float] = time.time,
                 limit: int = MAX_PINS) -> None:
        self._secret = secret
        self.clock = clock
        self.limit = limit
        self._pins: OrderedDict[str, Pin] = OrderedDict()
        # (party, route, upstream) -> [cache-read tokens, prompt tokens], decayed per answer.
        self._rates: OrderedDict[tuple[str, str, str], list[float]] = OrderedDict()
        self._turns: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._redis = None
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._writes: set[asyncio.Task] = set()
        # Redis unreachable: this replica's own pins until it answers (its window shared with every client of it).
        self._window = RetryWindow(log, "sticky pins: redis unreachable (%s); this replica's own pins for now",
                                   "sticky pins: redis answers again", RETRY_S, outage_of(redis_url)) if redis_url else None

    async def aclose(self) -> None:
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        if self._redis is not None:
            await self._redis.aclose()

    def key(self, party: str, route: str, call: Call) -> str:
        conv = call.conv
        turn = next((s.blocks[0].key for s in conv.segments if s.blocks and s.role not in (*SYSTEM_ROLES, "tools", "schema")),
                    "")
        text = f"{party}\x00{route}\x00{fingerprint(conv)}\x00{turn}"
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()[:32]

    async def order(self, proxy: Proxy, call: Call) -> tuple[TargetRef, ...]:
        """The route's targets in the order this request tries them: its live pin first, then the route's
        ranking (for a balanced route; any other keeps the order written)."""
        route = call.route
        if not route.balance:
            return route.targets
        # On an open gateway, per caller credential: each caller's cache lives in its own account, so another's
        # pin says nothing of where this caller's prefix is warm.
        party = party_of(call.caller, proxy.policy.upstreams[route.targets[0].upstreams[0]], call.dialect)
        key = self.key(party, route.name, call)
        pin = await self._read(key)
        now = self.clock()
        call.placement = Placement(key, pin, now, party)
        by_name = {ref.upstreams[0]: ref for ref in route.targets}
        live = pin is not None and pin.expires > now and pin.target in by_name
        costs = {} if route.balance != "cost" else {name: self._expected(proxy, call, party, ref)
                                                   for name, ref in by_name.items()}
        turn = 0
        if route.balance == "round_robin" and not live:
            turn = self._turns.pop((party, route.name), 0)
            self._bounded(self._turns, (party, route.name), turn + 1, MAX_STATS)
        names = rank(route.balance, list(by_name), key, costs, turn)
        if live:
            names = [pin.target, *(n for n in names if n != pin.target)]  # type: ignore[union-attr]
        return tuple(by_name[n] for n in names)

    def _expected(self, proxy: Proxy, call: Call, party: str, ref: TargetRef) -> Decimal | None:
        upstream = proxy.policy.upstreams[ref.upstreams[0]]
        model = ref.model or call.conv.model or ""
        wire = wire_format(upstream.dialect_for(call.dialect, model))
        price = proxy.accounts.price(upstream.price_provider(wire), upstream, model, Usage(), call.route.price)
        read, prompt = self._rates.get((party, call.route.name, upstream.name), (0.0, 0.0))
        return expected_cost(price, read / prompt if prompt else 0.0, "5m")

    def settle(self, call: Call, prep: Prepared, usage: Usage, price: Price | None, catalog: Catalog) -> Flip | None:
        """After an answer from `prep`'s upstream: the flip it was (None: none), and the prefix pinned there."""
        placement = call.placement
        if placement is None:
            return None
        name, now = prep.upstream.name, self.clock()
        writes = sum(usage.cache_writes.values())
        prompt = usage.uncached_input + usage.cache_read + writes
        party = placement.party
        rates = self._rates.pop((party, call.route.name, name), [0.0, 0.0])
        self._bounded(self._rates, (party, call.route.name, name),
                      [rates[0] * DECAY + usage.cache_read, rates[1] * DECAY + prompt], MAX_STATS)
        label, ttl_s = ttl_in_force(catalog, prep.plan)
        flip = None
        pin = placement.pin
        if pin is not None and pin.target != name:
            # What the old target held and this one did not read: written again here.
            tokens = max(0, min(pin.tokens, prompt) - usage.cache_read)
            if tokens:
                cost = None if price is None else tokens * (price.write_price(label) - price.cache_read) / MTOK
                flip = Flip("failover" if pin.expires > placement.at else "expired", pin.target, tokens, cost)
                call.notes.append(f"sticky: flip from {pin.target} to {name} ({flip.reason}): {tokens} prompt tokens "
                                  "written again")
        warm = prompt if regime_of(prep.plan.target.provider).whole_prompt else usage.cache_read + writes
        self._write(placement.key, Pin(name, now + ttl_s, warm), ttl_s)
        return flip

    # ---- the pins ---------------------------------------------------------------------------------------

    def _shared(self) -> bool:
        return self._window is not None and not self._window.resting()

    async def _read(self, key: str) -> Pin | None:
        if self._shared():
            try:
                raw = await self._redis.get(PREFIX + key)  # type: ignore[union-attr]
            except _ERRORS as e:
                self._window.failed(e)  # type: ignore[union-attr]
            else:
                self._window.answered()  # type: ignore[union-attr]
                if raw is not None:
                    data = json.loads(raw)
                    return Pin(str(data["t"]), float(data["e"]), int(data["n"]))
        return self._pins.get(key)

    def _write(self, key: str, pin: Pin, ttl_s: int) -> None:
        self._pins.pop(key, None)
        self._bounded(self._pins, key, pin, self.limit)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:    # not on the gateway's loop: this replica's pin only
            loop = None
        if self._shared() and loop is not None:
            value = json.dumps({"t": pin.target, "e": pin.expires, "n": pin.tokens})
            task = loop.create_task(self._store(key, value, int((ttl_s + KEEP_EXPIRED_S) * 1000)))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    async def _store(self, key: str, value: str, px: int) -> None:
        try:
            await self._redis.set(PREFIX + key, value, px=px)  # type: ignore[union-attr]
        except _ERRORS as e:
            self._window.failed(e)  # type: ignore[union-attr]

    @staticmethod
    def _bounded(store: OrderedDict, key: object, value: object, limit: int) -> None:
        store[key] = value
        while len(store) > limit:
            store.popitem(last=False)
