"""What a route has taught us: which pieces of its prompts stay constant, and how its prefixes recur.

A route is one stream of similar requests (a caller-supplied route name, an API key, or the
fingerprint of the system prompt's shape). For each movable unit of prompt text (a line or a
sentence) we keep an exponentially decayed count of the requests that contained it: a unit present
in at least half of recent requests is `static`; one that recurs less is `session` (a user's name,
today's date) or `dynamic` (a timestamp, a request id), told apart by the detectors.

State is bounded: at most `max_routes` routes (LRU) and `max_units` units per route.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from prefixgate.cache_planner.reuse import ReuseTracker
from prefixgate.ir import Stability

DECAY = 0.9          # per request: a unit's weight halves after ~7 requests without it
STATIC_SHARE = 0.5   # present in at least this share of recent requests: static
# Kinds of volatile span that change every request; the others change per session or per day.
DYNAMIC_KINDS = frozenset({"timestamp", "time", "unix_time", "uuid", "hex_id", "request_id", "counter"})


@lru_cache(maxsize=65536)
def unit_key(text: str) -> str:
    """A stable (cross-process, so Redis-shareable) key for a unit; memoised, as units recur."""
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


@dataclass
class RouteState:
    requests: int = 0
    # Decayed request count, and unit -> (decayed count, request index of its last update).
    weight: float = 0.0
    units: OrderedDict[str, tuple[float, int]] = field(default_factory=OrderedDict)
    reuse: ReuseTracker = field(default_factory=ReuseTracker)
    # Tool schemas by canonical hash -> the first serialisation seen (to undo key-order churn).
    tool_forms: OrderedDict[str, str] = field(default_factory=OrderedDict)
    # Prefix hash of a user turn -> the per-request context we inserted there, so when that turn is
    # history in the next request it gets the same bytes again and the conversation cache holds.
    contexts: OrderedDict[str, str] = field(default_factory=OrderedDict)
    # Units (by key) moved out of the system prompt -> the stability they moved as: an identical unit moves
    # the same way again, so a decision changes only when the unit does (see rewrite._split_block); a
    # detected volatile unit moved once is moved every time, though a session's turns repeat it enough to
    # look static, or the later turns would send a different prefix than the turn that moved it.
    moved: OrderedDict[str, Stability] = field(default_factory=OrderedDict)
    # Gemini explicit caches this route created: static prefix hash -> (cache name, expiry time).
    explicit: dict[str, tuple[str, float]] = field(default_factory=dict)
    max_units: int = 2048
    max_contexts: int = 4096

    def remember_context(self, key: str, text: str) -> None:
        self.contexts[key] = text
        self.contexts.move_to_end(key)
        while len(self.contexts) > self.max_contexts:
            self.contexts.popitem(last=False)

    def moved_as(self, text: str) -> Stability | None:
        return self.moved.get(unit_key(text))

    def remember_moved(self, text: str, stability: Stability) -> None:
        key = unit_key(text)
        self.moved[key] = stability
        self.moved.move_to_end(key)
        while len(self.moved) > self.max_units:
            self.moved.popitem(last=False)

    def shares(self, texts: list[str]) -> list[float | None]:
        """Each unit's share of recent requests (decayed count / decayed requests); None before the
        route has history. One pass, as a long system prompt has hundreds of units."""
        if self.weight <= 0:
            return [None] * len(texts)
        get, now, weight = self.units.get, self.requests, self.weight
        out: list[float | None] = []
        for text in texts:
            entry = get(unit_key(text))
            out.append(0.0 if entry is None else entry[0] * DECAY ** (now - entry[1]) / weight)
        return out

    def classify(self, share: float | None, kinds: set[str]) -> Stability:
        """A unit's stability from its share of recent requests (None: no history) and its detectors.

        With no history only per-request values (timestamps, ids) move. A date or a ticket number may
        be an example inside fixed instructions ("merge freeze begins 2026-03-05"): it moves once the
        route sees it change, when its prefix is broken anyway, so a decision never flips between a
        route's first and second request on a detector's word alone."""
        if share is not None and share >= STATIC_SHARE:
            return "static"
        if kinds & DYNAMIC_KINDS:
            return "dynamic"
        return "session" if share is not None else "static"

    def record_units(self, texts: list[str]) -> None:
        """Count one request's units (call after classifying them)."""
        self.requests += 1
        self.weight = self.weight * DECAY + 1.0
        units, now = self.units, self.requests
        for text in dict.fromkeys(texts):
            key = unit_key(text)
            count, at = units.pop(key, (0.0, now))
            units[key] = (count * DECAY ** (now - at) + 1.0, now)
        while len(self.units) > self.max_units:
            self.units.popitem(last=False)

    def to_dict(self) -> dict:
        return {"requests": self.requests, "weight": self.weight, "units": list(self.units.items()),
                "reuse": self.reuse.to_dict(), "tool_forms": list(self.tool_forms.items()),
                "contexts": list(self.contexts.items()), "explicit": self.explicit, "moved": list(self.moved.items())}

    @classmethod
    def from_dict(cls, data: dict) -> RouteState:
        state = cls(requests=data["requests"], weight=data["weight"])
        state.units = OrderedDict((k, (c, a)) for k, (c, a) in data["units"])
        state.reuse = ReuseTracker.from_dict(data["reuse"])
        state.tool_forms = OrderedDict(data.get("tool_forms", []))
        state.contexts = OrderedDict(data.get("contexts", []))
        state.explicit = {k: (n, e) for k, (n, e) in data.get("explicit", {}).items()}
        state.moved = OrderedDict(data.get("moved", []))
        return state


class StateStore(Protocol):
    def load(self, route: str) -> RouteState | None: ...
    def save(self, route: str, state: RouteState) -> None: ...
    def explicit_cache(self, route: str, key: str) -> tuple[str, float] | None: ...
    def share_explicit_cache(self, route: str, key: str, name: str, expires_at: float) -> None: ...


class RedisStore:
    """Route state shared by gateway replicas: one JSON value per route, expiring after a day idle.

    Redis being unreachable is not the request's problem: the route plans from this replica's memory,
    Redis is left alone for `retry_s`, and the next publish after it answers again shares the state.
    """

    def __init__(self, url: str, prefix: str = "prefixgate:route:", ttl_s: int = 86400, retry_s: float = 1.0) -> None:
        import redis

        self.client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.prefix, self.ttl_s, self.retry_s = prefix, ttl_s, retry_s
        self._errors = (redis.RedisError, OSError)
        self._down_until = 0.0
        self.failures = 0

    def load(self, route: str) -> RouteState | None:
        if time.monotonic() < self._down_until:
            return None
        try:
            raw = self.client.get(self.prefix + route)
        except self._errors:
            self._went_down()
            return None
        return RouteState.from_dict(json.loads(raw)) if raw else None

    def save(self, route: str, state: RouteState) -> None:
        if time.monotonic() < self._down_until:
            return
        try:
            self.client.set(self.prefix + route, json.dumps(state.to_dict()), ex=self.ttl_s)
        except self._errors:
            self._went_down()

    def explicit_cache(self, route: str, key: str) -> tuple[str, float] | None:
        """The explicit cache (name, expiry) some replica created for this route's prefix, if it is alive."""
        if time.monotonic() < self._down_until:
            return None
        try:
            raw = self.client.get(f"{self.prefix}{route}:explicit:{key}")
        except self._errors:
            self._went_down()
            return None
        if not raw:
            return None
        name, expires_at = json.loads(raw)
        return str(name), float(expires_at)

    def share_explicit_cache(self, route: str, key: str, name: str, expires_at: float) -> None:
        """Published at once, on its own key (not with the route's state, which replicas overwrite in turn),
        and gone from Redis when the cache expires."""
        ttl_ms = int((expires_at - time.time()) * 1000)
        if ttl_ms <= 0 or time.monotonic() < self._down_until:
            return
        try:
            self.client.set(f"{self.prefix}{route}:explicit:{key}", json.dumps([name, expires_at]), px=ttl_ms)
        except self._errors:
            self._went_down()

    def _went_down(self) -> None:
        self.failures += 1
        self._down_until = time.monotonic() + self.retry_s


class PlannerState:
    """All routes' state: an in-memory LRU, optionally backed by a shared store (Redis)."""

    def __init__(self, max_routes: int = 10_000, store: StateStore | None = None, publish_every_s: float = 1.0) -> None:
        if max_routes < 1:
            raise ValueError("max_routes must be >= 1")
        self.max_routes = max_routes
        self.store = store
        self.routes: OrderedDict[str, RouteState] = OrderedDict()
        self.lock = threading.Lock()
        self.publish_every_s = publish_every_s
        self._published: dict[str, float] = {}

    def route(self, name: str) -> RouteState:
        with self.lock:
            state = self.routes.get(name)
            if state is not None:
                self.routes.move_to_end(name)
                return state
        loaded = self.store.load(name) if self.store else None
        with self.lock:
            state = self.routes.setdefault(name, loaded or RouteState())
            while len(self.routes) > self.max_routes:
                gone, _ = self.routes.popitem(last=False)
                self._published.pop(gone, None)
            return state

    def shared_explicit(self, route: str, key: str) -> tuple[str, float] | None:
        """An explicit cache another replica created for `route`'s prefix `key` (None without a shared store)."""
        return self.store.explicit_cache(route, key) if self.store else None

    def share_explicit(self, route: str, key: str, name: str, expires_at: float) -> None:
        if self.store is not None:
            self.store.share_explicit_cache(route, key, name, expires_at)

    def commit(self, name: str, state: RouteState) -> None:
        """Publish a route's updated state to the shared store, at most once per `publish_every_s` per
        route: replicas learn from each other within a second, without a store write on every request."""
        if self.store is None:
            return
        now = time.monotonic()
        if now - self._published.get(name, -1e9) >= self.publish_every_s:
            self._published[name] = now
            self.store.save(name, state)
