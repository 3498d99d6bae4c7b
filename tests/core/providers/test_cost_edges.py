"""What a request really costs at the edges of the providers' usage shapes: each expected dollar figure is typed
from the provider's published price or rule (source in the comment), or taken from genai-prices' own
`extract_usage` + `calc_price`, never from prefixgate's pricing path."""

from __future__ import annotations

import warnings
from datetime import datetime
from decimal import Decimal

import genai_prices

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import converse as cv
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.providers.pricing import cost_of
from prefixgate.usage import Usage

AT = datetime(2026, 11, 20, 12, 0)   # a fixed time: dated prices and retirements do not move the figures


def _genai(response: dict, provider_id: str, model: str, flavor: str = "default") -> Decimal:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        usage = genai_prices.extract_usage(response, provider_id=provider_id, api_flavor=flavor).usage
        return genai_prices.calc_price(usage, model, provider_id=provider_id,
                                       genai_request_timestamp=AT).total_price


def test_anthropic_stream_whose_message_delta_nulls_the_input_counts_keeps_message_starts():
    # MessageDeltaUsage's input fields are optional (null = not restated); output_tokens is cumulative.
    # Haiku 4.5: $1 input, $0.10 cache read, $2 1h write, $5 output per MTok
    # (https://platform.claude.com/docs/en/about-claude/pricing).
    acc = an.StreamUsage()
    acc.feed({"type": "message_start", "message": {"usage": {
        "input_tokens": 1000, "cache_read_input_tokens": 20000, "cache_creation_input_tokens": 3000,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 3000}, "output_tokens": 1}}})
    acc.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {
        "input_tokens": None, "cache_read_input_tokens": None, "cache_creation_input_tokens": None,
        "output_tokens": 400}})
    assert acc.usage == Usage(1000, 20000, {"1h": 3000}, 400)
    # 1000 x $1 + 20000 x $0.10 + 3000 x $2 + 400 x $5 = $0.011
    assert cost_of("anthropic", "claude-haiku-4-5", acc.usage, at=AT).total == Decimal("0.011")


def test_anthropic_split_writes_without_the_flat_total_are_the_writes():
    # `cache_creation` alone (flat `cache_creation_input_tokens` null or absent): the split is the count.
    for flat in ({}, {"cache_creation_input_tokens": None}):
        u = an.parse_usage({"input_tokens": 10, "output_tokens": 3, **flat,
                            "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 500}})
        assert u.cache_writes == {"5m": 200, "1h": 500}


def test_gemini_tool_use_prompt_tokens_are_billed_as_input():
    # `toolUsePromptTokenCount` is outside `promptTokenCount` (totalTokenCount = prompt + candidates + tool use
    # + thoughts); genai-prices bills it as input. 2.5 Flash: $0.30 input, $0.03 cached, $2.50 output per MTok
    # (https://ai.google.dev/gemini-api/docs/pricing).
    meta = {"promptTokenCount": 10000, "cachedContentTokenCount": 4000, "toolUsePromptTokenCount": 6000,
            "candidatesTokenCount": 500, "thoughtsTokenCount": 1500, "totalTokenCount": 18000}
    usage = ge.parse_usage(meta)
    # (6000 + 6000) x $0.30 + 4000 x $0.03 + (500 + 1500) x $2.50 = $0.00872
    assert cost_of("gemini", "gemini-2.5-flash", usage, at=AT).total == Decimal("0.00872")
    assert _genai({"usageMetadata": meta, "modelVersion": "gemini-2.5-flash"}, "google", "gemini-2.5-flash") \
        == Decimal("0.00872")


def test_xai_reasoning_tokens_outside_completion_tokens_are_billed_as_output():
    # xAI: "Reasoning tokens - Charged at completion token price" (https://docs.x.ai/developers/rate-limits), and
    # reported beside completion_tokens, not inside it (total_tokens adds them). grok-4: $3 input, $15 output
    # per MTok (https://docs.x.ai/docs/models).
    raw = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 4200,
           "completion_tokens_details": {"reasoning_tokens": 3000}, "prompt_tokens_details": {"cached_tokens": 0}}
    usage = oa.parse_usage(raw)
    assert usage.output == 3200
    # 1000 x $3 + 3200 x $15 = $0.051
    assert cost_of("xai", "grok-4", usage, at=AT).total == Decimal("0.051")
    assert _genai({"usage": raw, "model": "grok-4-0709"}, "x-ai", "grok-4-0709", "chat") == Decimal("0.051")


def test_openai_reasoning_tokens_inside_completion_tokens_are_billed_once():
    # OpenAI: reasoning tokens are part of completion_tokens (total = prompt + completion).
    raw = {"prompt_tokens": 1000, "completion_tokens": 3200, "total_tokens": 4200,
           "completion_tokens_details": {"reasoning_tokens": 3000}}
    assert oa.parse_usage(raw).output == 3200


def test_a_service_tier_prices_a_prompt_of_exactly_the_threshold_at_the_base_rate():
    # OpenAI's long-context rate applies to prompts of MORE than 272K input tokens; gpt-5.4 flex is $1.25 input,
    # $7.50 output per MTok below it (https://developers.openai.com/api/docs/pricing; genai-prices' flex variant).
    at_threshold = Usage(272_000, 0, {}, 1000, service_tier="flex")
    # 272000 x $1.25 + 1000 x $7.50 = $0.3475
    assert cost_of("openai", "gpt-5.4", at_threshold, at=AT).total == Decimal("0.3475")
    for total in (272_000, 272_001):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = genai_prices.calc_price(genai_prices.Usage(input_tokens=total, output_tokens=1000), "gpt-5.4",
                                             provider_id="openai", genai_request_timestamp=AT,
                                             price_context={"service_tier": "flex"}).total_price
        assert cost_of("openai", "gpt-5.4", Usage(total, 0, {}, 1000, service_tier="flex"), at=AT).total == theirs


def test_converse_cache_details_without_the_write_total_are_the_writes():
    # ConverseStream/Converse `usage`: inputTokens excludes cacheReadInputTokens and cacheWriteInputTokens, which
    # `cacheDetails` splits by TTL (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html).
    # Regional Sonnet 5.5: $2.20 input, $4.40 1h write, $11 output per MTok: Anthropic's $2 / $4 / $10
    # (https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview) plus Bedrock's +10% over global
    # (https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock).
    u = cv.parse_usage({"inputTokens": 1000, "outputTokens": 100, "cacheDetails": [{"ttl": "1h", "inputTokens": 5000}]})
    assert u == Usage(1000, 0, {"1h": 5000}, 100)
    # 1000 x $2.20 + 5000 x $4.40 + 100 x $11 = $0.0253
    assert cost_of("bedrock", "us.anthropic.claude-sonnet-5-5", u, at=AT).total == Decimal("0.0253")
