"""Explicit breakpoints (Claude on Anthropic's API, Bedrock and Vertex): the request carries up to N
`cache_control` markers; each writes the prefix through it (billed) with a TTL, and a later request reads the
longest written prefix within a 20-position lookback of a marker. Longer TTLs must precede shorter ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixgate.cache_planner import checkpoints
from prefixgate.cache_planner.economics import Choice, expected_cost
from prefixgate.cache_planner.regimes.base import Regime
from prefixgate.ir import Checkpoint, ttl_seconds

if TYPE_CHECKING:
    from prefixgate.cache_planner.checkpoints import Candidate
    from prefixgate.cache_planner.stability import RouteState
    from prefixgate.cache_planner.target import Target
    from prefixgate.cost import Price
    from prefixgate.ir import Block, Conversation, Segment
    from prefixgate.providers.rules import AnthropicRules, Catalog, ModelRules


class Breakpoints(Regime):
    providers = ("anthropic", "bedrock")
    whole_prompt = False        # Claude caches up to its breakpoints only
    bridges = True
    holds = True                # an hour-long conversation entry is kept alive by marking it (`held`)
    caller_marks = True

    def markable(self, target: Target, seg: Segment, block: Block) -> bool:
        if target.rows_of and (seg.role in ("tools", "schema") or block.kind == "tool_call"):
            # Claude through a compatible provider's Chat Completions (OpenRouter): its markers go on message
            # content parts only; tool definitions and calls have no place for one.
            return False
        return block.kind != "thinking" and not (block.kind == "text" and not block.text)

    def adjusts(self, model: ModelRules) -> bool:
        return True

    def choose(self, target: Target, model: ModelRules, price: Price, catalog: Catalog, route: RouteState,
               cands: list[Candidate], notes: list[str]) -> list[Candidate]:
        return _choose(model, price, getattr(catalog, target.provider), route, cands, notes)

    def ttls(self, target: Target, model: ModelRules, catalog: Catalog) -> tuple[str, ...]:
        return _claude_ttls(model, getattr(catalog, target.provider))

    def warm_for(self, target: Target, catalog: Catalog, params: dict) -> tuple[str, int]:
        rules: AnthropicRules = getattr(catalog, target.provider)
        return rules.default_ttl, rules.ttls[rules.default_ttl]

    def marker_limit(self, target: Target, catalog: Catalog) -> int:
        return getattr(catalog, target.provider).max_breakpoints

    def place(self, conv: Conversation, target: Target, model: ModelRules, price: Price, catalog: Catalog,
              route: RouteState, cands: list[Candidate], flat: list, static: Candidate | None, static_key: str,
              now: float, notes: list[str]) -> dict | None:
        lines: list[str] = []
        chosen = self.choose(target, model, price, catalog, route, cands, lines)
        if flat:
            notes.extend(lines)
        for c in chosen:
            checkpoints._own(flat, c.index).checkpoint = Checkpoint(c.choice.ttl)
        return None


REGIME = Breakpoints()


def _claude_ttls(model: ModelRules, rules: AnthropicRules) -> tuple[str, ...]:
    """The cache TTLs this Claude model takes: all of Anthropic's; on Bedrock, those AWS's table lists for it."""
    return tuple(t for t in rules.ttls if t in model.breakpoint_ttls)


def _choose(model: ModelRules, price: Price, rules: AnthropicRules, route: RouteState,
            cands: list[Candidate], notes: list[str]) -> list[Candidate]:
    """Claude's breakpoints, on Anthropic's API or Bedrock (none on a model that cannot cache)."""
    ttls = _claude_ttls(model, rules)
    if not ttls:
        notes.append(f"cache: {model.id} cannot cache on {model.provider}; no checkpoint placed")
        return []
    chosen = checkpoints._decide(cands, model, price, route, ttls, notes)
    if len(chosen) < rules.max_breakpoints:
        chosen += checkpoints.split_anchor(chosen, price, route, ttls)
    held = next((c for c in chosen if c.level == "held"), None)
    if held is not None and any(
            (c.index < held.index and ttl_seconds(c.choice.ttl) < ttl_seconds(held.choice.ttl))   # a write to hold it
            or (c.index > held.index and ttl_seconds(c.choice.ttl) >= ttl_seconds(held.choice.ttl))  # a newer one
            for c in chosen if c is not held):
        chosen.remove(held)
    chosen = sorted(chosen, key=lambda c: checkpoints.PRIORITY[c.level])[: rules.max_breakpoints]
    chosen.sort(key=lambda c: c.index)
    # Longer TTLs must precede shorter ones. A shorter prefix is reused at least as often as any longer
    # one it starts, so an earlier checkpoint takes the longest TTL chosen after it, if that still pays.
    longest = {ttl: i for i, ttl in enumerate(sorted(ttls, key=ttl_seconds))}
    kept: list[Candidate] = []
    needed: str | None = None
    for c in reversed(chosen):
        ttl = c.choice.ttl
        if needed is not None and longest[needed] > longest[ttl]:
            level = "conversation" if c.level in ("lookback", "anchor") else c.level
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
