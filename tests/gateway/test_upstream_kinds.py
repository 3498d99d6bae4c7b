"""Upstream kinds are records (policies/kinds.py): each kind's facts, as the providers document them, and a
policy validated against the registry."""

from __future__ import annotations

import pytest

from prefixgate.dialects import WIRE_FORMATS
from prefixgate.policies import Policy, PolicyError
from prefixgate.policies.kinds import KINDS, catalogue_provider


def _upstream(spec: dict):  # noqa: ANN202
    policy = Policy.from_dict({"upstreams": {"u": spec}, "routes": [{"name": "r", "models": ["*"],
                                                                   "targets": [{"upstream": "u"}]}]}, {})
    return policy.upstreams["u"]


def test_every_kind_speaks_registered_formats() -> None:
    for kind in KINDS.values():
        assert kind.dialect in WIRE_FORMATS and set(kind.also_speaks) <= set(WIRE_FORMATS), kind.name


def test_key_variables_are_the_providers_own() -> None:
    # The SDKs' documented variables: Anthropic's ANTHROPIC_API_KEY; google-genai reads GEMINI_API_KEY, then
    # GOOGLE_API_KEY; Bedrock API keys are AWS_BEARER_TOKEN_BEDROCK.
    assert _upstream({"kind": "anthropic", "url": "https://api.anthropic.com"}).api_key_env == ("ANTHROPIC_API_KEY",)
    assert _upstream({"kind": "gemini", "url": "https://g.example"}).api_key_env == ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    assert _upstream({"kind": "bedrock", "region": "eu-west-3"}).api_key_env == ("AWS_BEARER_TOKEN_BEDROCK",)
    assert _upstream({"kind": "openai_compatible", "url": "http://127.0.0.1:8000"}).api_key_env == ()


def test_a_region_builds_bedrocks_url_and_only_bedrock_takes_one() -> None:
    # AWS's endpoint for the Bedrock runtime: bedrock-runtime.{region}.amazonaws.com.
    assert _upstream({"kind": "bedrock", "region": "eu-west-3"}).url == "https://bedrock-runtime.eu-west-3.amazonaws.com"
    with pytest.raises(PolicyError, match="region"):
        _upstream({"kind": "anthropic", "url": "https://api.anthropic.com", "region": "eu-west-3"})


def test_an_unknown_kind_is_refused_with_the_known_ones() -> None:
    with pytest.raises(PolicyError, match="kind: must be one of anthropic, openai"):
        _upstream({"kind": "anthropics", "url": "https://x.example"})


def test_who_is_hosted_free_and_planned_how() -> None:
    compatible = _upstream({"kind": "openai_compatible", "url": "http://127.0.0.1:8000"})
    deepseek = _upstream({"kind": "openai_compatible", "provider": "deepseek"})
    assert compatible.self_hosted and not compatible.hosted and not deepseek.self_hosted
    assert deepseek.price_rows == "deepseek"
    assert _upstream({"kind": "anthropic", "url": "https://api.anthropic.com"}).hosted
    # Ledger records name the kind; the catalogue knows its provider's rows (Vertex and deepseek are their own).
    assert [catalogue_provider(p) for p in ("openai_responses", "gemini_interactions", "local", "vertex", "deepseek")] \
        == ["openai", "gemini", "local", "vertex", "deepseek"]
