"""Checkpoint placement under each provider's rules.

Candidates, in priority order: the end of the static prefix (tools and system), the end of the
conversation (so the next turn reads it), bridging checkpoints where a turn appended more blocks
than Anthropic's 20-position lookback can see past, and the end of a large document in the latest
user turn. Each is kept only if its level's learned reuse pays for the write (`economics`), its
prefix reaches the model's minimum, and the provider's breakpoint budget allows; Anthropic's
1h-before-5m ordering is enforced. A request whose caller placed its own markers is handled by the
route's `caller_checkpoints` policy (`caller_markers`): kept as sent, added to, or optimized.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import compress, count

from prefixgate import tokens
from prefixgate.cache_planner.caller_markers import CallerCheckpoints, caller_marks, settle_caller_marks
from prefixgate.cache_planner.carried import per_block
from prefixgate.cache_planner.economics import Choice, choose_growing_ttl, choose_ttl, expected_cost
from prefixgate.cache_planner.explicit_cache import cache_pays, create_body, use_cache
from prefixgate.cache_planner.retention import choose_retention
from prefixgate.cache_planner.rewrite import DOCUMENT_MIN_CHARS, SYSTEM_ROLES
from prefixgate.cache_planner.stability import RouteState
from prefixgate.cache_planner.target import CLAUDE_CACHES, Target
from prefixgate.cost import Price
from prefixgate.ir import Block, Checkpoint, Conversation, CountedIn, MarkableFor, Segment, Step, ttl_seconds
from prefixgate.providers.rules import AnthropicRules, Catalog, ModelRules

PRIORITY = {"static": 0, "conversation": 1, "lookback": 2, "document": 3}
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


def markable(target: Target, seg: Segment, block: Block) -> bool:
    """Where a checkpoint may sit. For Gemini no marker is written, but the same positions are
    tracked for reuse (and bound an explicit cache)."""
    if target.provider == "gemini":
        return True
    if target.provider in CLAUDE_CACHES:
        if target.rows_of and (seg.role in ("tools", "schema") or block.kind == "tool_call"):
            # Claude through a compatible provider's Chat Completions (OpenRouter): its markers go on message
            # content parts only; tool definitions and calls have no place for one.
            return False
        return block.kind != "thinking" and not (block.kind == "text" and not block.text)
    if target.provider == "openai":
        return seg.role not in ("assistant", "tools", "schema") and block.kind in ("text", "image", "audio", "file", "tool_result")
    return False


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
    if target.provider in CLAUDE_CACHES:
        cands += _bridges(cands, reused, len(flat), cumulative)
    base = static.tokens if static else 0
    for c in cands:
        if c.level in ("conversation", "lookback"):
            hit = max((i for i, _ in reused if i <= c.index), default=None)
            c.base = base
            c.carried = max(cumulative[hit] - base, 0) if hit is not None else 0
    static_key = keys[static.index] if static else (keys[0] if keys else "")
    price = model.price_for(total)
    placement = Placement(static_key)
    placed = len(blocks) - list(map(_CHECKPOINT, blocks)).count(None) + ("cache_control" in conv.params)
    if placed and target.provider in (*CLAUDE_CACHES, "openai"):
        # The caller chose its own breakpoints: by default (`keep`) a proxy that silently moves them
        # breaks trust (and is the most reported gateway bug). Rewrites still apply either way.
        adjustable = "cache_control" not in conv.params and (target.provider in CLAUDE_CACHES or model.regime == "breakpoints")
        if caller == "keep" or not adjustable:
            notes.append(f"cache: the caller placed {placed} checkpoint(s); kept as sent")
        else:
            ours = _choose(conv, target, model, price, catalog, route, cands, [], notes)
            ttls = _claude_ttls(model, getattr(catalog, target.provider)) if target.provider in CLAUDE_CACHES \
                else model.breakpoint_ttls
            last_hit = max((i for i, _ in reused), default=None)
            marks = settle_caller_marks(caller, caller_marks(flat), sorted(ours, key=lambda c: PRIORITY[c.level]),
                                        cands, cumulative, route, price, ttls, _marker_limit(target, catalog),
                                        target.provider == "openai", last_hit, notes)
            for i, (seg, block) in enumerate(flat):
                mark = Checkpoint(marks[i]) if i in marks else None
                if block.checkpoint != mark:
                    seg.own(block).checkpoint = mark
            if target.provider == "openai" and marks:
                ttl = next(iter(marks.values()))
                conv.cache_params["prompt_cache_options"] = {**(conv.params.get("prompt_cache_options") or {}),
                                                             "mode": "explicit", "ttl": ttl}
        return placement
    if target.provider in CLAUDE_CACHES:
        chosen = _choose(conv, target, model, price, catalog, route, cands, flat, notes)
        for c in chosen:
            _own(flat, c.index).checkpoint = Checkpoint(c.choice.ttl)
    elif target.provider == "openai":
        _place_openai(conv, model, price, route, cands, flat, notes)
        if conv.dialect == "responses":
            choose_retention(conv, model, catalog.openai, route, notes)
    else:
        placement.cache_create = _place_gemini(conv, model, price, catalog, route, static, static_key, now, notes)
    return placement


def _own(flat: list[tuple[Segment, Block]], index: int) -> Block:
    """The block at `index`, the plan's own to change (see `Conversation.draft`)."""
    seg, block = flat[index]
    mine = seg.own(block)
    flat[index] = (seg, mine)
    return mine


def _candidates(conv: Conversation, target: Target, flat: list, cumulative: list[int], contents: list[str]
                ) -> list[Candidate]:
    leading = 0
    for seg in conv.segments:
        if seg.role not in (*SYSTEM_ROLES, "tools", "schema"):
            break
        leading += len(seg.blocks)

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
        stats = route.reuse.level(level)
        if level == "conversation":
            c.choice = choose_growing_ttl(stats, price, ttls, c.carried, c.tokens - c.carried - c.base)
        else:
            c.choice = choose_ttl(stats, price, ttls)
        if c.choice.ttl is None:
            notes.append(f"skip: {c.level} checkpoint: {c.choice.reason}")
        else:
            chosen.append(c)
    return chosen


def _marker_limit(target: Target, catalog: Catalog) -> int:
    if target.provider in CLAUDE_CACHES:
        return getattr(catalog, target.provider).max_breakpoints
    return catalog.openai.max_breakpoint_writes


def _choose(conv: Conversation, target: Target, model: ModelRules, price: Price, catalog: Catalog, route: RouteState,
            cands: list[Candidate], flat: list, notes: list[str]) -> list[Candidate]:
    """The planner's own placement, as if the caller had placed none (in index order, TTLs final).
    Explanation lines are added only when `flat` is given (the placement is then written)."""
    lines: list[str] = []
    if target.provider in CLAUDE_CACHES:
        chosen = _choose_anthropic(model, price, getattr(catalog, target.provider), route, cands, lines)
    else:
        chosen = _choose_openai(model, price, route, cands, lines)
    if flat:
        notes.extend(lines)
    return chosen


def _claude_ttls(model: ModelRules, rules: AnthropicRules) -> tuple[str, ...]:
    """The cache TTLs this Claude model takes: all of Anthropic's; on Bedrock, those AWS's table lists for it."""
    return tuple(t for t in rules.ttls if t in model.breakpoint_ttls)


def _choose_anthropic(model: ModelRules, price: Price, rules: AnthropicRules, route: RouteState,
                      cands: list[Candidate], notes: list[str]) -> list[Candidate]:
    """Claude's breakpoints, on Anthropic's API or Bedrock (none on a model that cannot cache)."""
    ttls = _claude_ttls(model, rules)
    if not ttls:
        notes.append(f"cache: {model.id} cannot cache on {model.provider}; no checkpoint placed")
        return []
    chosen = _decide(cands, model, price, route, ttls, notes)
    chosen = sorted(chosen, key=lambda c: PRIORITY[c.level])[: rules.max_breakpoints]
    chosen.sort(key=lambda c: c.index)
    # Longer TTLs must precede shorter ones. A shorter prefix is reused at least as often as any longer
    # one it starts, so an earlier checkpoint takes the longest TTL chosen after it, if that still pays.
    longest = {ttl: i for i, ttl in enumerate(sorted(ttls, key=ttl_seconds))}
    kept: list[Candidate] = []
    needed: str | None = None
    for c in reversed(chosen):
        ttl = c.choice.ttl
        if needed is not None and longest[needed] > longest[ttl]:
            level = "conversation" if c.level == "lookback" else c.level
            if expected_cost(route.reuse.level(level), price, needed) >= 1.0:
                notes.append(f"skip: {c.level} checkpoint: would need ttl {needed} to precede a longer-lived one, which does not pay")
                continue
            ttl = needed
        needed = ttl if needed is None or longest[ttl] > longest[needed] else needed
        c.choice = Choice(ttl, c.choice.expected_cost, c.choice.reason)
        kept.append(c)
    for c in reversed(kept):
        notes.append(f"checkpoint: {c.level} at {c.tokens} tokens, ttl {c.choice.ttl} ({c.choice.reason})")
    return kept[::-1]


def _choose_openai(model: ModelRules, price: Price, route: RouteState, cands: list[Candidate],
                   notes: list[str]) -> list[Candidate]:
    chosen = _decide(cands, model, price, route, model.breakpoint_ttls, notes)
    chosen = sorted(chosen, key=lambda c: PRIORITY[c.level])[:4]
    # One TTL per request: the static level's choice, else the first chosen.
    ttl = chosen[0].choice.ttl if chosen else None
    for c in chosen:
        c.choice = Choice(ttl, c.choice.expected_cost, c.choice.reason)
        notes.append(f"checkpoint: {c.level} at {c.tokens} tokens, ttl {ttl} ({c.choice.reason})")
    return sorted(chosen, key=lambda c: c.index)


def _place_openai(conv: Conversation, model: ModelRules, price: Price, route: RouteState, cands: list[Candidate],
                  flat: list, notes: list[str]) -> None:
    if model.regime == "breakpoints":
        chosen = _choose_openai(model, price, route, cands, notes)
        ttl = chosen[0].choice.ttl if chosen else None
        for c in chosen:
            _own(flat, c.index).checkpoint = Checkpoint(ttl)
        conv.cache_params["prompt_cache_options"] = {"mode": "explicit", "ttl": ttl} if ttl else {"mode": "explicit"}
        if not chosen:
            notes.append("cache: explicit mode with no breakpoints: nothing on this route is reused enough to pay for writes")


def _place_gemini(conv: Conversation, model: ModelRules, price: Price, catalog: Catalog, route: RouteState,
                  static: Candidate | None, static_key: str, now: float, notes: list[str]) -> dict | None:
    implicit = f"cache: gemini caches implicitly; the static prefix is {static.tokens if static else 0} tokens"
    if "cachedContent" in conv.params:
        notes.append("cache: the caller manages an explicit cache (cachedContent); left as sent")
        return None
    if conv.dialect == "interactions":
        notes.append(f"{implicit} (the Interactions API caches implicitly only: a stable prefix is the lever)")
        return None
    if static is None or static.tokens < model.min_cache_tokens or price.storage_per_hour <= 0:
        notes.append(implicit)
        return None
    ttl_s = catalog.gemini.default_explicit_ttl_s
    live = route.explicit.get(static_key)
    if live is not None and live[1] > now + 60:
        use_cache(conv, live[0])
        notes.append(f"cache: using explicit cache {live[0]} for the system instruction and tools")
        return None
    pays, reason = cache_pays(route.reuse.level("static"), price, catalog.gemini, ttl_s)
    if not pays:
        notes.append(f"{implicit}; {reason}")
        return None
    notes.append(f"cache: create an explicit cache of the system instruction and tools ({reason})")
    return create_body(conv, model.id, ttl_s)
