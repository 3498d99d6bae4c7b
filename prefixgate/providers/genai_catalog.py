"""Prices from pydantic's genai-prices (a pinned dependency; its bundled data only, never fetched).

genai-prices keeps dated, sourced prices with long-context tiers and time-of-day variants for most hosted
models; prefixgate's own catalogue (providers.toml) keeps only what it lacks: caching rules, rows it does not
have, and overrides. This module turns one genai-prices model into prefixgate's price periods.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from importlib.metadata import version
from typing import Any

from genai_prices import data_snapshot, types

from prefixgate.cost import Price
from prefixgate.providers.schedule import PricePeriod, PriceSpec

VERSION = version("genai-prices")
AS_OF = "2026-11"  # release month of the pinned version (pyproject.toml), the date its rows were checked
# Our provider names -> genai-prices provider ids (Vertex prices are derived from these: vertex_prices.py).
PROVIDER_IDS = {
    "anthropic": "anthropic", "openai": "openai", "gemini": "google", "bedrock": "aws", "deepseek": "deepseek",
    "azure": "azure", "xai": "x-ai", "mistral": "mistral", "groq": "groq", "fireworks": "fireworks",
    "openrouter": "openrouter", "together": "together",
}


@dataclass(frozen=True)
class Found:
    provider_id: str
    model_id: str
    periods: tuple[PricePeriod, ...]


def ref_for(provider: str, model_id: str, ref: str = "") -> tuple[str, str] | None:
    """(genai-prices provider id, model ref) for one of our rows: `ref` is "provider:model" when the ids differ."""
    if ref:
        gp, _, name = ref.partition(":")
        return gp, name
    gp = PROVIDER_IDS.get(provider)
    return (gp, model_id) if gp else None


@lru_cache(maxsize=1)
def _providers() -> dict[str, types.Provider]:
    return {p.id: p for p in data_snapshot.get_snapshot().providers}


def lookup(gp: str, name: str, write_ttl: str) -> Found | None:
    """The model's periods, its cache_write priced as `write_ttl` (Claude "5m", OpenAI 5.6+ "30m") and its
    1h writes as "1h"; None when genai-prices does not know the model under that provider."""
    provider = _providers().get(gp)
    if provider is None:
        return None
    model = next((m for m in provider.models if m.id == name), None) or provider.find_model(name)
    if model is None:
        return None
    source = f"https://github.com/pydantic/genai-prices/blob/v{VERSION}/prices/providers/{gp}.yml"
    note = f"genai-prices {VERSION}: {gp}/{model.id}"
    entries = model.prices if isinstance(model.prices, list) else [types.ConditionalPrice(prices=model.prices)]
    periods = []
    for entry in entries:
        since = hours = None
        if isinstance(entry.constraint, types.StartDateConstraint):
            since = entry.constraint.start_date
        elif isinstance(entry.constraint, types.TimeOfDateConstraint):
            hours = (_utc(entry.constraint.start_time), _utc(entry.constraint.end_time))
        base, tiers = _rows(entry.prices, write_ttl, source, note)
        periods.append(PricePeriod(base, tiers, since, hours))
    return Found(gp, model.id, tuple(periods))


def _utc(t: Any) -> Any:
    return t.replace(tzinfo=None)  # genai-prices times are UTC; ours compare naive UTC times


_FIELDS = {"input": "input_mtok", "output": "output_mtok", "cache_read": "cache_read_mtok",
           "write": "cache_write_mtok", "write_1h": "cache_write_1h_mtok"}


def _rows(prices: types.ModelPrice, write_ttl: str, source: str, note: str) -> tuple[PriceSpec, tuple[PriceSpec, ...]]:
    values = {k: getattr(prices, f) for k, f in _FIELDS.items()}
    starts = sorted({t.start for v in values.values() if isinstance(v, types.TieredPrices) for t in v.tiers})

    def at(start: int) -> PriceSpec:
        chosen = {k: _tier_value(v, start) for k, v in values.items()}
        inp = chosen["input"] or Decimal(0)
        writes = {ttl: chosen[k] for ttl, k in ((write_ttl, "write"), ("1h", "write_1h")) if chosen[k] is not None}
        price = Price(input=inp, output=chosen["output"] or Decimal(0),
                      cache_read=chosen["cache_read"] if chosen["cache_read"] is not None else inp, cache_write=writes,
                      web_search_per_k=getattr(prices, "web_searches_kcount", None) or Decimal(0))
        return PriceSpec(price, source, AS_OF, note, start)

    return at(0), tuple(at(s) for s in starts)


def _tier_value(value: Decimal | types.TieredPrices | None, start: int) -> Decimal | None:
    """The field's price for prompts above `start` (0: the base)."""
    if not isinstance(value, types.TieredPrices):
        return value
    chosen = value.base
    for tier in value.tiers:
        if start >= tier.start:
            chosen = tier.price
    return chosen


def at_tier(price: Price, genai_ref: str, tier: str, prompt_tokens: int, at: datetime | None) -> Price | None:
    """`price` as the model's published `service_tier` variant `tier` sets it (genai-prices' OpenAI flex and
    priority rows, from https://developers.openai.com/api/docs/pricing), for a request at `at` (now, UTC, when
    None) of `prompt_tokens`; None where genai-prices publishes no such variant for the model."""
    gp, _, name = genai_ref.partition("/")
    provider = _providers().get(gp)
    model = next((m for m in provider.models if m.id == name), None) if provider else None
    variants = [v for v in (model.price_variants or ()) if v.when == {"service_tier": tier}] if model else []
    if not variants:
        return None
    when = at or datetime.now(UTC)
    chosen: dict[str, Decimal | None] = {}
    # genai-prices' own rule (types.ModelInfo.get_prices): the first active variant that sets a field wins.
    for variant in variants:
        if variant.constraint is None or variant.constraint.active(when):
            for key, value in variant.prices.__dict__.items():
                if value is not None:
                    # A tier prices prompts strictly above its start, as `schedule.row_for` and genai-prices do.
                    chosen.setdefault(key, _tier_value(value, prompt_tokens - 1))
    writes = {ttl: chosen.get("cache_write_1h_mtok" if ttl == "1h" else "cache_write_mtok") or p
              for ttl, p in price.cache_write.items()}
    return replace(price, input=chosen.get("input_mtok") or price.input, output=chosen.get("output_mtok") or price.output,
                   cache_read=chosen.get("cache_read_mtok") or price.cache_read, cache_write=writes)
