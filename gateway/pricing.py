"""What a model's tokens cost: the one place the gateway asks, so the providers package's pricing
table can replace the small fallback table below without touching any caller.

The fallback prices are list prices in USD per million tokens from the provider fact sheet
(shared/reference/provider-caching.md, Nov 2026); `prefixgate.providers` supersedes them with its
maintained table and per-model rules. Self-hosted targets cost nothing per token.
"""

from __future__ import annotations

from decimal import Decimal

from prefixgate.cost import Price


def _p(inp: str, read: str, out: str, writes: dict[str, str] | None = None) -> Price:
    return Price(Decimal(inp), Decimal(out), Decimal(read), {k: Decimal(v) for k, v in (writes or {}).items()})


def _anthropic(inp: str, w5: str, w1h: str, read: str, out: str) -> Price:
    return _p(inp, read, out, {"5m": w5, "1h": w1h})


# Keys match a model name exactly or as a prefix (dated snapshots such as claude-haiku-4-5-20251001).
FALLBACK_PRICES: dict[tuple[str, str], Price] = {
    ("anthropic", "claude-opus-4-5"): _anthropic("5", "6.25", "10", "0.50", "25"),
    ("anthropic", "claude-opus-4-6"): _anthropic("5", "6.25", "10", "0.50", "25"),
    ("anthropic", "claude-opus-5"): _anthropic("5", "6.25", "10", "0.50", "25"),
    ("anthropic", "claude-sonnet-4-5"): _anthropic("3", "3.75", "6", "0.30", "15"),
    ("anthropic", "claude-sonnet-4-6"): _anthropic("3", "3.75", "6", "0.30", "15"),
    ("anthropic", "claude-sonnet-5"): _anthropic("2", "2.50", "4", "0.20", "10"),
    ("anthropic", "claude-haiku-4-5"): _anthropic("1", "1.25", "2", "0.10", "5"),
    ("openai", "gpt-4o-mini"): _p("0.15", "0.075", "0.60"),
    ("openai", "gpt-4o"): _p("2.50", "1.25", "10"),
    ("openai", "gpt-4.1"): _p("2", "0.50", "8"),
    ("openai", "gpt-5-mini"): _p("0.25", "0.025", "2"),
    ("openai", "gpt-5-nano"): _p("0.05", "0.005", "0.40"),
    ("openai", "gpt-5"): _p("1.25", "0.125", "10"),
    ("openai", "gpt-6-sol"): _p("2", "0.20", "10", {"30m": "2.50"}),
    ("gemini", "gemini-2.5-flash"): _p("0.30", "0.03", "2.50"),
    ("gemini", "gemini-3-flash-preview"): _p("0.50", "0.05", "3"),
    ("gemini", "gemini-3.5-flash"): _p("1.50", "0.15", "9"),
}
FREE = Price(Decimal(0), Decimal(0), Decimal(0))
# Longest key first, so "gpt-4o-mini" wins over "gpt-4o" and "gpt-5-mini" over "gpt-5".
_ORDER = sorted(FALLBACK_PRICES, key=lambda k: len(k[1]), reverse=True)


def price_for(provider: str, model: str) -> Price | None:
    """The price of `model` at `provider`, FREE for self-hosted models, None when unknown."""
    if provider == "local":
        return FREE
    exact = FALLBACK_PRICES.get((provider, model))
    if exact is not None:
        return exact
    return next((FALLBACK_PRICES[k] for k in _ORDER if k[0] == provider and model.startswith(k[1])), None)
