"""Properties of pricing over every model in the table: never negative, savings consistent, no-cache exact."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from prefixgate.providers.pricing import cost_of
from prefixgate.providers.rules import default_catalog
from prefixgate.usage import Usage

MODELS = sorted(default_catalog().models)
TTLS = ("5m", "1h", "30m", "12h", "explicit")
tokens = st.integers(min_value=0, max_value=2_000_000)
usages = st.builds(Usage, tokens, tokens, st.dictionaries(st.sampled_from(TTLS), tokens, max_size=3), tokens)
hours = st.decimals(min_value=0, max_value=10**9, places=3, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(MODELS), usages, hours)
def test_cost_is_never_negative_and_savings_are_without_cache_minus_actual(model, usage, storage):
    provider, name = model
    cost = cost_of(provider, name, usage, storage)
    for part in (cost.uncached_input, cost.cache_read, cost.cache_write, cost.output, cost.storage, cost.total,
                 cost.without_cache):
        assert part >= 0
    assert cost.savings == cost.without_cache - cost.total
    assert cost.total == cost.uncached_input + cost.cache_read + cost.cache_write + cost.output + cost.storage


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(MODELS), tokens, tokens)
def test_a_request_with_no_cache_activity_costs_exactly_the_uncached_price(model, prompt, output):
    provider, name = model
    cost = cost_of(provider, name, Usage(uncached_input=prompt, output=output))
    assert cost.total == cost.without_cache
    assert cost.savings == Decimal(0)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(MODELS), st.integers(min_value=1, max_value=1_000_000), tokens)
def test_reading_from_cache_never_costs_more_than_sending_uncached(model, cached, rest):
    provider, name = model
    hit = cost_of(provider, name, Usage(uncached_input=rest, cache_read=cached))
    assert hit.total < hit.without_cache
