"""Why requests miss the cache, per route, and what those misses cost.

A miss is an answered request that read no cached tokens. Each miss is diagnosed against the previous
answered request of the same route and model ("consecutive requests"): the planner's own lines first
(planning off, prefix below the provider's minimum, no checkpoint that pays), then the first segment
whose hash differs (a volatile span in it, tools reordered, a changed prompt), then the gap between the
two against the checkpoint's TTL. What a miss lost is what its prefix would have cost read from cache
instead of written or sent uncached.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from prefixgate.cost import MTOK
from prefixgate.gateway.dashboard.provider_reasons import ProviderJoin, speaks
from prefixgate.gateway.pricing import price_for
from prefixgate.ir import ttl_seconds
from prefixgate.ledger import LedgerRecord
from prefixgate.policies.kinds import catalogue_provider
from prefixgate.prefix_shape import SegmentShape, first_difference, parse_shape
from prefixgate.providers.rules import Catalog
from prefixgate.usage import Usage

LABELS = {
    "volatile_span": "volatile span in the prefix",
    "below_minimum": "prefix below the provider minimum",
    "ttl_expired": "TTL expired between requests",
    "tools_reordered": "tools reordered",
    "blocks_reordered": "blocks reordered",
    "tools_changed": "tools changed",
    "prefix_changed": "prefix changed",
    "no_checkpoint": "no checkpoint placed",
    "planner_off": "planner off",
    "cold": "cold start",
    "provider": "provider reported no cache read",
}
FIXES = {
    "volatile_span": "run the route with planner mode `rewrite` (moves volatile sentences after the cached "
                     "prefix), or take the value out of the system prompt",
    "below_minimum": "grow the shared prefix past the minimum (merge instructions, tools) or accept no caching",
    "ttl_expired": "requests arrive further apart than the TTL: allow a longer TTL for this route if reuse pays",
    "tools_reordered": "serialise tools in a fixed order (the `rewrite` mode restores the first-seen order)",
    "blocks_reordered": "keep content blocks in a fixed order",
    "tools_changed": "a deploy changed the tool definitions: expected once, a problem if it repeats",
    "prefix_changed": "the system prompt changes between requests with no detected volatile span: a new "
                      "prompt version, or per-request text the detectors do not know",
    "no_checkpoint": "reuse on this route is too low for a cache write to pay; nothing to fix if that is true",
    "planner_off": "enable the planner for this route",
    "cold": "first request of this prefix: expected",
    "provider": "the prefix was unchanged and within its TTL: evicted, or served by another cache machine",
}
# The fix a reason gets when the route already runs the mode FIXES recommends: only a change is advice.
FIXES_UNDER_REWRITE = {
    "volatile_span": "the rewrite is already on and did not move this value: declare its pattern in the route's "
                     "`volatile` list, or take the value out of the system prompt",
    "tools_reordered": "the rewrite is already on: serialise tools in a fixed order (a tool set it has not seen "
                       "before is sent as it came)",
}
_MODE = re.compile(r"(?:^|;)mode=(\w+)")


def fix_for(reason: str, rec: LedgerRecord) -> str:
    """The fix for `reason`, recommending a planner mode only when it is not the one `rec` ran under."""
    mode = _MODE.search(rec.plan_summary)
    if mode is not None and mode[1] == "rewrite" and reason in FIXES_UNDER_REWRITE:
        return FIXES_UNDER_REWRITE[reason]
    return FIXES[reason]


ROLE_NAMES = {"system": "system prompt", "developer": "developer prompt", "schema": "response schema"}
DEFAULT_TTL_S = 300          # providers' default retention when the plan names no TTL
_TTL = re.compile(r"\bttl (\d+[smh])\b")


@dataclass
class Diagnosis:
    reason: str
    detail: str
    segment: SegmentShape | None = None     # first segment differing from the previous request
    previous: LedgerRecord | None = None


def is_miss(rec: LedgerRecord) -> bool:
    # A keep-alive refresh that found its prefix evicted is keep-alive's stop (its own counter), not a caller's miss.
    return not rec.kind and rec.status == 200 and rec.cache_read == 0 and rec.uncached_input + sum(rec.cache_writes.values()) > 0


def missed_usd(rec: LedgerRecord, catalog: Catalog | None = None) -> Decimal:
    """What reading the miss's prefix from cache would have saved: its cache writes repriced as reads, plus
    the uncached part of its leading prefix (tools, system) that a write did not cover."""
    usage = Usage(rec.uncached_input, rec.cache_read, dict(rec.cache_writes), rec.output)
    price = price_for(catalogue_provider(rec.provider), rec.model, usage, catalog)
    if price is None:
        return Decimal(0)
    lost = sum((n * (price.write_price(ttl) - price.cache_read) for ttl, n in rec.cache_writes.items()), Decimal(0))
    leading = sum(s.tokens for s in parse_shape(rec.segments) if s.leading)
    extra = max(0, min(rec.uncached_input, leading - sum(rec.cache_writes.values())))
    lost += extra * (price.input - price.cache_read)
    return max(Decimal(0), lost / MTOK)


def _planned_ttl_s(rec: LedgerRecord) -> int:
    ttls = [ttl_seconds(m.group(1)) for line in rec.explanation if line.startswith("checkpoint:")
            for m in [_TTL.search(line)] if m]
    return max(ttls) if ttls else DEFAULT_TTL_S


def _kinds_text(kinds: Iterable[str]) -> str:
    return ", ".join(sorted(kinds))


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}m {s:02d}s" if m else f"{s}s"


def diagnose(rec: LedgerRecord, previous: LedgerRecord | None) -> Diagnosis:
    """Why `rec` (a miss) read nothing from cache, given the route's previous answered request."""
    lines = rec.explanation
    if any(line.startswith("passthrough:") for line in lines):
        passthrough = next(line for line in lines if line.startswith("passthrough:"))
        return Diagnosis("planner_off", passthrough.split(":", 1)[1].strip(), previous=previous)
    placed = any(line.startswith("checkpoint:") for line in lines)
    below = next((line for line in lines if line.startswith("skip:") and "below" in line and "minimum" in line), None)
    if below and not placed:
        return Diagnosis("below_minimum", below.split(":", 2)[-1].strip(), previous=previous)
    if previous is None:
        return Diagnosis("cold", "no earlier request of this route and model in view")
    shape, before = parse_shape(rec.segments), parse_shape(previous.segments)
    seg = first_difference(before, shape)
    if seg is not None and (seg.leading or seg.index == 0):
        old = before[seg.index] if seg.index < len(before) else None
        where = f"{ROLE_NAMES.get(seg.role, seg.role)} (segment {seg.index}, ~{seg.tokens} tokens)"
        kinds = set(seg.kinds) | set(old.kinds if old else ())
        if old is not None and old.role == seg.role and old.set_hash == seg.set_hash:
            reason = "tools_reordered" if seg.role == "tools" else "blocks_reordered"
            return Diagnosis(reason, f"same {seg.role} blocks in a new order at {where}", seg, previous)
        if kinds:
            return Diagnosis("volatile_span", f"{_kinds_text(kinds)} in the {where} changes between requests",
                             seg, previous)
        reason = "tools_changed" if seg.role == "tools" else "prefix_changed"
        return Diagnosis(reason, f"{where} differs from the previous request", seg, previous)
    gap, ttl = rec.ts - previous.ts, _planned_ttl_s(previous)
    if gap > ttl:
        return Diagnosis("ttl_expired", f"{_duration(gap)} since the previous request, ttl {_duration(ttl)}",
                         seg, previous)
    if not placed and any(line.startswith("skip:") for line in lines):
        skip = next(line for line in lines if line.startswith("skip:"))
        return Diagnosis("no_checkpoint", skip.split(":", 2)[-1].strip(), seg, previous)
    if previous.cache_read == 0 and sum(previous.cache_writes.values()) == 0 and rec.cache_writes:
        return Diagnosis("cold", "this request wrote the prefix", seg, previous)
    return Diagnosis("provider", rec.miss_reason or "no cached prefix reported by the provider", seg, previous)


def _segment_dict(seg: SegmentShape | None) -> dict | None:
    if seg is None:
        return None
    return {"index": seg.index, "role": seg.role, "tokens": seg.tokens, "volatile_kinds": list(seg.kinds)}


@dataclass
class _Route:
    requests: int = 0
    misses: int = 0
    missed: Decimal = Decimal(0)


def misses_by_route(records: list[LedgerRecord], since: float, limit: int = 20,
                    catalog: Catalog | None = None) -> list[dict]:
    """Routes losing the most money to misses among records with ts >= since (earlier records only serve
    as the previous request of the first ones), with each route's reasons and its latest first difference."""
    previous: dict[tuple[str, str], LedgerRecord] = {}
    routes: dict[str, _Route] = {}
    reasons: dict[str, dict[str, dict]] = {}
    differences: dict[str, dict] = {}
    latest_miss: dict[str, LedgerRecord] = {}
    joins: dict[str, ProviderJoin] = {}
    for rec in records:
        chain = (rec.route, rec.model)
        before = previous.get(chain)
        # The gateway's own rows (keep-alive refreshes, abandoned attempts: the request has a record of its own) are
        # not the route's requests; a refresh still serves as the previous read of the prefix.
        if rec.ts >= since and not rec.kind:
            route = routes.setdefault(rec.route, _Route())
            route.requests += 1
            if before is not None and rec.status == 200:
                seg = first_difference(parse_shape(before.segments), parse_shape(rec.segments))
                if seg is not None:
                    differences[rec.route] = {"request_id": rec.id, "previous_id": before.id, "ts": rec.ts,
                                              "segment": _segment_dict(seg)}
            inferred = None
            if is_miss(rec):
                d = diagnose(rec, before)
                inferred = d.reason
                lost = missed_usd(rec, catalog)
                route.misses += 1
                route.missed += lost
                latest_miss[rec.route] = rec
                entry = reasons.setdefault(rec.route, {}).setdefault(
                    d.reason, {"reason": d.reason, "label": LABELS[d.reason], "fix": fix_for(d.reason, rec),
                               "count": 0, "missed_usd": Decimal(0)})
                entry["count"] += 1
                entry["missed_usd"] += lost
                entry.update(detail=d.detail, request_id=rec.id, segment=_segment_dict(d.segment))
            if speaks(rec):
                joins.setdefault(rec.route, ProviderJoin()).add(rec, inferred, catalog)
        if rec.status == 200:
            previous[chain] = rec
    out = []
    for name, route in routes.items():
        provider = joins[name].summary() if name in joins else None
        if not route.misses and provider is None:
            continue
        ranked = sorted(reasons.get(name, {}).values(), key=lambda e: (-e["missed_usd"], -e["count"]))
        for e in ranked:
            e["missed_usd"] = str(e["missed_usd"])
        last = latest_miss.get(name)
        out.append({"route": name, "requests": route.requests, "misses": route.misses,
                    "miss_rate": route.misses / route.requests, "missed_usd": str(route.missed),
                    "top_reason": ranked[0] if ranked else None, "reasons": ranked,
                    "first_difference": differences.get(name),
                    "latest_miss": {"request_id": last.id, "ts": last.ts, "model": last.model,
                                    "plan": last.explanation, "miss_reason": last.miss_reason} if last else None,
                    # The provider's own reasons (provider_reasons.py): where present they are the "why".
                    "provider": provider})
    out.sort(key=lambda r: (-Decimal(r["missed_usd"]), -r["misses"], r["route"]))
    return out[:limit]
