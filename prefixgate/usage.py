"""Normalised token usage: one shape for every provider's usage fields."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

# The most of any one count an answer can report: ten times the longest context window offered (10M tokens).
# A provider or compatible server reporting more (10**18 tokens, a cost of trillions) reports something impossible,
# and its sums would pass what the ledger's stores hold (64-bit integers of picodollars).
MAX_COUNT = 10**8
# A request body's bytes per prompt token where no tokenizer counted them (JSON and English text run 3-5): what a
# budget reserves for a prompt, and what one the provider may have run without reporting it is estimated at.
BYTES_PER_TOKEN = 4


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
    # Why the answer's usage could not be taken (`impossible_usage`): its counts are then none of the above (zero),
    # and its record says so instead of pricing them.
    unreadable: str = field(default="", compare=False)
    # Of `output`, the tokens the model spent thinking (OpenAI's `reasoning_tokens`, Gemini's `thoughtsTokenCount`,
    # Interactions' `total_thought_tokens`): a breakdown written back in the caller's format, never priced again.
    reasoning: int = field(default=0, compare=False)
    # The model the answer says ran (OpenAI's top-level `model`), "" where it names none: what an Azure deployment's
    # call is priced as (its request names a deployment, providers/deployments.py). Context, as the tier is.
    model: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for name in ("uncached_input", "cache_read", "output", "web_searches", "reasoning"):
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
            self.unreadable or other.unreadable,
            self.reasoning + other.reasoning,
            self.model or other.model,
        )

    @property
    def thinking(self) -> int:
        """The reasoning tokens to write back: never more than the output they are part of."""
        return min(self.reasoning, self.output)

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


def prompt_estimate(body: bytes) -> Usage:
    """The prompt `body` carries, as uncached input tokens estimated from its size (`BYTES_PER_TOKEN`)."""
    return Usage(uncached_input=-(-len(body) // BYTES_PER_TOKEN))


def cut_usage(seen: Usage | None, raw: bytes, events: int) -> Usage:
    """The usage of a stream cut (by its caller or its upstream) before the provider reported all of it: what
    was reported, the prompt estimated from the body where no input count came, and at least one output token
    per event streamed (OpenAI sends its usage only in the last chunk; providers stream a token or more an event)."""
    seen = seen or Usage()
    has_input = seen.uncached_input or seen.cache_read or seen.cache_writes
    return replace(seen, uncached_input=seen.uncached_input if has_input else prompt_estimate(raw).uncached_input,
                   output=max(seen.output, events))


def impossible_usage(reported: object, where: str = "usage", key: str = "") -> str:
    """Why a provider's usage object (as it sent it) cannot be true, or "": no number in it is negative or not
    finite, and no token count (a field naming tokens), search count or reported USD cost passes MAX_COUNT.
    (Other numbers are left unbounded: xAI's `cost_in_usd_ticks` counts 10**10 a dollar.)"""
    if isinstance(reported, dict):
        return next((why for k, v in reported.items() if (why := impossible_usage(v, f"{where}.{k}", str(k)))), "")
    if isinstance(reported, list):
        return next((why for i, v in enumerate(reported) if (why := impossible_usage(v, f"{where}[{i}]", key))), "")
    if isinstance(reported, bool) or not isinstance(reported, int | float):
        return ""
    counted = "token" in key.lower() or key in ("cost", "web_search_requests")
    if not (math.isfinite(reported) and 0 <= reported and (reported <= MAX_COUNT or not counted)):
        return f"{where} is {reported!r}: no answer can report that"
    return ""


def checked_usage(where: str = "usage") -> Callable[[Callable[..., Usage]], Callable[..., Usage]]:
    """For a format's parser of a provider's usage object (named `where` in the answer): an impossible one
    (`impossible_usage`) parses to no counts and says why (`Usage.unreadable`), so the caller's answer still
    passes and its record says the usage was unreadable, where the counts would have raised or been priced."""
    def wrap(parse: Callable[..., Usage]) -> Callable[..., Usage]:
        @functools.wraps(parse)
        def checked(reported: Any, *args: Any, **kwargs: Any) -> Usage:
            why = impossible_usage(reported, where)
            return Usage(unreadable=why) if why else parse(reported, *args, **kwargs)
        return checked
    return wrap


def _sum_reported(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    return a if b is None else b if a is None else a + b
