"""Cloud platforms' regional prices, typed from the published pages:

- Vertex AI (https://docs.claude.com/en/api/claude-on-vertex-ai): "Starting with Claude Sonnet 4.5 and all
  future models", regional and multi-region endpoints cost 10% more than the global one; older models are
  priced the same everywhere.
- Amazon Bedrock (https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock): from
  Sonnet 4.5 on, geographic inference profiles (`us.`, `eu.`, `jp.`, `apac.`) and in-region ids cost 10%
  more than `global.`.

List prices (USD per million tokens, input / output): Claude Sonnet 4.6 $3 / $15, Claude Opus 4.1 $15 / $75,
Claude Haiku 3.5 $0.80 / $4."""

from __future__ import annotations

from decimal import Decimal

import pytest

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


@pytest.mark.parametrize("profile", ["us.", "eu.", "jp.", "apac."])
def test_every_geographic_bedrock_profile_is_priced_with_the_premium(profile: str) -> None:
    assert cost_of("bedrock", f"{profile}anthropic.claude-sonnet-4-6", MILLION).total == Decimal("19.80")


def test_the_global_bedrock_profile_is_the_list_price() -> None:
    assert cost_of("bedrock", "global.anthropic.claude-sonnet-4-6", MILLION).total == Decimal("18")
