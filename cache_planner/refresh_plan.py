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
from collections import OrderedDict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from prefixgate import tokens
from prefixgate.cache_planner.keepalive import refresh_body, refresh_cost
from prefixgate.cache_planner.lifetime import HORIZON_S, REFRESH_MARGIN_S, GapBook, keepalive
from prefixgate.cache_planner.rewrite import SYSTEM_ROLES
from prefixgate.dialects import request_dialect
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation, ttl_seconds
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.rules import Catalog, default_catalog
from prefixgate.providers.trace import TraceRecord, record_json

DEFAULT_TTL = {"anthropic": "5m", "bedrock": "5m", "openai": "30m"}
MAX_ENTRIES = 8192         # entries remembered (least recently used forgotten): bounded memory on long traces


@dataclass
class Entry:
    key: str
    level: str                 # "static" or "conversation"
    index: int                 # its block in `body`
    record: TraceRecord        # the request that last wrote or read it (provider, model, route, tenant)
    body: dict                 # that request's planned body, the source of its refresh
    tokens: int                # prompt tokens through the checkpoint
    ttl: str
    last_request: float        # the session's last real request (refreshes do not count)
    expires: float
    holds: tuple[str, ...] = ()  # the keys of the request's earlier checkpoints (a refresh reads them too)
    version: int = 0
    kept: bool = True          # False once a refresh was not worth it: left to expire, but still a session's link


class RefreshPlanner:
    """Feed it each planned request (`after`) and ask, before each next one, for the refreshes due (`due`)."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or default_catalog()
        self.gaps = GapBook(prior_ttls=lambda _route: (300.0, 3600.0))
        self.entries: OrderedDict[str, Entry] = OrderedDict()
        self._queue: list[tuple[float, int, str, int]] = []
        self._seq = 0

    def after(self, record: TraceRecord, conv: Conversation, body: dict) -> None:
        """A planned request was sent at `record.t`: touch the entries it reads, learn its gap, open its own."""
        now = record.t
        flat = [(seg.role, b) for seg in conv.segments for b in seg.blocks]
        keys = conv.prefix_keys()
        present = set(keys)
        marks = [i for i, (_, b) in enumerate(flat) if b.checkpoint is not None]
        # A session's earlier conversation entries are superseded by this request's; static ones are read.
        found = [self.entries[k] for k in self.entries.keys() & present]
        earlier = [e for e in found if e.level == "conversation"]
        for old in earlier:
            del self.entries[old.key]
        for entry in found:
            if entry.level != "conversation":
                self._touch(entry, now, ttl_seconds(entry.ttl))
        if not marks:
            return
        route = f"{record.tenant}/{record.route}"
        encoding = tokens.encoding_for(record.provider, record.model)
        cumulative, total = [], 0
        for _, block in flat:
            total += tokens.block_tokens(block, encoding)
            cumulative.append(total)
        lead = next((i for i, (role, _) in enumerate(flat) if role not in (*SYSTEM_ROLES, "tools", "schema")), len(flat))
        for n, index in enumerate(marks):
            level = "static" if index < lead else "conversation"
            key = keys[index]
            if level == "static":
                # The static entry on its own serves a session that starts: a request that continues one
                # ends the static entry's idle time without that (censored).
                self.gaps.observe(route, level, key, now, returned=not earlier)
            elif index == marks[-1]:
                previous = max(earlier, key=lambda e: e.tokens).key if earlier else None
                self.gaps.observe(route, level, key, now, previous)
            ttl = flat[index][1].checkpoint.ttl or DEFAULT_TTL.get(record.provider, "5m")  # type: ignore[union-attr]
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = Entry(key, level, index, record, body, cumulative[index], ttl, now, now)
            entry.index, entry.record, entry.body, entry.last_request = index, record, body, now
            entry.holds, entry.kept = tuple(keys[i] for i in marks[:n]), True
            self.entries.move_to_end(key)
            self._touch(entry, now, ttl_seconds(ttl))
        while len(self.entries) > MAX_ENTRIES:
            self.entries.popitem(last=False)

    def due(self, before: float) -> list[dict[str, Any]]:
        """The refresh records to send before `before` (all remaining ones: `float('inf')`), in time order."""
        out = []
        while self._queue and self._queue[0][0] < before:
            at, _, key, version = heapq.heappop(self._queue)
            entry = self.entries.get(key)
            if entry is None or entry.version != version or not entry.kept:
                continue
            line = self._decide(entry, at)
            if line is None:
                entry.kept = False
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
        if at - entry.last_request >= HORIZON_S:
            return None  # no session is expected back after a day: the model's horizon bounds every chain
        try:
            rules = resolve_model(record.provider, record.model, self.catalog)
            refresh = refresh_body(record.provider, _through(entry), model=record.model, catalog=self.catalog)
        except RequestError:
            return None
        if refresh is None or refresh.kind != "generate":
            return None
        ttl_s = float(ttl_seconds(entry.ttl))
        # What a refresh saves is this entry's tokens past the longest earlier entry that outlives its next
        # expiry anyway (a 1h checkpoint before this 5m one).
        kept = [self.entries[k].tokens for k in entry.holds
                if k in self.entries and self.entries[k].kept and self.entries[k].expires > at + ttl_s]
        at_stake = entry.tokens - max(kept, default=0)
        price = rules.price_for(entry.tokens)
        per_m = Decimal(1_000_000)
        cost = refresh_cost(refresh, price, entry.tokens)
        model = self.gaps.model(f"{record.tenant}/{record.route}", entry.level)
        decision = keepalive(model, idle=at - entry.last_request, expires_in=entry.expires - at, ttl_s=ttl_s,
                             rewrite_cost=float(price.write_price(entry.ttl) * at_stake / per_m),
                             read_cost=float(price.cache_read * at_stake / per_m), refresh_cost=float(cost), now=at)
        if not decision.refresh:
            return None
        line = {**record_json(record), "t": at, "body": refresh.body, "output_tokens": refresh.output_tokens,
                "keepalive": True, "plan": [f"keepalive: refresh the {entry.level} entry ({entry.tokens} tokens, "
                                            f"ttl {entry.ttl}): {decision.reason}"]}
        # The refresh reads this entry and the earlier ones its body marks.
        for key in (entry.key, *entry.holds):
            other = self.entries.get(key)
            if other is not None:
                self._touch(other, at, ttl_seconds(other.ttl))
        return line


def _through(entry: Entry) -> dict:
    """The request body cut to what keeps `entry`: its checkpoints after the entry's block are taken off, so the
    refresh stops at it (`keepalive.refresh_body` cuts after the last checkpoint)."""
    dialect = request_dialect(entry.record.provider, entry.body)
    conv = dialect.parse_request(entry.body, model=entry.record.model)  # freshly parsed: ours to change
    later = [b for b in conv.blocks()[entry.index + 1:] if b.checkpoint is not None]
    if not later:
        return entry.body
    for block in later:
        block.checkpoint = None
    return dialect.encode_request(conv)
