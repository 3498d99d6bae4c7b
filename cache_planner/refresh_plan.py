"""`prefixgate plan TRACE --keepalive`: the refreshes a planned trace would send while its sessions are idle.

Every planned request's checkpoints are cache entries: the static prefix's (tools and system) and the last one
(the conversation so far). A later request whose prefix holds an entry's key reads it; for the conversation,
that is the session coming back, and the gap since its previous request is what the route's gap model
(`lifetime.GapModel`, one per route and level) learns. When an entry is about to expire and its session is
away, `lifetime.keepalive` decides, from the gaps seen so far and the prices, whether a refresh
(`keepalive.refresh_body`: the prefix through that checkpoint with no or minimal output) is worth its cost; a
refresh restarts the entry's TTL and those of the entries it contains. The planner's own requests are never
changed: refreshes are extra records, in time order, marked `"keepalive": true`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from prefixgate import tokens
from prefixgate.cache_planner.keepalive import refresh_body, refresh_cost
from prefixgate.cache_planner.lifetime import REFRESH_MARGIN_S, GapBook, keepalive
from prefixgate.cache_planner.rewrite import SYSTEM_ROLES
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation, ttl_seconds
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.rules import Catalog, default_catalog
from prefixgate.providers.trace import TraceRecord, record_json

DEFAULT_TTL = {"anthropic": "5m", "bedrock": "5m", "openai": "30m"}


@dataclass
class Entry:
    key: str
    level: str                 # "static" or "conversation"
    record: TraceRecord        # the request that last wrote or read it (provider, model, route, tenant)
    body: dict                 # that request's planned body, the source of its refresh
    tokens: int                # prompt tokens through the checkpoint
    ttl: str
    last_request: float        # the session's last real request (refreshes do not count)
    expires: float
    holds: str | None = None   # a conversation entry: the static entry's key its prefix holds
    version: int = 0


class RefreshPlanner:
    """Feed it each planned request (`after`) and ask, before each next one, for the refreshes due (`due`)."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or default_catalog()
        self.gaps = GapBook(prior_ttls=lambda _route: (300.0, 3600.0))
        self.entries: dict[str, Entry] = {}
        self._queue: list[tuple[float, int, str, int]] = []
        self._seq = 0

    def after(self, record: TraceRecord, conv: Conversation, body: dict) -> None:
        """A planned request was sent at `record.t`: touch the entries it reads, learn its gap, open its own."""
        now = record.t
        flat = [(seg.role, b) for seg in conv.segments for b in seg.blocks]
        keys = conv.prefix_keys()
        present = set(keys)
        for entry in [e for k, e in self.entries.items() if k in present]:
            self._touch(entry, now, ttl_seconds(entry.ttl))
        marks = [i for i, (_, b) in enumerate(flat) if b.checkpoint is not None]
        if not marks:
            return
        route = f"{record.tenant}/{record.route}"
        encoding = tokens.encoding_for(record.provider, record.model)
        cumulative, total = [], 0
        for _, block in flat:
            total += tokens.block_tokens(block, encoding)
            cumulative.append(total)
        lead = next((i for i, (role, _) in enumerate(flat) if role not in (*SYSTEM_ROLES, "tools", "schema")), len(flat))
        static = [i for i in marks if i < lead]
        chosen = {"static": static[-1]} if static else {}
        if marks[-1] >= lead:
            chosen["conversation"] = marks[-1]
        earlier = [e for k, e in self.entries.items() if k in present and e.level == "conversation"]
        for level, index in chosen.items():
            key = keys[index]
            previous = None
            if level == "conversation" and earlier:
                previous = max(earlier, key=lambda e: e.tokens).key
                for old in earlier:
                    self.entries.pop(old.key, None)
            self.gaps.observe(route, level, key, now, previous)
            ttl = flat[index][1].checkpoint.ttl or DEFAULT_TTL.get(record.provider, "5m")  # type: ignore[union-attr]
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = Entry(key, level, record, body, cumulative[index], ttl, now, now)
            entry.record, entry.body, entry.last_request = record, body, now
            if level == "conversation" and "static" in chosen:
                entry.holds = keys[chosen["static"]]
            self._touch(entry, now, ttl_seconds(ttl))

    def due(self, before: float) -> list[dict[str, Any]]:
        """The refresh records to send before `before` (all remaining ones: `float('inf')`), in time order."""
        out = []
        while self._queue and self._queue[0][0] < before:
            at, _, key, version = heapq.heappop(self._queue)
            entry = self.entries.get(key)
            if entry is None or entry.version != version:
                continue
            line = self._decide(entry, at)
            if line is None:
                del self.entries[key]
            else:
                out.append(line)
        return out

    def _touch(self, entry: Entry, now: float, ttl_s: float) -> None:
        entry.expires = max(entry.expires, now + ttl_s)
        entry.version += 1
        self._seq += 1
        heapq.heappush(self._queue, (entry.expires - REFRESH_MARGIN_S, self._seq, entry.key, entry.version))

    def _decide(self, entry: Entry, at: float) -> dict[str, Any] | None:
        record = entry.record
        try:
            rules = resolve_model(record.provider, record.model, self.catalog)
            refresh = refresh_body(record.provider, _through(entry), model=record.model, catalog=self.catalog)
        except RequestError:
            return None
        if refresh is None or refresh.kind != "generate":
            return None
        price = rules.price_for(entry.tokens)
        per_m = Decimal(1_000_000)
        cost = refresh_cost(refresh, price, entry.tokens)
        model = self.gaps.model(f"{record.tenant}/{record.route}", entry.level)
        decision = keepalive(model, idle=at - entry.last_request, expires_in=entry.expires - at,
                             ttl_s=float(ttl_seconds(entry.ttl)),
                             rewrite_cost=float(price.write_price(entry.ttl) * entry.tokens / per_m),
                             read_cost=float(price.cache_read * entry.tokens / per_m), refresh_cost=float(cost), now=at)
        if not decision.refresh:
            return None
        # The refresh reads this entry and every entry its prefix holds (the static prefix's too).
        line = {**record_json(record), "t": at, "body": refresh.body, "output_tokens": refresh.output_tokens,
                "keepalive": True, "plan": [f"keepalive: refresh the {entry.level} entry ({entry.tokens} tokens, "
                                            f"ttl {entry.ttl}): {decision.reason}"]}
        for key in (entry.key, entry.holds):
            other = self.entries.get(key) if key is not None else None
            if other is not None:
                self._touch(other, at, ttl_seconds(other.ttl))
        return line


def _through(entry: Entry) -> dict:
    """The body whose refresh keeps `entry`: a static entry's refresh stops at the static checkpoint."""
    if entry.level != "static":
        return entry.body
    body = dict(entry.body)
    messages = body.get("messages")
    if isinstance(messages, list):
        body["messages"] = [_unmarked(m) for m in messages]
    return body


def _unmarked(message: Any) -> Any:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return message
    parts = [{k: v for k, v in p.items() if k not in ("cache_control", "prompt_cache_breakpoint")}
             if isinstance(p, dict) else p for p in message["content"]]
    return {**message, "content": parts}
