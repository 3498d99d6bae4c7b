"""Implicit prefix caching (Gemini; DeepSeek's disk cache works alike): the provider caches prompts by itself and
a stable prefix is the lever; no marker is written, but the same positions are tracked for reuse. Where a
static prefix is reused enough to pay for storage, an explicit cache (`cachedContents`) is created for it first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixgate.cache_planner.explicit_cache import cache_pays, create_body, use_cache
from prefixgate.cache_planner.regimes.base import Regime

if TYPE_CHECKING:
    from prefixgate.cache_planner.checkpoints import Candidate
    from prefixgate.cache_planner.stability import RouteState
    from prefixgate.cache_planner.target import Target
    from prefixgate.cost import Price
    from prefixgate.ir import Block, Conversation, Segment
    from prefixgate.providers.rules import Catalog, ModelRules


class Implicit(Regime):
    providers = ("gemini",)

    def markable(self, target: Target, seg: Segment, block: Block) -> bool:
        return True     # tracked for reuse (and to bound an explicit cache), never written

    def warm_for(self, target: Target, catalog: Catalog, params: dict) -> tuple[str, int]:
        return "5m", catalog.gemini.implicit_ttl_s

    def place(self, conv: Conversation, target: Target, model: ModelRules, price: Price, catalog: Catalog,
              route: RouteState, cands: list[Candidate], flat: list, static: Candidate | None, static_key: str,
              now: float, notes: list[str]) -> dict | None:
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


REGIME = Implicit()
