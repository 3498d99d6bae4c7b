"""What a route has taught us: which spans of its prompts vary, and how its prefixes recur.

A route is one stream of similar requests (a caller-supplied route name, an API key, or the shape of the
system prompt: `PlannerState.resolve` finds the route a prompt with other values in it belongs to). A route
keeps its previous request's system text and the sites learned by comparing each request with it
(`variance`), so a span seen to vary is moved on every later request.

State is bounded: at most `max_routes` routes (LRU), `variance.MAX_SITES` sites, `max_contexts` contexts and
`MAX_EXPLICIT` explicit caches each.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol
from zlib import crc32

from prefixgate.cache_planner.held import HeldEntries
from prefixgate.cache_planner.reuse import ReuseTracker
from prefixgate.cache_planner.reuse_shared import SharedReuse, retry_window
from prefixgate.cache_planner.variance import DYNAMIC_KINDS, Sites
from prefixgate.redis_outage import QUICK_TIMEOUT_S
from prefixgate.reuse import memo, weigh

__all__ = ["DYNAMIC_KINDS", "PlannerState", "RedisStore", "RouteState", "StateStore", "sketch"]

SKETCH_SIZE = 16         # a prompt's shape: the smallest hashes of its 8-word shingles
SKETCH_MATCH = 11        # sketch values shared with a known route to join it (of SKETCH_SIZE)
SKETCH_MIN_CHARS = 400   # shorter prompts are routed by their exact (masked) shape alone
_SHINGLE_WORDS = 8
_WORDS = re.compile(r"[^\W\d_]+")
# Explicit caches a route remembers (the least recently noted forgotten): one per static prefix it created a cache
# for, and nothing else drops an expired one, so a route whose prefixes change would grow them for good.
MAX_EXPLICIT = 256


@lru_cache(maxsize=1024)
def sketch(text: str) -> tuple[str, ...]:
    """Bottom-k MinHash of the text's 8-word shingles (letters only: digits and punctuation carry the values),
    over the shingles whose first word's hash is 0 mod 4 (a sample chosen by content, so two texts sample
    their shared text alike). Two prompts that share most of their text share most of these values; each
    is a stable, cross-process hash (CRC-32: fast, and only compared)."""
    words = _WORDS.findall(text.lower())
    starts = [i for i, w in enumerate(words[:max(1, len(words) - _SHINGLE_WORDS + 1)]) if not crc32(w.encode()) % 4]
    hashes = {crc32(" ".join(words[i:i + _SHINGLE_WORDS]).encode()) for i in starts or [0]}
    return tuple(f"{h:08x}" for h in sorted(hashes)[:SKETCH_SIZE])


def _scoped_sketch(scope: str, text: str) -> tuple[str, ...]:
    """`text`'s sketch values, each hashed with `scope` (a tenant's values never meet another's); memoised in
    the reuse store, as the same system prompt comes back on every request of a session."""
    key = (scope, text)
    found = _SCOPED_SKETCHES.get(key)
    if found is None:
        found = tuple(hashlib.blake2b(f"{scope}\0{v}".encode(), digest_size=8).hexdigest() for v in sketch(text))
        _SCOPED_SKETCHES.put(key, found, weigh((key, found)))
    return found


_SCOPED_SKETCHES = memo("route_sketches")


@dataclass
class RouteState:
    requests: int = 0       # requests planned on this route
    reuse: ReuseTracker = field(default_factory=ReuseTracker)
    # The previous request's system text blocks, as the caller sent them: the next request is compared with them.
    previous: list[str] = field(default_factory=list)
    sites: Sites = field(default_factory=Sites)
    # Tool schemas by canonical hash -> the first serialisation seen (to undo key-order churn).
    tool_forms: OrderedDict[str, str] = field(default_factory=OrderedDict)
    # Prefix hash of a user turn -> the per-request context we inserted there, so when that turn is
    # history in the next request it gets the same bytes again and the conversation cache holds.
    contexts: OrderedDict[str, str] = field(default_factory=OrderedDict)
    # Gemini explicit caches this route created: static prefix hash -> (cache name, expiry time).
    explicit: dict[str, tuple[str, float]] = field(default_factory=dict)
    # Hour-long conversation entries its sessions hold (`held`): later requests keep them alive by marking them.
    held: HeldEntries = field(default_factory=HeldEntries)
    max_contexts: int = 4096
    # This request's rewrite has just learned a unit to move (for this request only: not shared).
    relearned: bool = False
    # Refreshes keep this route's entries alive through breaks (`plan --keepalive`, a gateway route with
    # keep-alive; set per request from `plan(keepalive=)`): TTL choices count a return after the TTL as kept when
    # refreshing until then pays (`lifetime.p_kept`) ...
    keepalive: bool = False
    # ... or upgrading the entry through the request's reply (`plan(upgrade=)`, `keepalive.upgrade_body`).
    upgrade: bool = False

    def remember_context(self, key: str, text: str) -> None:
        self.contexts[key] = text
        self.contexts.move_to_end(key)
        while len(self.contexts) > self.max_contexts:
            self.contexts.popitem(last=False)

    def remember_explicit(self, key: str, name: str, expires_at: float) -> None:
        """The explicit cache `name` holds the static prefix `key` until `expires_at`."""
        self.explicit.pop(key, None)
        self.explicit[key] = (name, expires_at)
        while len(self.explicit) > MAX_EXPLICIT:
            del self.explicit[next(iter(self.explicit))]

    def to_dict(self) -> dict:
        return {"requests": self.requests, "reuse": self.reuse.to_dict(), "previous": self.previous, "sites": self.sites.to_list(),
                "tool_forms": list(self.tool_forms.items()), "contexts": list(self.contexts.items()),
                "explicit": self.explicit, "held": self.held.to_list()}

    @classmethod
    def from_dict(cls, data: dict) -> RouteState:
        state = cls(requests=int(data.get("requests", 0)), reuse=ReuseTracker.from_dict(data["reuse"]))
        state.previous = list(data.get("previous", []))
        state.sites = Sites(data.get("sites", []))
        state.tool_forms = OrderedDict(data.get("tool_forms", []))
        state.contexts = OrderedDict(data.get("contexts", []))
        state.explicit = {k: (n, e) for k, (n, e) in data.get("explicit", {}).items()}
        state.held = HeldEntries.from_list(data.get("held", []))
        return state


class StateStore(Protocol):
    def load(self, route: str) -> RouteState | None: ...
    def save(self, route: str, state: RouteState) -> None: ...
    def explicit_cache(self, route: str, key: str) -> tuple[str, float] | None: ...
    def share_explicit_cache(self, route: str, key: str, name: str, expires_at: float) -> None: ...
    def routes_of(self, values: tuple[str, ...]) -> list[str | None]: ...
    def name_routes(self, values: tuple[str, ...], route: str) -> None: ...


class RedisStore:
    """Route state shared by gateway replicas: one JSON value per route, expiring after a day idle.

    Redis being unreachable is not the request's problem: the route plans from this replica's memory,
    Redis is left alone for `retry_s`, and the next publish after it answers again shares the state.
    The value is one replica's view; what every replica sees of reuse is shared on its own (`reuse`).
    A request's calls are made on the event loop, so they are quick ones (`RetryWindow.ask_quick`); the writer
    thread has a client of its own, with every other client's timeout.
    """

    def __init__(self, url: str, prefix: str = "prefixgate:route:", ttl_s: int = 86400, retry_s: float = 1.0) -> None:
        import redis

        self.client = redis.Redis.from_url(url, socket_timeout=QUICK_TIMEOUT_S, socket_connect_timeout=QUICK_TIMEOUT_S)
        self.prefix, self.ttl_s, self.retry_s = prefix, ttl_s, retry_s
        self.window = retry_window(url, retry_s)
        writer = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.reuse = SharedReuse(self.client, writer, prefix, self.window)

    @property
    def failures(self) -> int:
        return self.window.failures

    def load(self, route: str) -> RouteState | None:
        raw = self.window.ask_quick(lambda: self.client.get(self.prefix + route))
        return RouteState.from_dict(json.loads(raw)) if raw else None

    def save(self, route: str, state: RouteState) -> None:
        self.window.ask_quick(lambda: self.client.set(self.prefix + route, json.dumps(state.to_dict()), ex=self.ttl_s))

    def explicit_cache(self, route: str, key: str) -> tuple[str, float] | None:
        """The explicit cache (name, expiry) some replica created for this route's prefix, if it is alive."""
        raw = self.window.ask_quick(lambda: self.client.get(f"{self.prefix}{route}:explicit:{key}"))
        if not raw:
            return None
        name, expires_at = json.loads(raw)
        return str(name), float(expires_at)

    def share_explicit_cache(self, route: str, key: str, name: str, expires_at: float) -> None:
        """Published at once, on its own key (not with the route's state, which replicas overwrite in turn),
        and gone from Redis when the cache expires."""
        ttl_ms = int((expires_at - time.time()) * 1000)
        if ttl_ms > 0:
            self.window.ask_quick(lambda: self.client.set(f"{self.prefix}{route}:explicit:{key}",
                                                        json.dumps([name, expires_at]), px=ttl_ms))

    def routes_of(self, values: tuple[str, ...]) -> list[str | None]:
        """The route each sketch value was last seen in, on any replica."""
        if not values:
            return []
        raw = self.window.ask_quick(lambda: self.client.mget([f"{self.prefix}sketch:{v}" for v in values]))
        return [r.decode() if r else None for r in raw] if raw is not None else [None] * len(values)

    def name_routes(self, values: tuple[str, ...], route: str) -> None:
        if values:
            self.window.ask_quick(lambda: self._named(values, route))

    def _named(self, values: tuple[str, ...], route: str) -> list[object]:
        pipe = self.client.pipeline(transaction=False)
        for v in values:
            pipe.set(f"{self.prefix}sketch:{v}", route, ex=self.ttl_s)
        return pipe.execute()


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
        # Sketch value -> the route it was last seen in (`resolve`), bounded.
        self._sketches: OrderedDict[str, str] = OrderedDict()

    def resolve(self, scope: str, name: str, text: str) -> str:
        """`scope + ` the route a prompt named `name` by its exact shape belongs to: a known route of the same
        scope (a tenant: tenants never share a route) sharing at least `SKETCH_MATCH` of its sketch values (the
        same instructions with other values in them), else `name`. With a shared store, every replica
        resolves a prompt to the same route."""
        if len(text) < SKETCH_MIN_CHARS:
            return scope + name
        values = _scoped_sketch(scope, text)
        with self.lock:
            local = [self._sketches.get(v) for v in values]
        shared = self.store.routes_of(values) if self.store else [None] * len(values)
        votes: dict[str, int] = {}
        for mine, theirs in zip(local, shared, strict=True):
            for route in {mine, theirs} - {None}:
                votes[route] = votes.get(route, 0) + 1
        best = max(votes.items(), key=lambda kv: (kv[1], kv[0] == name), default=(name, 0))
        chosen = best[0] if best[1] >= SKETCH_MATCH else name
        fresh = [v for v, mine in zip(values, local, strict=True) if mine != chosen]
        with self.lock:
            for v in values:
                self._sketches[v] = chosen
                self._sketches.move_to_end(v)
            while len(self._sketches) > 16 * self.max_routes:
                self._sketches.popitem(last=False)
        if self.store is not None and fresh:
            self.store.name_routes(values, chosen)
        return scope + chosen

    def held_entries(self) -> int:
        """The hour-long entries this process's routes hold (`RouteState.held`), for /metrics."""
        with self.lock:
            return sum(len(route.held.entries) for route in self.routes.values())

    def route(self, name: str) -> RouteState:
        with self.lock:
            state = self.routes.get(name)
            if state is not None:
                self.routes.move_to_end(name)
                return state
        loaded = self.store.load(name) if self.store else None
        # Replicas sharing a store share what they see of reuse (`reuse_shared`): from the route's counts on.
        sharing: SharedReuse | None = getattr(self.store, "reuse", None)
        with self.lock:
            found = self.routes.get(name)
            state = self.routes.setdefault(name, loaded or RouteState())
            while len(self.routes) > self.max_routes:
                gone, _ = self.routes.popitem(last=False)
                self._published.pop(gone, None)
        if found is None and sharing is not None:
            share = sharing.route(name)
            state.reuse.shared = share
            sharing.pull(share.route, state.reuse)
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
