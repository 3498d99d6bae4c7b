"""Cache regimes: how a family of providers caches a prompt prefix, as the planner places checkpoints for it.

`checkpoints.place_checkpoints` finds the candidates (the static prefix's end, the conversation's, a large
document) and learns their reuse; the target's regime says where a marker may sit, which candidates pay and how
they are written. One module per regime:

- `breakpoints`: explicit breakpoints the request carries (Claude on Anthropic's API, Bedrock and Vertex);
- `prefix_routing`: automatic prefix caching steered by a routing key, with explicit breakpoints on the models
  that take them (OpenAI, Azure OpenAI and the OpenAI-compatible hosted providers);
- `implicit`: implicit prefix caching, plus an explicit cache where one pays (Gemini);
- `local`: the self-hosted engine, which caches every shared prefix block by itself.

A new regime is one module here (a `Regime` subclass listed in `REGIMES`) plus its providers' catalogue rows.
"""

from __future__ import annotations

from prefixgate.cache_planner.regimes import breakpoints, implicit, local, prefix_routing
from prefixgate.cache_planner.regimes.base import Regime

REGIMES: tuple[Regime, ...] = (breakpoints.REGIME, prefix_routing.REGIME, implicit.REGIME, local.REGIME)
_BY_PROVIDER = {provider: regime for regime in REGIMES for provider in regime.providers}


def regime_of(provider: str) -> Regime:
    """The regime a planner provider caches under."""
    return _BY_PROVIDER[provider]
