"""OpenAI's `prompt_cache_retention` for a Responses request, by expected reuse.

Both retentions are free to write and read at the same cached rate, so the choice is about hits:
in-memory entries are gone after minutes idle (the catalog's `in_memory_idle_s`), extended (`24h`) ones
last a day. Extended retention never loses a hit, so the planner asks for it when the route's prefixes
come back after the in-memory window (the org's default is `in_memory` for zero-data-retention orgs and
may change); otherwise it leaves the field to the caller's org default rather than send a choice that
buys nothing. It never forces `in_memory`: that can only lose hits, and orgs that need it set it themselves.
"""

from __future__ import annotations

from prefixgate.cache_planner.stability import RouteState
from prefixgate.ir import Conversation
from prefixgate.providers.rules import ModelRules, OpenAIRules

# Extra probability of a hit from the longer retention that makes it worth asking for.
MIN_GAIN = 0.05
EXTENDED_S = 86400.0


def choose_retention(conv: Conversation, model: ModelRules, rules: OpenAIRules, route: RouteState,
                     notes: list[str]) -> None:
    """Set `prompt_cache_retention` on `conv` when extended retention adds hits."""
    if "prompt_cache_retention" in conv.params:
        notes.append(f"cache: prompt_cache_retention {conv.params['prompt_cache_retention']!r} kept as sent")
        return
    if model.regime != "implicit" or "24h" not in model.retention or len(model.retention) < 2:
        return
    stats = route.reuse.level("static")
    window = rules.in_memory_idle_s
    soon, later = stats.p_within(window), stats.p_within(EXTENDED_S)
    if later - soon >= MIN_GAIN:
        conv.cache_params["prompt_cache_retention"] = "24h"
        notes.append(f"cache: retention 24h: P(prefix reused within a day) {later:.2f} vs {soon:.2f} within the "
                     f"{window // 60}-minute in-memory window")
    elif stats.reuses:
        notes.append(f"cache: retention left to the org default: reuse comes within {window // 60} minutes "
                     f"(P {soon:.2f} of {later:.2f}), a day's retention would add no hits")
    else:
        notes.append("cache: retention left to the org default: no reuse seen on this route yet")
