"""Gemini explicit caches (`cachedContents`): when one pays, what to create, and how a request uses it.

Gemini already caches implicitly, at the same discount, when a prefix comes back within a few
minutes (the simulator assumes `implicit_ttl_s`). An explicit cache earns its storage only on the
requests implicit caching would miss: those after a longer gap. Over a TTL of h hours it pays when

    reuses_per_hour * h * P(gap > implicit) * (input - cached) > storage_per_hour * h + input

per token (creating the cache bills its tokens at the input rate, on top of the requests that read it). A request that uses a cache must not also send its system instruction, tools or tool config:
they move into the cache, so the planner creates caches of exactly those.
"""

from __future__ import annotations

from prefixgate.cache_planner.reuse import ReuseStats
from prefixgate.cost import Price
from prefixgate.dialects.gemini import encode_content
from prefixgate.ir import Conversation
from prefixgate.providers.rules import GeminiRules

TOOL_CONFIG_KEYS = ("toolConfig", "tool_config")
# Evidence before spending on storage: this many reuses of the static prefix seen on the route.
MIN_REUSES = 3


def cache_pays(stats: ReuseStats, price: Price, rules: GeminiRules, ttl_s: int) -> tuple[bool, str]:
    if stats.reuses < MIN_REUSES or price.input <= 0:
        return False, f"explicit cache: not enough evidence yet ({stats.reuses:.0f} reuses)"
    hours = ttl_s / 3600
    long_gaps = 1 - stats.within[0] / stats.reuses if rules.implicit_ttl_s <= 300 else 0.0
    benefit = stats.reuses_per_hour * hours * long_gaps * float(price.input - price.cache_read)
    cost = float(price.storage_per_hour) * hours + float(price.input)
    reason = (f"{stats.reuses_per_hour:.1f} reuses/h, {long_gaps:.0%} after the implicit cache lapses: "
              f"saves ${benefit:.2f} vs ${cost:.2f} storage per MTok over {ttl_s}s")
    return benefit > cost, reason


def create_body(conv: Conversation, model: str, ttl_s: int) -> dict:
    """The `cachedContents.create` body holding the request's system instruction, tools and tool config."""
    body: dict = {"model": model if model.startswith("models/") else f"models/{model}"}
    for seg in conv.segments:
        if seg.role == "system":
            body["systemInstruction"] = encode_content(seg)
        elif seg.role == "tools":
            body["tools"] = [b.native for b in seg.blocks]
    for key in TOOL_CONFIG_KEYS:
        if key in conv.params:
            body["toolConfig"] = conv.params[key]
    body["contents"] = []
    body["ttl"] = f"{ttl_s}s"
    return body


def use_cache(conv: Conversation, name: str) -> None:
    """Send `conv` against the cache `name`: its system instruction, tools and tool config now live there."""
    conv.segments = [s for s in conv.segments if s.role not in ("system", "tools")]
    for key in TOOL_CONFIG_KEYS:
        conv.params.pop(key, None)
    conv.cache_params["cachedContent"] = name
