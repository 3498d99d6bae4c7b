"""The hindsight expert of the cache-lifetime benchmark: the cheapest plan of marks and refreshes for a trace
whose every future request it knows (Anthropic's cache: 5m and 1h TTLs, a hit restarts the TTL, writes 1.25x
and 2x of input, reads 0.1x).

Its choices, per request: the TTL (or none) of a checkpoint at the end of the static prefix (tools and system)
and of one at the end of the conversation, longer before shorter as the API requires; per idle gap, with
`refresh=True`: none, or a chain of refreshes of the conversation's entry (or of the static prefix's alone),
each the cheapest refresh the provider takes (`keepalive.refresh_body`), sent `REFRESH_MARGIN_S` before the
entry would expire. Over that space the plan is an exact optimum: dynamic programming along each session
(a chain of requests each continuing the previous one's conversation) over which entries are alive, with the
simulator's token counts and the model's prices. A session's static entry is counted as its own; when the
simulator finds it already written by another session the expert only pays less than it planned for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import product

from prefixgate.cache_planner.keepalive import refresh_body
from prefixgate.cache_planner.lifetime import REFRESH_MARGIN_S
from prefixgate.dialects import anthropic as an
from prefixgate.ir import Checkpoint, ttl_seconds
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.simulator import Simulator
from prefixgate.providers.trace import TraceRecord

TTLS: tuple[str | None, ...] = (None, "5m", "1h")
RANK = {None: 0, "5m": 1, "1h": 2}


@dataclass
class Step:
    record: TraceRecord
    static_at: int | None     # block index of the static prefix's last markable block
    conv_at: int | None       # block index of the conversation's last markable block
    static: int              # tokens through static_at
    total: int               # tokens through conv_at
    prev: int | None = None   # the step this one continues (its conversation entry is within lookback)
    next: int | None = None   # the step that continues this one


def _steps(records: list[TraceRecord]) -> list[Step]:
    cache = Simulator().anthropic
    steps: list[Step] = []
    by_key: dict[str, int] = {}
    for record in records:
        conv = an.parse_request(record.body)
        flat = [(seg.role, b) for seg in conv.segments for b in seg.blocks]
        lead = sum(len(seg.blocks) for seg in conv.segments if seg.role in ("tools", "system"))
        markable = [i for i, (_, b) in enumerate(flat) if b.kind != "thinking" and not (b.kind == "text" and not b.text)]
        positions = cache.layout(conv).positions
        static_at = max((i for i in markable if i < lead), default=None)
        conv_at = max((i for i in markable if i >= lead), default=None)
        step = Step(record, static_at, conv_at, positions[static_at].end if static_at is not None else 0,
                    positions[conv_at].end if conv_at is not None else 0)
        if conv_at is not None:
            for i in cache._lookback(positions, conv_at)[1:]:
                j = by_key.get(positions[i].key)
                if j is not None and steps[j].next is None:
                    step.prev, steps[j].next = j, len(steps)
                    break
            by_key[positions[conv_at].key] = len(steps)
        steps.append(step)
    return steps


def _refreshes(gap: float, ttl: str | None) -> int | None:
    """Refreshes that keep an entry of `ttl` alive over `gap`, each `REFRESH_MARGIN_S` before expiry."""
    if ttl is None:
        return None
    life = ttl_seconds(ttl)
    return 0 if gap < life else math.ceil((gap - life + 1e-6) / (life - REFRESH_MARGIN_S))


@dataclass(frozen=True)
class Decision:
    static: str | None        # the static checkpoint's TTL (when its entry is alive, any: it is read)
    conv: str | None          # the conversation checkpoint's TTL
    refreshes: int = 0        # refreshes of the conversation's entry through the gap to the session's next request
    static_alive: bool = False
    read_prev: str | None = None  # no new conversation checkpoint: one on the previous turn's end reads its entry
    cost: float = 0.0             # planned, in plain-input tokens (refreshes included)


# A route's cache as the plan leaves it: the static entry (ttl, expiry) and each open session's conversation
# entry (ttl, expiry), or None.
State = tuple[tuple[str, float] | None, tuple[tuple[int, tuple[str, float]], ...]]


def _plan_route(steps: list[Step], read: float, write: dict[str, float], minimum: int,
                refresh: bool) -> tuple[float, list[Decision]]:
    """Cheapest decisions for one route's requests (time order); cost in plain-input tokens (output left out:
    the same for every plan). Dynamic programming over the entries alive between requests."""

    def wr(tokens: int, ttl: str | None, end: int) -> float:
        return tokens * (write[ttl] if ttl is not None and end >= minimum else 1.0)

    session_of: dict[int, int] = {}
    for i, step in enumerate(steps):
        session_of[i] = session_of[step.prev] if step.prev is not None else i
    frontier: dict[State, tuple[float, tuple | None]] = {(None, ()): (0.0, None)}
    for i, step in enumerate(steps):
        t = step.record.t
        me = session_of[i]
        nxt_t = steps[i + 1].record.t if i + 1 < len(steps) else math.inf
        own_next = steps[step.next].record.t if step.next is not None else None
        prev = steps[step.prev] if step.prev is not None else None
        out: dict[State, tuple[float, tuple | None]] = {}
        for (static, convs), (so_far, back) in frontier.items():
            sessions = dict(convs)
            mine = sessions.pop(me, None)
            static_alive = static is not None and static[1] > t
            conv_alive = mine is not None and mine[1] > t and prev is not None
            for s, c in product(TTLS, TTLS):
                if s is not None and c is not None and RANK[s] < RANK[c]:
                    continue
                # A static checkpoint writes only when nothing longer is read (a conversation hit covers it).
                if (c is not None and step.conv_at is None) or (s is not None and (step.static_at is None or static_alive
                                                                                    or conv_alive)):
                    continue
                if conv_alive:
                    cost = read * prev.total + wr(step.total - prev.total, c, step.total)
                elif static_alive:
                    cost = read * step.static + wr(step.total - step.static, c, step.total)
                elif s is not None and step.static >= minimum:
                    cost = write[s] * step.static + wr(step.total - step.static, c, step.total)
                else:
                    cost = wr(step.total, c, step.total)
                if static_alive:
                    new_static = (static[0], t + ttl_seconds(static[0]))
                elif s is not None and step.static >= minimum:
                    new_static = (s, t + ttl_seconds(s))
                else:
                    new_static = None
                entry = (c, t + ttl_seconds(c)) if c is not None and step.total >= minimum else None
                decision = Decision(s, c, 0, static_alive, mine[0] if conv_alive and c is None else None, cost)
                choices = [(decision, cost, new_static, entry)]
                n = _refreshes(own_next - t, c) if refresh and entry is not None and own_next is not None else None
                if n:
                    life = ttl_seconds(c)
                    kept = new_static
                    for j in range(1, n + 1):
                        at = t + j * (life - REFRESH_MARGIN_S)
                        if kept is not None and kept[1] > at:
                            kept = (kept[0], max(kept[1], at + ttl_seconds(kept[0])))
                    choices.append((replace(decision, refreshes=n, cost=cost + n * read * step.total), cost + n * read * step.total, kept, (c, own_next + 1.0)))
                for decision, total, st, conv in choices:
                    others = dict(sessions)
                    if conv is not None and own_next is not None and conv[1] > own_next:
                        others[me] = conv
                    st = st if st is not None and st[1] > nxt_t else None
                    key: State = (st, tuple(sorted(others.items())))
                    best = out.get(key)
                    if best is None or so_far + total < best[0]:
                        out[key] = (so_far + total, (decision, back))
        frontier = out
    cost, back = min(frontier.values(), key=lambda v: v[0])
    decisions: list[Decision] = []
    while back is not None:
        decisions.append(back[0])
        back = back[1]
    return cost, decisions[::-1]


def hindsight(records: list[TraceRecord], refresh: bool) -> tuple[list[TraceRecord], float]:
    """The expert's trace (marked requests and, with `refresh`, its refresh records, in time order) and its
    planned input cost in plain-input tokens. Each (tenant, route) is planned on its own."""
    rules = resolve_model("anthropic", records[0].model)
    price = rules.price.price
    read = float(price.cache_read / price.input)
    write = {t: float(price.write_price(t) / price.input) for t in ("5m", "1h")}
    out: list[TraceRecord] = []
    planned = 0.0
    for scope in sorted({(r.tenant, r.route) for r in records}):
        steps = _steps([r for r in records if (r.tenant, r.route) == scope])
        cost, decisions = _plan_route(steps, read, write, rules.min_cache_tokens, refresh)
        planned += cost
        for step, d in zip(steps, decisions, strict=True):
            # An alive static entry is read whatever its marker says; the marker only keeps the order valid.
            conv = d.conv or d.read_prev
            static = d.static or (max(conv or "5m", "5m", key=RANK.get) if d.static_alive else conv)
            marked = _marked(step, static, d.conv, (steps[step.prev].conv_at, d.read_prev) if d.read_prev else None)
            out.append(replace(step.record, body=marked))
            if d.refreshes:
                ka = refresh_body("anthropic", marked)
                life = ttl_seconds(d.conv)
                for j in range(1, d.refreshes + 1):
                    out.append(replace(step.record, t=step.record.t + j * (life - REFRESH_MARGIN_S), body=ka.body,
                                       output_tokens=ka.output_tokens, keepalive=True))
    out.sort(key=lambda r: r.t)
    return out, planned


def _marked(step: Step, static: str | None, conv: str | None, earlier: tuple[int | None, str] | None = None) -> dict:
    body = an.parse_request(step.record.body)
    flat = [b for seg in body.segments for b in seg.blocks]
    if earlier is not None and earlier[0] is not None:
        flat[earlier[0]].checkpoint = Checkpoint(earlier[1])
    if static is not None and step.static_at is not None:
        flat[step.static_at].checkpoint = Checkpoint(static)
    if conv is not None and step.conv_at is not None:
        flat[step.conv_at].checkpoint = Checkpoint(conv)
    return an.encode_request(body)
