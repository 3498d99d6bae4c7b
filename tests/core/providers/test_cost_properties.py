"""Properties of pricing over every model in the table: never negative, savings consistent, no-cache exact."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from prefixgate.providers.pricing import cost_of, resolve_model
from prefixgate.providers.rules import default_catalog
from prefixgate.usage import Usage

MODELS = sorted(default_catalog().models)
TTLS = ("5m", "1h", "30m", "12h", "explicit")
tokens = st.integers(min_value=0, max_value=2_000_000)
usages = st.builds(Usage, tokens, tokens, st.dictionaries(st.sampled_from(TTLS), tokens, max_size=3), tokens)
hours = st.decimals(min_value=0, max_value=10**9, places=3, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(MODELS), usages, hours)
def test_cost_is_never_negative_and_the_counterfactual_is_the_uncached_request(model, usage, storage):
    provider, name = model
    cost = cost_of(provider, name, usage, storage)
    for part in (cost.uncached_input, cost.cache_read, cost.cache_write, cost.output, cost.storage, cost.total,
                 cost.without_cache):
        assert part >= 0
    # Priced again as one plain request with every prompt token uncached (the long-context tier is chosen
    # by prompt size, which both share).
    plain = cost_of(provider, name, Usage(uncached_input=usage.input_total, output=usage.output))
    assert cost.without_cache == plain.total


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(MODELS), usages, st.sampled_from(["uncached_input", "cache_read", "output", *TTLS]))
def test_one_more_token_of_any_class_never_costs_less(model, usage, more):
    provider, name = model
    writes = dict(usage.cache_writes)
    if more in TTLS:
        writes[more] = writes.get(more, 0) + 1
    bigger = Usage(usage.uncached_input + (more == "uncached_input"), usage.cache_read + (more == "cache_read"),
                   writes, usage.output + (more == "output"))
    before, after = cost_of(provider, name, usage), cost_of(provider, name, bigger)
    # Crossing a long-context threshold reprices the whole request upwards, so this holds there too.
    assert after.total >= before.total


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
    price = resolve_model(provider, name).price_for(rest + cached)
    # Strictly cheaper wherever the model has a cache discount (a few, e.g. the Pro models, have none).
    assert hit.total < hit.without_cache if price.cache_read < price.input else hit.total == hit.without_cache
