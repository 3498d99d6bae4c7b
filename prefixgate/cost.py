"""Usage -> money, with the counterfactual cost of the same request without caching.

All arithmetic is `Decimal`: ledgers add millions of tiny amounts and must not drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from prefixgate.usage import Usage

MTOK = Decimal(1_000_000)
ZERO = Decimal(0)


@dataclass(frozen=True)
class Price:
    """USD per million tokens for one model. `cache_write` maps a TTL to its write price."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: dict[str, Decimal] = field(default_factory=dict)
    # Explicit caches billed for storage (Gemini cachedContents): USD per million tokens per hour.
    storage_per_hour: Decimal = ZERO
    # Server-side web search: USD per 1,000 searches (Anthropic's web search tool).
    web_search_per_k: Decimal = ZERO

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "storage_per_hour", "web_search_per_k"):
            if Decimal(getattr(self, name)) < 0:
                raise ValueError(f"price {name} must be >= 0")

    def write_price(self, ttl: str) -> Decimal:
        """Price of writing with `ttl`; providers that do not charge writes bill them as plain input."""
        return self.cache_write.get(ttl, self.input)


@dataclass(frozen=True)
class Cost:
    """What one request cost, by token class, and what it would have cost with no caching at all."""

    uncached_input: Decimal = ZERO
    cache_read: Decimal = ZERO
    cache_write: Decimal = ZERO
    output: Decimal = ZERO
    storage: Decimal = ZERO
    without_cache: Decimal = ZERO
    # Fees for server-side tools (web searches): paid with or without caching, so also in `without_cache`.
    tools: Decimal = ZERO

    @property
    def total(self) -> Decimal:
        return self.uncached_input + self.cache_read + self.cache_write + self.output + self.storage + self.tools

    @property
    def savings(self) -> Decimal:
        """Positive when caching saved money; negative when writes cost more than reads returned."""
        return self.without_cache - self.total

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.uncached_input + other.uncached_input,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.output + other.output,
            self.storage + other.storage,
            self.without_cache + other.without_cache,
            self.tools + other.tools,
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "uncached_input": str(self.uncached_input),
            "cache_read": str(self.cache_read),
            "cache_write": str(self.cache_write),
            "output": str(self.output),
            "storage": str(self.storage),
            "tools": str(self.tools),
            "total": str(self.total),
            "without_cache": str(self.without_cache),
            "savings": str(self.savings),
        }


def price_usage(usage: Usage, price: Price, storage_token_hours: Decimal = ZERO) -> Cost:
    """Price `usage`; the counterfactual bills every prompt token as plain input and no storage."""
    writes = sum((n * price.write_price(ttl) for ttl, n in usage.cache_writes.items()), ZERO)
    tools = usage.web_searches * price.web_search_per_k / 1000
    return Cost(
        uncached_input=usage.uncached_input * price.input / MTOK,
        cache_read=usage.cache_read * price.cache_read / MTOK,
        cache_write=writes / MTOK,
        output=usage.output * price.output / MTOK,
        storage=storage_token_hours * price.storage_per_hour / MTOK,
        without_cache=(usage.input_total * price.input + usage.output * price.output) / MTOK + tools,
        tools=tools,
    )


def ledger_fields(usage: Usage, cost: Cost | None) -> dict[str, Any]:
    """A ledger record's token and money fields (gateway and SDK records alike); money as decimal
    strings, None where the price is unknown. With no price row, the provider's own reported cost (if
    any) is the cost, and the counterfactual stays unknown."""
    reported = str(usage.reported_cost) if usage.reported_cost is not None else None
    return {
        "uncached_input": usage.uncached_input, "cache_read": usage.cache_read,
        "cache_writes": dict(usage.cache_writes), "output": usage.output,
        "cost_usd": str(cost.total) if cost else reported,
        "cost_without_cache_usd": str(cost.without_cache) if cost else None,
        "savings_usd": str(cost.savings) if cost else None,
        "provider_cost_usd": reported,
        "service_tier": usage.service_tier,
    }


def cost_note(usage: Usage, cost: Cost | None, what: str) -> str | None:
    """The ledger note on how `what` (provider/model) was priced, where a reader needs one: priced from
    the provider's own report (no price row), unpriced (neither), or the two disagreeing by over 1%."""
    reported = usage.reported_cost
    if cost is None:
        if reported is None:
            return f"unpriced: no price row for {what} and the provider reported no cost"
        return f"priced from the provider's reported cost (no price row for {what})"
    if reported is not None and disagree(reported, cost.total):
        return f"cost: provider reported ${reported}, price table gives ${cost.total} (differ by over 1%)"
    return None


def disagree(reported: Decimal, table: Decimal) -> bool:
    """Whether a provider's own reported cost and the price table's differ by over 1% (of the larger)."""
    return abs(reported - table) > Decimal("0.01") * max(abs(table), abs(reported))
