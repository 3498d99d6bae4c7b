"""Every planner provider caches under exactly one regime (cache_planner/regimes/), and the regimes' facts match
the providers' documentation: Claude's breakpoints are searched back a window (bridges), OpenAI's explicit
markers share one TTL, Gemini writes no marker, the local engine places nothing."""

from __future__ import annotations

import pytest

from prefixgate.cache_planner.regimes import REGIMES, regime_of
from prefixgate.cache_planner.target import PROVIDERS


def test_every_planner_provider_has_one_regime() -> None:
    for provider in PROVIDERS:
        assert sum(provider in r.providers for r in REGIMES) == 1, provider
        assert provider in regime_of(provider).providers
    with pytest.raises(KeyError):
        regime_of("nobody")


def test_regime_facts() -> None:
    claude, openai, gemini, local = (regime_of(p) for p in ("anthropic", "openai", "gemini", "local"))
    assert regime_of("bedrock") is claude
    assert claude.bridges and claude.caller_marks and not claude.one_ttl       # 20-block lookback, mixed TTLs
    assert openai.one_ttl and openai.caller_marks and not openai.bridges        # prompt_cache_options.ttl: one
    assert openai.routing_key and not claude.routing_key and not gemini.routing_key     # prompt_cache_key
    assert not local.catalogued and claude.catalogued
    assert not gemini.caller_marks and not local.caller_marks
