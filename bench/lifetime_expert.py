"""The hindsight expert of the cache-lifetime benchmark: the cheapest plan of marks and refreshes for a trace
whose every future request it knows (Anthropic's cache: 5m and 1h TTLs, a hit restarts the TTL, writes 1.25x
and 2x of input, reads 0.1x).

Its choices, per request: the TTL (or none) of a checkpoint at the end of the static prefix (tools and system)
and of one at the end of the conversation, longer before shorter as the API requires; per idle gap, with
`refresh=True`: none, or a chain of refreshes of the conversation's entry (or of the static prefix's alone),
each the cheapest refresh the provider takes (`keepalive.refresh_body`), sent `REFRESH_MARGIN_S` before the
entry would expire, or, where the trace has the request's reply, one upgrade (`keepalive.upgrade_body`: the
reply written after the 5m conversation entry with a 1h mark) then refreshes of that hour-long entry. Over that space the plan is an exact optimum: dynamic programming along each session
(a chain of requests each continuing the previous one's conversation) over which entries are alive, with the
simulator's token counts and the model's prices. A session's static entry is counted as its own; when the
simulator finds it already written by another session the expert only pays less than it planned for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import product

from prefixgate.cache_planner.keepalive import FILLER, refresh_body, reply_content, upgrade_body
from prefixgate.cache_planner.lifetime import REFRESH_MARGIN_S
from prefixgate.dialects import anthropic as an
from prefixgate.ir import Checkpoint, ttl_seconds
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.trace import TraceRecord
from prefixgate.simulation.simulator import Simulator

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
    anchor_at: int | None = None  # the first markable block after the previous step's conversation end
    anchor: int = 0           # tokens through anchor_at
    reads_anchor: bool = False  # the next step's conversation checkpoint looks back as far as anchor_at
    reply: list | None = None   # the reply's blocks, when the trace has them and an upgrade may re-send them
    filler: int = 0             # tokens of an upgrade's filler turn (uncached)


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
                    positions[conv_at].end if conv_at is not None else 0,
                    reply=reply_content(record.provider, record.response))
        if step.reply is not None:
            ask = {**record.body, "messages": [*record.body["messages"], {"role": "assistant", "content": step.reply},
                                               {"role": "user", "content": FILLER}]}
            laid = cache.layout(an.parse_request(ask)).positions
            step.filler = laid[-1].end - laid[-2].end
        if conv_at is not None:
            back = cache._lookback(positions, conv_at)
            for i in back[1:]:
                j = by_key.get(positions[i].key)
                if j is not None and steps[j].next is None:
                    step.prev, steps[j].next = j, len(steps)
                    prev = steps[j]
                    prev.reads_anchor = prev.anchor_at is not None and prev.anchor_at in back
                    step.anchor_at = next((k for k in markable if i < k < conv_at), None)
                    step.anchor = positions[step.anchor_at].end if step.anchor_at is not None else 0
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
    refreshes: int = 0        # refreshes through the gap to the session's next request
    anchor: str | None = None  # a longer TTL on the first new block (the conversation's end keeps `conv`)
    refresh_anchor: bool = False  # the refreshes keep the anchor's entry (else the conversation's)
    static_alive: bool = False
    read_prev: str | None = None  # no new conversation checkpoint: one on the previous step's entry reads it
    read_anchor: bool = False     # ... on its anchor (else on its conversation end)
    cost: float = 0.0             # planned, in plain-input tokens (refreshes included)
    upgrade: bool = False         # through the gap: an upgrade, then `refreshes` of the upgraded entry
    read_reply: bool = False      # the previous step's upgrade is read: through this step's anchor (its reply)


# A route's cache as the plan leaves it: the static entry (ttl, expiry), and for each open session its
# conversation entry and anchor entry (ttl, expiry) or None.
Entry = tuple[str, float] | None
State = tuple[Entry, tuple[tuple[int, tuple[Entry, Entry]], ...]]


def _kept(entry: Entry, times: list[float]) -> Entry:
    """`entry` after refreshes at `times` that read it while it is alive."""
    if entry is None:
        return None
    ttl, expires = entry
    for at in times:
        if expires > at:
            expires = max(expires, at + ttl_seconds(ttl))
    return ttl, expires


def _plan_route(steps: list[Step], read: float, write: dict[str, float], minimum: int,
                refresh: bool) -> tuple[float, list[Decision]]:
    """Cheapest decisions for one route's requests (time order); cost in plain-input tokens (output left out:
    the same for every plan). Dynamic programming over the entries alive between requests."""

    def writes(marks: list[tuple[int, str | None]], covered: int, end: int) -> float:
        """Writes from `covered` through each (tokens, ttl) mark in order, and the rest uncached, as the API bills."""
        cost, cur = 0.0, covered
        for tokens, ttl in marks:
            if ttl is not None and tokens > cur and tokens >= minimum:
                cost, cur = cost + (tokens - cur) * write[ttl], tokens
        return cost + (end - cur)

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
        anchors = TTLS if step.anchor_at is not None else (None,)
        out: dict[State, tuple[float, tuple | None]] = {}
        for (static, convs), (so_far, back) in frontier.items():
            sessions = dict(convs)
            conv_e, anchor_e = sessions.pop(me, (None, None))
            static_alive = static is not None and static[1] > t
            conv_alive = prev is not None and conv_e is not None and conv_e[1] > t
            anchor_alive = (not conv_alive and prev is not None and prev.reads_anchor and anchor_e is not None
                            and anchor_e[1] > t)
            upgraded = conv_alive and len(conv_e) > 2   # type: ignore[arg-type]
            if upgraded:
                covered, held = step.anchor, conv_e
            elif conv_alive:
                covered, held = prev.total, conv_e
            elif anchor_alive:
                covered, held = prev.anchor, anchor_e
            elif static_alive:
                covered, held = step.static, None
            else:
                covered, held = 0, None
            for s, a, c in product(TTLS, anchors, TTLS):
                if a is not None and (c is None or RANK[a] <= RANK[c]):
                    continue
                if s is not None and (RANK[s] < RANK[a or c] or covered or step.static_at is None):
                    continue  # a static checkpoint writes only when nothing longer is read
                if c is not None and step.conv_at is None:
                    continue
                marks = [(step.static, s), (step.anchor, a), (step.total, c)] if a else [(step.static, s), (step.total, c)]
                cost = read * covered + writes(marks, covered, step.total)
                if static_alive:
                    new_static: Entry = (static[0], t + ttl_seconds(static[0]))
                elif s is not None and not covered and step.static >= minimum:
                    new_static = (s, t + ttl_seconds(s))
                else:
                    new_static = None
                conv_new: Entry = (c, t + ttl_seconds(c)) if c is not None and step.total >= minimum else None
                anchor_new: Entry = (a, t + ttl_seconds(a)) if a is not None and step.anchor >= minimum else None
                decision = Decision(s, c, 0, a, False, static_alive, held[0] if held and c is None else None,
                                    anchor_alive, cost, read_reply=upgraded)
                choices = [(decision, cost, new_static, conv_new, anchor_new)]
                if refresh and own_next is not None:
                    for which, entry, tokens in (("conv", conv_new, step.total), ("anchor", anchor_new, step.anchor)):
                        n = _refreshes(own_next - t, entry[0]) if entry is not None else None
                        if not n:
                            continue
                        life = ttl_seconds(entry[0])
                        times = [t + j * (life - REFRESH_MARGIN_S) for j in range(1, n + 1)]
                        extra = n * read * tokens
                        kept_conv = (c, own_next + 1.0) if which == "conv" else conv_new
                        kept_anchor = _kept(anchor_new, times) if which == "conv" else (a, own_next + 1.0)
                        choices.append((replace(decision, refreshes=n, refresh_anchor=which == "anchor", cost=cost + extra),
                                        cost + extra, _kept(new_static, times), kept_conv, kept_anchor))
                    nxt = steps[step.next] if step.next is not None else None
                    if (step.reply is not None and nxt is not None and nxt.anchor_at is not None and a is None
                            and conv_new is not None and conv_new[0] == "5m" and own_next - t >= ttl_seconds("5m")):
                        # The upgrade reads the conversation, writes the reply for an hour (through the next
                        # step's first new block), and leaves the static entry to itself.
                        at = t + ttl_seconds("5m") - REFRESH_MARGIN_S
                        n = _refreshes(own_next - at, "1h") or 0
                        extra = (read * step.total + write["1h"] * (nxt.anchor - step.total) + step.filler
                                 + n * (read * nxt.anchor + step.filler))
                        choices.append((replace(decision, refreshes=n, upgrade=True, cost=cost + extra), cost + extra,
                                        new_static, ("1h", own_next + 1.0, "up"), None))
                for decision, total, st, conv, anchor in choices:
                    others = dict(sessions)
                    alive = [e if e is not None and own_next is not None and e[1] > own_next else None
                             for e in (conv, anchor)]
                    if any(alive):
                        others[me] = (alive[0], alive[1])
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
            prev = steps[step.prev] if step.prev is not None else None
            reading = None
            if d.read_prev and prev is not None:
                reading = (prev.anchor_at if d.read_anchor else prev.conv_at, d.read_prev)
            # An alive static entry is read whatever its marker says; the marker only keeps the order valid.
            if d.read_reply:
                reading = (step.anchor_at, "1h") if d.read_prev else None
            longest = max((x for x in (d.anchor, d.conv, d.read_prev, "5m") if x), key=RANK.get)
            static = d.static or (longest if d.static_alive else d.anchor or d.conv)
            marks = {step.static_at: static, step.anchor_at: d.anchor, step.conv_at: d.conv}
            if reading is not None:
                marks[reading[0]] = reading[1]
            marked = _marked(step, marks)
            out.append(replace(step.record, body=marked))
            if d.upgrade:
                up = upgrade_body("anthropic", marked, step.reply or [], "1h")
                assert up is not None, "an upgrade the expert planned cannot be sent"
                at = step.record.t + ttl_seconds("5m") - REFRESH_MARGIN_S
                out.append(replace(step.record, t=at, body=up.body, output_tokens=up.output_tokens, keepalive=True,
                                   response=None))
                ka = refresh_body("anthropic", up.body)
                for j in range(1, d.refreshes + 1):
                    out.append(replace(step.record, t=at + j * (ttl_seconds("1h") - REFRESH_MARGIN_S), body=ka.body,
                                       output_tokens=ka.output_tokens, keepalive=True, response=None))
            elif d.refreshes:
                source = _marked(step, {**marks, step.conv_at: None}) if d.refresh_anchor else marked
                ka = refresh_body("anthropic", source)
                life = ttl_seconds(d.anchor if d.refresh_anchor else d.conv)
                for j in range(1, d.refreshes + 1):
                    out.append(replace(step.record, t=step.record.t + j * (life - REFRESH_MARGIN_S), body=ka.body,
                                       output_tokens=ka.output_tokens, keepalive=True))
    out.sort(key=lambda r: r.t)
    return out, planned


def _marked(step: Step, marks: dict[int | None, str | None]) -> dict:
    body = an.parse_request(step.record.body)
    flat = [b for seg in body.segments for b in seg.blocks]
    for index, ttl in marks.items():
        if index is not None and ttl is not None:
            flat[index].checkpoint = Checkpoint(ttl)
    return an.encode_request(body)
