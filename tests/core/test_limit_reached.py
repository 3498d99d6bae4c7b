"""Which limit an upstream's 429 names, read as each provider documents it, in OpenAI's terms (`requests`,
`tokens`): the headers and quota metrics below are the providers' own names (docs.claude.com/en/api/rate-limits,
"Response headers"; OpenAI's and Azure OpenAI's x-ratelimit-remaining-*; the Gemini API's QuotaFailure)."""

from __future__ import annotations

import pytest

from prefixgate.errors import limit_reached

QUOTA = "type.googleapis.com/google.rpc.QuotaFailure"


@pytest.mark.parametrize(("headers", "unit"), [
    ({"anthropic-ratelimit-output-tokens-remaining": "0", "anthropic-ratelimit-requests-remaining": "49"}, "tokens"),
    ({"Anthropic-RateLimit-Requests-Remaining": "0", "anthropic-ratelimit-tokens-remaining": "30000"}, "requests"),
    # both spent: waiting out the minute's requests alone would not do
    ({"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-input-tokens-remaining": "0"}, "tokens"),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "1200"}, "requests"),
    ({"anthropic-ratelimit-requests-remaining": "3", "retry-after": "0"}, None),
])
def test_a_limit_with_nothing_remaining_is_the_one_reached(headers, unit):
    assert limit_reached(None, headers, None) == unit


@pytest.mark.parametrize(("violation", "unit"), [
    ({"quotaMetric": "generativelanguage.googleapis.com/generate_requests_per_model_per_day",
      "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}, "requests"),
    ({"quotaMetric": "generativelanguage.googleapis.com/generate_content_paid_tier_input_token_count",
      "quotaId": "GenerateContentPaidTierInputTokensPerModelPerMinute"}, "tokens"),
])
def test_a_google_quota_failure_names_its_limit_by_its_metric(violation, unit):
    assert limit_reached(None, {}, [{"@type": QUOTA, "violations": [violation]}]) == unit


def test_openais_type_is_its_limit_and_a_refusal_naming_none_is_unknown():
    assert limit_reached("requests", {"x-ratelimit-remaining-tokens": "0"}, None) == "requests"
    assert limit_reached("rate_limit_error", {}, [{"@type": "type.googleapis.com/google.rpc.RetryInfo"}]) is None
