"""Cloud platforms' regional prices, typed from the published pages:

- Vertex AI (https://docs.claude.com/en/api/claude-on-vertex-ai): "Starting with Claude Sonnet 4.5 and all
  future models", regional and multi-region endpoints cost 10% more than the global one; older models are
  priced the same everywhere.
- Amazon Bedrock (https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock): from
  Sonnet 4.5 on, geographic inference profiles (`us.`, `eu.`, `jp.`, `apac.`) and in-region ids cost 10%
  more than `global.`.

List prices (USD per million tokens, input / output): Claude Sonnet 4.6 $3 / $15 (cache read $0.30, 5-minute
write $3.75, 1-hour write $6), Claude Haiku 4.5 $1 / $5, Claude Opus 4.1 $15 / $75, Claude Haiku 3.5 $0.80 / $4.
The premium applies to every token class."""

from __future__ import annotations

from decimal import Decimal

import pytest

from prefixgate.config import load_settings
from prefixgate.policies.load import builtin_upstreams
from prefixgate.policies.schema import Policy
from prefixgate.providers.pricing import cost_of
from prefixgate.usage import Usage

MILLION = Usage(uncached_input=1_000_000, output=1_000_000)


@pytest.mark.parametrize(("model", "list_price"), [
    ("claude-opus-4-1", Decimal("90")),       # 15 + 75
    ("claude-3-5-haiku", Decimal("4.80")),    # 0.80 + 4
])
def test_vertex_models_before_sonnet_4_5_cost_the_same_on_regional_endpoints(model: str, list_price: Decimal) -> None:
    assert cost_of("vertex", model, MILLION).total == list_price
    assert cost_of("vertex", f"regional/{model}", MILLION).total == list_price


def test_vertex_regional_premium_from_sonnet_4_5_on() -> None:
    assert cost_of("vertex", "claude-sonnet-4-6", MILLION).total == Decimal("18")
    assert cost_of("vertex", "regional/claude-sonnet-4-6", MILLION).total == Decimal("19.80")


def test_the_regional_premium_applies_to_every_token_class() -> None:
    usage = Usage(cache_read=1_000_000, cache_writes={"5m": 1_000_000, "1h": 1_000_000})
    assert cost_of("vertex", "claude-sonnet-4-6", usage).total == Decimal("10.05")             # 0.30 + 3.75 + 6
    assert cost_of("vertex", "regional/claude-sonnet-4-6", usage).total == Decimal("11.055")   # +10%


@pytest.mark.parametrize(("location", "priced_as"), [
    ("global", "claude-sonnet-4-6"), ("us-east5", "regional/claude-sonnet-4-6"), ("europe-west1", "regional/claude-sonnet-4-6"),
    ("us", "regional/claude-sonnet-4-6"),
])
def test_a_vertex_upstream_prices_by_its_location(location: str, priced_as: str) -> None:
    policy = Policy.from_dict({"upstreams": {"v": {"kind": "vertex", "project": "acme-prod", "location": location}},
                               "routes": [{"name": "claude", "models": ["claude-sonnet-4-6"], "targets": [{"upstream": "v"}]}]},
                              builtin_upstreams(load_settings()))
    assert policy.upstreams["v"].base_model("claude-sonnet-4-6") == priced_as


@pytest.mark.parametrize("profile", ["us.", "eu.", "jp.", "apac."])
def test_every_geographic_bedrock_profile_is_priced_with_the_premium(profile: str) -> None:
    assert cost_of("bedrock", f"{profile}anthropic.claude-sonnet-4-6", MILLION).total == Decimal("19.80")


def test_the_global_bedrock_profile_is_the_list_price() -> None:
    assert cost_of("bedrock", "global.anthropic.claude-sonnet-4-6", MILLION).total == Decimal("18")


def test_a_vertex_model_id_with_its_version_is_priced_as_the_model() -> None:
    # Vertex names a Claude model with its snapshot after `@` (claude-opus-4-1@20250805).
    assert cost_of("vertex", "claude-opus-4-1@20250805", MILLION).total == Decimal("90")
    assert cost_of("vertex", "regional/claude-haiku-4-5@20251001", MILLION).total == Decimal("6.60")   # (1 + 5) +10%
