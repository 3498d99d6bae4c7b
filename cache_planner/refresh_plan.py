"""`prefixgate plan TRACE --keepalive`: the refreshes a planned trace would send while its sessions are idle.

Every planned request's checkpoints are cache entries: the static prefix's (tools and system) and the last one
(the conversation so far). A later request whose prefix holds an entry's key reads it; for the conversation,
that is the session coming back, and the gap since its previous request is what the route's gap model
(`lifetime.GapModel`, one per route and level) learns. When an entry is about to expire and its session is
away, `lifetime.keepalive` decides, from the gaps seen so far and the prices, whether a refresh
(`keepalive.refresh_body`: the prefix through that checkpoint with no or minimal output) is worth its cost; a
refresh restarts the entry's TTL and those of the entries it contains. A conversation entry whose request's
reply is in the trace (`response`, an Anthropic text reply) may instead be *upgraded*
(`keepalive.upgrade_body`: the reply written after it with the longest TTL offered), when the same backward
induction expects that to save more than a chain of refreshes at the entry's own TTL; the upgraded entry (the
prefix through the reply) is the one the session's next request reads. The planner's own requests are never
changed: refreshes are extra records, in time order, marked `"keepalive": true`.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from prefixgate import tokens
from prefixgate.cache_planner.keepalive import (
    Refresh,
    refresh_body,
    refresh_cost,
    reply_content,
    through,
    upgrade_body,
    upgrade_cost,
)
from prefixgate.cache_planner.lifetime import (
    HORIZON_S,
    REFRESH_MARGIN_S,
    GapBook,
    GapModel,
    Given,
    KeepAlive,
    keepalive,
    turn_context,
)
from prefixgate.cache_planner.rewrite import conversation_start
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
    reply: list | None = None  # the reply the request got (text blocks an upgrade may write after the entry)
    session: str = ""          # the session's id in the gap model (the key it was first written under)
    wanted: str = ""           # the TTL its latest request's mark asks for
    turns: int = 1             # the session's requests so far (its gap model's context: `turn_context`)


class RefreshPlanner:
    """Feed it each planned request (`after`) and ask, before each next one, for the refreshes due (`due`)."""

    def __init__(self, catalog: Catalog | None = None,
                 held: Callable[[str, str, str, float], None] | None = None) -> None:
        """`held(route, key, ttl, expires)`: told of each upgrade's entry, so the planner holds it (`held`)."""
        self.catalog = catalog or default_catalog()
        self.held = held
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
            if entry.level != "conversation" and entry.expires > now:  # a lapsed one is written again below
                self._touch(entry, now, ttl_seconds(entry.ttl))
        if not marks:
            return
        route = f"{record.tenant}/{record.route}"
        encoding = tokens.encoding_for(record.provider, record.model)
        cumulative, total = [], 0
        for _, block in flat:
            total += tokens.block_tokens(block, encoding)
            cumulative.append(total)
        reply = reply_content(record.provider, record.response)
        lead = conversation_start(conv)
        for n, index in enumerate(marks):
            level = "static" if index < lead else "conversation"
            key = keys[index]
            if level == "static":
                # The static entry on its own serves a session that starts: a request that continues one
                # ends the static entry's idle time without that (censored).
                self.gaps.observe(route, level, key, now, returned=not earlier)
            elif index == marks[-1]:
                latest = max(earlier, key=lambda e: e.tokens) if earlier else None
                turns = latest.turns + 1 if latest is not None else 1
                self.gaps.observe(route, level, key, now, latest.session if latest else None,
                                  context=turn_context(turns))
            ttl = flat[index][1].checkpoint.ttl or DEFAULT_TTL.get(record.provider, "5m")  # type: ignore[union-attr]
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = Entry(key, level, index, record, body, cumulative[index], ttl, now, now)
            elif entry.expires <= now:
                entry.ttl = ttl  # it lapsed: this request writes it anew, with its own mark's TTL
            # else a hit: it restarts the entry's own TTL, never a longer one the mark asks for
            entry.wanted = ttl
            entry.index, entry.record, entry.body, entry.last_request = index, record, body, now
            entry.holds, entry.kept, entry.session = tuple(keys[i] for i in marks[:n]), True, key
            if level == "conversation" and index == marks[-1]:
                entry.turns = turns
            entry.reply = reply if index == marks[-1] and level == "conversation" else None
            self.entries.move_to_end(key)
            self._touch(entry, now, ttl_seconds(entry.ttl))
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
            covering = self._covering(entry, at)
            if covering is not None:
                # A longer entry that holds this one is due before this one expires: its refresh (if it pays) reads
                # this one too, so decide this one after it, only if it did not.
                self._seq += 1
                heapq.heappush(self._queue, (covering, self._seq, key, version))
                continue
            line = self._decide(entry, at)
            if line is None:
                entry.kept = False
            else:
                out.append(line)
        return out

    def _covering(self, entry: Entry, at: float) -> float | None:
        """Just after when a kept entry holding `entry` is due, if that is from `at` until `entry` expires."""
        due = [other.expires - REFRESH_MARGIN_S for other in self.entries.values()
               if other is not entry and other.kept and entry.key in other.holds
               and at <= other.expires - REFRESH_MARGIN_S < entry.expires]
        return min(due) + 1e-3 if due else None

    def _touch(self, entry: Entry, now: float, ttl_s: float) -> None:
        entry.expires = max(entry.expires, now + ttl_s)
        # Unique across entries: an entry written again under the same key (a held one, each turn) must not take
        # up the queue's stale item of the one it replaced.
        self._seq += 1
        entry.version = self._seq
        heapq.heappush(self._queue, (entry.expires - REFRESH_MARGIN_S, self._seq, entry.key, entry.version))

    def _decide(self, entry: Entry, at: float) -> dict[str, Any] | None:
        record = entry.record
        if at - entry.last_request >= HORIZON_S:
            return None  # no session is expected back after a day: the model's horizon bounds every chain
        if entry.wanted and ttl_seconds(entry.wanted) > ttl_seconds(entry.ttl):
            # Its requests now mark it longer than it lives: a hit never lengthens an entry, so refreshing would
            # keep it short for good; let it lapse and the next request writes it with the longer TTL.
            return None
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
        model: GapModel | Given = self.gaps.model(f"{record.tenant}/{record.route}", entry.level)
        if entry.level == "conversation":
            model = model.given(turn_context(entry.turns), now=at)

        def decide(ttl: str, cost: Decimal) -> KeepAlive:
            return keepalive(model, idle=at - entry.last_request, expires_in=entry.expires - at,
                             ttl_s=float(ttl_seconds(ttl)), rewrite_cost=float(price.write_price(entry.ttl) * at_stake / per_m),
                             read_cost=float(price.cache_read * at_stake / per_m), refresh_cost=float(cost), now=at)

        decision = decide(entry.ttl, refresh_cost(refresh, price, entry.tokens))
        upgrade = self._upgrade(entry, rules.breakpoint_ttls, price)
        if upgrade is not None:
            long, body, extra, cost = upgrade
            better = decide(long, cost)
            if better.refresh and better.expected_saving > decision.expected_saving:
                return self._upgraded(entry, at, long, body, extra, better)
        if not decision.refresh:
            return None
        line = {**record_json(record), "t": at, "body": refresh.body, "output_tokens": refresh.output_tokens,
                "keepalive": True, "plan": [f"keepalive: refresh the {entry.level} entry ({entry.tokens} tokens, "
                                            f"ttl {entry.ttl}): {decision.reason}"]}
        line.pop("response", None)
        # The refresh reads this entry and the earlier ones its body marks.
        for key in (entry.key, *entry.holds):
            other = self.entries.get(key)
            if other is not None:
                self._touch(other, at, ttl_seconds(other.ttl))
        return line

    def _upgrade(self, entry: Entry, ttls: tuple[str, ...], price: Any) -> tuple[str, Refresh, int, Decimal] | None:
        """The upgrade of `entry` (its TTL, body, the reply's tokens, its cost as a refresh of the entry), if any.
        Its cost counts the reply at the long TTL's write price plus the next request's read of it, less the
        write at the entry's TTL that request would have paid for the reply anyway."""
        longer = [t for t in ttls if ttl_seconds(t) > ttl_seconds(entry.ttl)]
        if entry.reply is None or entry.level != "conversation" or not longer:
            return None
        long = max(longer, key=ttl_seconds)
        body = upgrade_body(entry.record.provider, _through(entry), entry.reply, long)
        if body is None:
            return None
        encoding = tokens.encoding_for(entry.record.provider, entry.record.model)
        extra = sum(tokens.count_tokens(b["text"], encoding) for b in entry.reply)
        return long, body, extra, upgrade_cost(body, price, entry.tokens, extra, entry.ttl, long)[1]

    def _upgraded(self, entry: Entry, at: float, long: str, refresh: Refresh, extra: int, decision: KeepAlive) -> dict[str, Any]:
        """Send the upgrade: the entry through the reply takes over the session (same gap-model id)."""
        conv = request_dialect(entry.record.provider, refresh.body).parse_request(refresh.body, model=entry.record.model)
        flat = conv.blocks()
        index = max(i for i, b in enumerate(flat) if b.checkpoint is not None)
        key = conv.prefix_keys()[index]
        line = {**record_json(entry.record), "t": at, "body": refresh.body, "output_tokens": refresh.output_tokens,
                "keepalive": True, "plan": [f"keepalive: upgrade the conversation entry ({entry.tokens} tokens, ttl "
                                            f"{entry.ttl}) to {long} through the reply ({extra} tokens): {decision.reason}"]}
        line.pop("response", None)
        # It reads the conversation's earlier entries, not the static prefix's (`upgrade_body` takes its marks off).
        holds = tuple(k for k in entry.holds if k in self.entries and self.entries[k].level == "conversation")
        for other_key in holds:
            self._touch(self.entries[other_key], at, ttl_seconds(self.entries[other_key].ttl))
        del self.entries[entry.key]
        if self.held is not None:
            self.held(f"{entry.record.tenant}/{entry.record.route}", key, long, at + ttl_seconds(long))
        upgraded = self.entries[key] = Entry(key, "conversation", index, entry.record, refresh.body,
                                             entry.tokens + extra, long, entry.last_request, at,
                                             holds=holds, session=entry.session, turns=entry.turns)
        self._touch(upgraded, at, ttl_seconds(long))
        return line


def _through(entry: Entry) -> dict:
    """The request body cut to what keeps `entry`: its checkpoints after the entry's block are taken off, so the
    refresh stops at it (`keepalive.refresh_body` cuts after the last checkpoint)."""
    return through(entry.record.provider, entry.body, entry.index, model=entry.record.model)
