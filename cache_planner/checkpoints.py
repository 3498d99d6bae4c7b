"""Checkpoint placement under each provider's rules (the target's cache regime: `regimes/`).

Candidates, in priority order: the end of the static prefix (tools and system), the end of the
conversation (so the next turn reads it), bridging checkpoints where a turn appended more blocks
than Anthropic's 20-position lookback can see past, and the end of a large document in the latest
user turn. Each is kept only if its level's learned reuse pays for the write (`economics`), its
prefix reaches the model's minimum, and the regime's breakpoint budget allows; how they are written
(markers, a routing key's options, an explicit cache) is the regime's. A request whose caller placed its own markers is handled by the
route's `caller_checkpoints` policy (`caller_markers`): kept as sent, added to, or optimized.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import compress, count

from prefixgate import slices, tokens
from prefixgate.cache_planner import regimes
from prefixgate.cache_planner.caller_markers import CallerCheckpoints, caller_marks, settle_caller_marks
from prefixgate.cache_planner.carried import per_block
from prefixgate.cache_planner.economics import Choice, choose_growing_ttl, choose_ttl, split_conversation
from prefixgate.cache_planner.reuse import ReuseStats, SessionGaps, SessionReturns
from prefixgate.cache_planner.rewrite import DOCUMENT_MIN_CHARS, conversation_start
from prefixgate.cache_planner.stability import RouteState
from prefixgate.cache_planner.target import Target
from prefixgate.cost import Price
from prefixgate.ir import Block, Checkpoint, Conversation, CountedIn, MarkableFor, Segment, Step, ttl_seconds
from prefixgate.providers.rules import Catalog, ModelRules

PRIORITY = {"static": 0, "conversation": 1, "lookback": 2, "document": 3, "anchor": 4, "held": 5}
# Bridge checkpoints go this many positions apart, safely inside the 20-position lookback.
BRIDGE_STEP = 15
_CHECKPOINT, _BLOCKS = operator.attrgetter("checkpoint"), operator.attrgetter("blocks")


@dataclass
class Candidate:
    index: int
    level: str
    tokens: int               # the whole prefix through this block
    base: int = 0             # tokens of the static prefix before it (priced by its own checkpoint)
    carried: int = 0          # tokens past `base` that this request read from an earlier entry
    choice: Choice | None = None
    anchor: int | None = None  # the conversation's first new markable block after what was read (`lifetime.choose_split`)
    anchor_tokens: int = 0
    session: SessionGaps | None = None  # a conversation's own gaps so far (`reuse.SessionReturns`)


def markable(target: Target, seg: Segment, block: Block) -> bool:
    """Where a checkpoint may sit, under the target's cache regime."""
    return regimes.regime_of(target.provider).markable(target, seg, block)


@dataclass
class Placement:
    prefix_hash: str                   # the static prefix's hash, for routing affinity
    cache_create: dict | None = None   # a Gemini cachedContents.create body worth running first


def place_checkpoints(
    conv: Conversation, target: Target, model: ModelRules, catalog: Catalog, route: RouteState, now: float,
    notes: list[str], caller: CallerCheckpoints = "keep",
) -> Placement:
    """Place checkpoints (and provider cache fields) on `conv` in place."""
    flat = [(seg, block) for seg in conv.segments for block in seg.blocks]
    try:
        return _place(conv, target, model, catalog, route, now, notes, caller, flat)
    finally:
        slices.let_go(flat)     # one new pair per block: a big body's would be freed in one go (prefixgate/slices.py)


def _place(conv: Conversation, target: Target, model: ModelRules, catalog: Catalog, route: RouteState, now: float,
           notes: list[str], caller: CallerCheckpoints, flat: list[tuple[Segment, Block]]) -> Placement:
    blocks = [block for _, block in flat]
    keys = conv.prefix_keys()
    contents = conv.block_keys(blocks)
    encoding = tokens.encoding_for(target.provider, target.model)

    def add_counts(cumulative: list[int], start: int) -> None:
        total = cumulative[-1] if cumulative else 0
        for block in blocks[start:]:
            total += tokens.block_tokens(block, encoding)
            cumulative.append(total)

    cumulative = per_block(conv, Step.CUMULATIVE_TOKENS, CountedIn(encoding), contents, add_counts)
    total = cumulative[-1] if cumulative else 0
    cands = _candidates(conv, target, flat, cumulative, contents)
    static = next((c for c in cands if c.level == "static"), None)
    reused = route.reuse.observe(now, keys, {keys[c.index]: c.level for c in cands},
                                 keys[static.index] if static and route.relearned else None)
    regime = regimes.regime_of(target.provider)
    if regime.bridges:
        cands += _bridges(cands, reused, len(flat), cumulative)
    base = static.tokens if static else 0
    for c in cands:
        if c.level in ("conversation", "lookback"):
            hit = max((i for i, _ in reused if i <= c.index), default=None)
            c.base = base
            c.carried = max(cumulative[hit] - base, 0) if hit is not None else 0
            if c.level == "conversation":
                c.session = route.reuse.session(keys[c.index])
            if c.level == "conversation" and hit is not None:
                c.anchor = next((j for j in range(hit + 1, c.index) if markable(target, *flat[j])), None)
                c.anchor_tokens = cumulative[c.anchor] if c.anchor is not None else 0
    if regime.holds:
        cands += [c for c in _held(conv, route, keys, cands, cumulative, now) if all(o.index != c.index for o in cands)]
    static_key = keys[static.index] if static else (keys[0] if keys else "")
    price = model.price_for(total)
    placement = Placement(static_key)
    placed = len(blocks) - list(map(_CHECKPOINT, blocks)).count(None) + ("cache_control" in conv.params)
    if placed and regime.caller_marks:
        # The caller chose its own breakpoints: by default (`keep`) a proxy that silently moves them
        # breaks trust (and is the most reported gateway bug). Rewrites still apply either way.
        adjustable = "cache_control" not in conv.params and regime.adjusts(model)
        if caller == "keep" or not adjustable:
            notes.append(f"cache: the caller placed {placed} checkpoint(s); kept as sent")
        else:
            ours = regime.choose(target, model, price, catalog, route, cands, [])
            last_hit = max((i for i, _ in reused), default=None)
            marks = settle_caller_marks(caller, caller_marks(flat), sorted(ours, key=lambda c: PRIORITY[c.level]),
                                        cands, cumulative, route, price, regime.ttls(target, model, catalog),
                                        regime.marker_limit(target, catalog), regime.one_ttl, last_hit, notes)
            for i, (seg, block) in enumerate(flat):
                mark = Checkpoint(marks[i]) if i in marks else None
                if block.checkpoint != mark:
                    seg.own(block).checkpoint = mark
            regime.marked(conv, marks)
        return placement
    placement.cache_create = regime.place(conv, target, model, price, catalog, route, cands, flat, static, static_key,
                                          now, notes)
    if regime.holds:
        ttls = regime.ttls(target, model, catalog)
        if ttls:
            _note_held(cands, flat, route, keys, max(ttls, key=ttl_seconds), now)
    return placement


def _own(flat: list[tuple[Segment, Block]], index: int) -> Block:
    """The block at `index`, the plan's own to change (see `Conversation.draft`)."""
    seg, block = flat[index]
    mine = seg.own(block)
    flat[index] = (seg, mine)
    return mine


def _candidates(conv: Conversation, target: Target, flat: list, cumulative: list[int], contents: list[str]
                ) -> list[Candidate]:
    leading = conversation_start(conv)

    def flags(markable_at: list[bool], start: int) -> None:
        markable_at.extend(markable(target, seg, block) for seg, block in flat[start:])

    # Where a checkpoint may sit depends on the block's content and its segment's role.
    at = per_block(conv, Step.MARKABLE, MarkableFor(target.provider, bool(target.rows_of)),
                   list(zip([seg.role for seg, _ in flat], contents, strict=True)), flags)
    marks = list(compress(count(), at))
    out: list[Candidate] = []
    static = [i for i in marks if i < leading]
    if static:
        out.append(Candidate(static[-1], "static", cumulative[static[-1]]))
    users = [i for i, seg in enumerate(conv.segments) if seg.role == "user"]
    if users:
        # The latest user turn's blocks: those after every block of the segments before it.
        first = sum(map(len, map(_BLOCKS, conv.segments[:users[-1]])))
        docs = [i for i in range(first, first + len(conv.segments[users[-1]].blocks)) if at[i]
                and flat[i][1].kind in ("document", "text") and len(flat[i][1].text) >= DOCUMENT_MIN_CHARS]
        if docs and docs[-1] != len(flat) - 1:
            out.append(Candidate(docs[-1], "document", cumulative[docs[-1]]))
    if marks and marks[-1] >= leading:
        out.append(Candidate(marks[-1], "conversation", cumulative[marks[-1]]))
    return out


def _held(conv: Conversation, route: RouteState, keys: list[str], cands: list[Candidate], cumulative: list[int],
          now: float) -> list[Candidate]:
    """The session's latest hour-long entry before the conversation's end, marked again to keep it alive (`held`)."""
    end = next((c for c in cands if c.level == "conversation"), None)
    if end is None or not route.held.entries:
        return []
    found = route.held.latest(keys, conversation_start(conv), end.index, now)
    if found is None:
        return []
    index, ttl = found
    return [Candidate(index, "held", cumulative[index],
                      choice=Choice(ttl, 0.0, "the session's entry, kept alive for a later break (a hit: nothing written)"))]


def _note_held(cands: list[Candidate], flat: list[tuple[Segment, Block]], route: RouteState, keys: list[str],
               longest: str, now: float) -> None:
    """Remember the conversation's blocks marked with the longest TTL (the regime marks only candidates): their
    entries live that long from now."""
    seconds = ttl_seconds(longest)
    for c in cands:
        mark = flat[c.index][1].checkpoint
        if c.level != "static" and mark is not None and mark.ttl == longest:
            route.held.note(keys[c.index], longest, now + seconds)


def _bridges(cands: list[Candidate], reused: list[tuple[int, str]], n: int, cumulative: list[int]) -> list[Candidate]:
    end = next((c for c in cands if c.level == "conversation"), None)
    if end is None:
        return []
    last_hit = max((i for i, _ in reused if i < end.index), default=None)
    if last_hit is None or end.index - last_hit <= 20:
        return []
    points = range(last_hit + BRIDGE_STEP, end.index - 4, BRIDGE_STEP)
    return [Candidate(i, "lookback", cumulative[i]) for i in points]


def _decide(cands: list[Candidate], model: ModelRules, price: Price, route: RouteState, ttls: tuple[str, ...],
            notes: list[str]) -> list[Candidate]:
    chosen = []
    for c in cands:
        level = "conversation" if c.level == "lookback" else c.level
        if c.tokens < model.min_cache_tokens:
            notes.append(f"skip: {c.level} checkpoint: {c.tokens} tokens is below {model.id}'s minimum of {model.min_cache_tokens}")
            continue
        if c.level == "held":
            chosen.append(c)    # its choice is made: the entry's own TTL
            continue
        stats = route.reuse.level(level)
        if level == "conversation":
            c.choice = choose_growing_ttl(_returns(route, c), price, ttls, c.carried, c.tokens - c.carried - c.base,
                                          route.keepalive, route.upgrade, c.base)
        else:
            c.choice = choose_ttl(stats, price, ttls, route.keepalive and level == "static")
        if c.choice.ttl is None:
            notes.append(f"skip: {c.level} checkpoint: {c.choice.reason}")
        else:
            chosen.append(c)
    return chosen


def _returns(route: RouteState, c: Candidate) -> ReuseStats | SessionReturns:
    """The evidence a conversation checkpoint is priced with: its session's, over its route's."""
    stats = route.reuse.level("conversation")
    return SessionReturns(stats, c.session) if c.session is not None and c.session.recent else stats


def split_anchor(chosen: list[Candidate], price: Price, route: RouteState, ttls: tuple[str, ...]) -> list[Candidate]:
    """A long-lived checkpoint on the conversation's first new block when `split_conversation` expects it cheaper."""
    end = next((c for c in chosen if c.level == "conversation" and c.anchor is not None), None)
    if end is None or route.upgrade:
        # An upgrade through the reply keeps the whole prefix through a break for one read of it, paid only when
        # the session is away; a long-lived anchor pays its premium every turn and keeps only its part.
        return []
    split = split_conversation(_returns(route, end), price, ttls, end.base, end.carried,
                               end.anchor_tokens, end.tokens, route.keepalive, route.upgrade)
    if split.anchor is None or split.end is None:
        return []
    end.choice = Choice(split.end, split.expected_cost, split.reason)
    return [Candidate(end.anchor, "anchor", end.anchor_tokens, end.base, end.carried,
                      Choice(split.anchor, split.expected_cost, split.reason))]
