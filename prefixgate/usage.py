"""Normalised token usage: one shape for every provider's usage fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal


@dataclass(frozen=True)
class Usage:
    """Tokens of one response, split the way providers bill them.

    `uncached_input` excludes cache reads and writes (unlike OpenAI's `prompt_tokens`, which
    includes cached tokens); `cache_writes` maps a TTL ("5m", "1h", "30m", ...) to tokens written.
    """

    uncached_input: int = 0
    cache_read: int = 0
    cache_writes: dict[str, int] = field(default_factory=dict)
    output: int = 0
    # What the provider itself says the response cost in USD, where its usage reports it (OpenRouter's
    # `usage.cost`); None otherwise. Kept beside the price-table cost, never instead of it.
    reported_cost: Decimal | None = None
    # Server-side web searches the provider ran for this response (Anthropic's
    # `usage.server_tool_use.web_search_requests`): billed per search, on top of tokens.
    web_searches: int = 0
    # The service tier the provider says served the response (OpenAI's `service_tier`: default, flex,
    # priority; Anthropic's `usage.service_tier`: standard, priority, batch); "" where it says none. Priced
    # as such (providers/pricing.py), whatever tier was asked for. Context for the price, not consumption:
    # two usages of the same tokens compare equal whatever tier served them.
    service_tier: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for name in ("uncached_input", "cache_read", "output", "web_searches"):
            if getattr(self, name) < 0:
                raise ValueError(f"usage {name} must be >= 0, got {getattr(self, name)}")
        if any(v < 0 for v in self.cache_writes.values()):
            raise ValueError(f"usage cache_writes must be >= 0, got {self.cache_writes}")

    @property
    def cache_write(self) -> int:
        return sum(self.cache_writes.values())

    @property
    def input_total(self) -> int:
        """Every prompt token, cached or not."""
        return self.uncached_input + self.cache_read + self.cache_write

    def __add__(self, other: Usage) -> Usage:
        writes = dict(self.cache_writes)
        for ttl, n in other.cache_writes.items():
            writes[ttl] = writes.get(ttl, 0) + n
        return Usage(
            self.uncached_input + other.uncached_input,
            self.cache_read + other.cache_read,
            writes,
            self.output + other.output,
            _sum_reported(self.reported_cost, other.reported_cost),
            self.web_searches + other.web_searches,
            self.service_tier or other.service_tier,
        )

    def token_counts(self) -> dict[str, int]:
        """The token totals reports show, in the providers' vocabulary."""
        return {
            "input_tokens": self.input_total,
            "uncached_input_tokens": self.uncached_input,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
            "output_tokens": self.output,
        }

    def to_dict(self) -> dict:
        return {
            "uncached_input": self.uncached_input,
            "cache_read": self.cache_read,
            "cache_writes": dict(self.cache_writes),
            "output": self.output,
        }


def _sum_reported(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    return a if b is None else b if a is None else a + b
