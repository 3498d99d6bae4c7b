"""Prices on Vertex AI: each publisher's own list price, and Claude's regional premium.

Vertex bills Claude at Anthropic's prices and Gemini at the Gemini API's (the same rows serve both), except
that Claude from Sonnet 4.5 on costs 10% more on regional and multi-region endpoints than on the global one
([vertex] in providers.toml). The endpoint is the upstream's location, which a model name does not carry,
so a regional request is priced under the name `regional/{model}` (`price_name`).
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from prefixgate.providers.rules import Catalog, ModelRules

REGIONAL = "regional/"


def price_name(model: str, location: str) -> str:
    """The name a Vertex model is priced under at `location` (`global`, a region, or `us`/`eu`)."""
    return model if location == "global" else REGIONAL + model


def publisher_of(model: str) -> str:
    """Whose price rows a Vertex model takes: Claude's are Anthropic's, the rest Google's Gemini rows."""
    return "anthropic" if model.startswith("claude") else "gemini"


def split_name(name: str) -> tuple[str, bool]:
    """(the publisher's model id without Vertex's `@date` version, whether priced on a regional endpoint)."""
    regional = name.startswith(REGIONAL)
    return name.removeprefix(REGIONAL).split("@", 1)[0], regional


def vertex_rules(rules: ModelRules, regional: bool, catalog: Catalog) -> ModelRules:
    """The publisher's rules for one Vertex model: the regional premium where it applies, and Vertex's own
    floor under Gemini's minimum cacheable prompt. Not the publisher's retirement: Anthropic's dates are its own
    platforms' and the Gemini API's are Google AI's; Vertex retires models on its own dates, not catalogued."""
    v = catalog.vertex
    rules = replace(rules, retires=None, replacement="", retires_source="")
    if rules.provider == "gemini":
        rules = replace(rules, min_cache_tokens=max(rules.min_cache_tokens, v.gemini_min_cache_tokens))
    premium = regional and rules.provider == "anthropic" and rules.id not in v.same_everywhere
    if not premium:
        return replace(rules, provider="vertex")
    factor = 1 + Decimal(v.regional_premium_percent) / 100
    note = f"Vertex regional endpoint: +{v.regional_premium_percent}% ({v.source})"
    return replace(rules, provider="vertex", periods=tuple(p.scaled(factor, note) for p in rules.periods))
