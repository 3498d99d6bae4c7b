"""Usage extraction per provider (provider-caching.md §1.6, §2.1, §3.1), streaming included."""

from __future__ import annotations

from decimal import Decimal

from prefixgate.cost import Price, cost_note, ledger_fields, price_usage
from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.dialects.sse import parse_sse
from prefixgate.usage import Usage


def test_anthropic_input_tokens_exclude_cache_reads_and_writes():
    u = an.usage_from_response({"usage": {
        "input_tokens": 21, "cache_creation_input_tokens": 188086, "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 188086, "ephemeral_1h_input_tokens": 0}, "output_tokens": 393}})
    assert u == Usage(21, 0, {"5m": 188086}, 393)
    assert u.input_total == 21 + 188086


def test_anthropic_write_total_without_split_is_5m():
    u = an.parse_usage({"input_tokens": 3, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 50, "output_tokens": 1})
    assert u.cache_writes == {"5m": 1000} and u.cache_read == 50


def test_anthropic_stream_delta_usage_is_cumulative_not_added():
    raw = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
        b'"content":[],"model":"c","usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":2000,"output_tokens":1}}}\n\n'
        b'event: ping\ndata: {"type":"ping"}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":5}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":10,'
        b'"cache_read_input_tokens":2000,"output_tokens":12}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    acc = an.StreamUsage()
    for ev in parse_sse(raw.split(b"\n")):
        acc.feed(ev.json())
    assert acc.usage == Usage(10, 2000, {}, 12)
    assert acc.stop_reason == "end_turn"


def test_openai_prompt_tokens_include_cached_and_writes():
    u = oa.usage_from_response({"usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                                          "prompt_tokens_details": {"cached_tokens": 1920}}})
    assert u == Usage(86, 1920, {}, 300)
    u = oa.parse_usage({"prompt_tokens": 5000, "completion_tokens": 1,
                        "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 3000}})
    assert u == Usage(1000, 1000, {"30m": 3000}, 1)


def test_openai_stream_usage_only_from_usage_chunk():
    acc = oa.StreamUsage()
    acc.feed({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}], "usage": None})
    assert acc.usage is None  # a stream that breaks before the usage chunk has no usage
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": None})
    acc.feed({"choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 4,
                                       "prompt_tokens_details": {"cached_tokens": 1152}}})
    assert acc.usage == Usage(48, 1152, {}, 4) and acc.finish_reason == "stop"


def test_openai_stream_without_include_usage_has_no_usage_chunk():
    events = [ev.data for ev in parse_sse(b"".join(oa.stream_events("m", ["a"], Usage(1, 0, {}, 1), include_usage=False)).split(b"\n"))]
    assert events[-1] == "[DONE]" and all('"usage"' not in e for e in events)


def test_gemini_prompt_count_includes_cached_and_thoughts_are_output():
    u = ge.usage_from_response({"usageMetadata": {"promptTokenCount": 5000, "cachedContentTokenCount": 4096,
                                                  "candidatesTokenCount": 20, "thoughtsTokenCount": 100, "totalTokenCount": 5120}})
    assert u == Usage(904, 4096, {}, 120)


def test_gemini_stream_last_usage_wins():
    acc = ge.StreamUsage()
    acc.feed({"candidates": [{"content": {"parts": [{"text": "a"}]}}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1}})
    acc.feed({"candidates": [{"content": {"parts": [{"text": "b"}]}, "finishReason": "STOP"}],
              "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2}})
    assert acc.usage == Usage(10, 0, {}, 2) and acc.finish_reason == "STOP"


def test_usage_json_round_trips_through_each_dialect():
    u = Usage(uncached_input=7, cache_read=1024, cache_writes={"5m": 3, "1h": 4}, output=9)
    assert an.parse_usage(an.usage_json(u)) == u
    assert oa.parse_usage(oa.usage_json(Usage(7, 1024, {"30m": 7}, 9))) == Usage(7, 1024, {"30m": 7}, 9)
    assert ge.parse_usage(ge.usage_json(Usage(7, 1024, {}, 9))) == Usage(7, 1024, {}, 9)


def test_anthropic_stream_event_order():
    names = [ev.event for ev in parse_sse(b"".join(an.stream_events("m", ["a", "b"], Usage(1, 0, {}, 2))).split(b"\n"))]
    assert names == ["message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
                     "content_block_stop", "message_delta", "message_stop"]


def test_usage_rejects_negative_counts():
    import pytest

    with pytest.raises(ValueError, match="uncached_input"):
        Usage(uncached_input=-1)
    assert Usage(1, 2, {"5m": 3}, 4) + Usage(1, 0, {"5m": 1, "1h": 2}, 0) == Usage(2, 2, {"5m": 4, "1h": 2}, 4)


def test_openai_writes_are_priced_at_the_requested_ttl():
    usage = {"prompt_tokens": 5000, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 4000}}
    assert oa.parse_usage(usage, oa.write_ttl({"prompt_cache_options": {"mode": "explicit", "ttl": "12h"}})).cache_writes == {"12h": 4000}
    assert oa.write_ttl({}) == "30m"
    acc = oa.StreamUsage("12h")
    acc.feed({"choices": [], "usage": usage})
    assert acc.usage.cache_writes == {"12h": 4000}


def test_openai_only_explicit_breakpoints_are_checkpoints():
    body = {"model": "gpt-6-sol", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "a", "prompt_cache_breakpoint": {"mode": "explicit"}},
        {"type": "text", "text": "b", "prompt_cache_breakpoint": {"mode": "something-new"}}]}]}
    conv = oa.parse_request(body)
    assert [b.checkpoint is not None for b in conv.blocks()] == [True, False]
    assert oa.encode_request(conv) == body


def test_deepseek_hit_and_miss_split_the_prompt():
    u = oa.parse_usage({"prompt_tokens": 1953, "completion_tokens": 35, "prompt_cache_hit_tokens": 1920,
                        "prompt_cache_miss_tokens": 33})
    assert u == Usage(33, 1920, {}, 35) and u.reported_cost is None


def test_openrouter_cost_and_cache_writes_are_kept():
    u = oa.parse_usage({"prompt_tokens": 2000, "completion_tokens": 10, "cost": 0.00123,
                        "prompt_tokens_details": {"cached_tokens": 1500, "cache_write_tokens": 400}})
    assert (u.uncached_input, u.cache_read, u.cache_write, u.output) == (100, 1500, 400, 10)
    assert u.reported_cost == Decimal("0.00123")
    # A cost that is not a number is no cost (never a crash, never $0).
    assert oa.parse_usage({"prompt_tokens": 1, "cost": "n/a"}).reported_cost is None
    assert oa.parse_usage({"prompt_tokens": 1, "cost": True}).reported_cost is None


def test_compatible_stream_usage_in_two_chunks_is_not_billed_twice():
    """Some hosts put usage on the last content chunk and again on a final usage chunk: the last one
    reported is the response's usage, not their sum."""
    acc = oa.StreamUsage()
    usage = {"prompt_tokens": 100, "completion_tokens": 5, "cost": 0.5, "prompt_tokens_details": {"cached_tokens": 64}}
    acc.feed({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}], "usage": usage})
    acc.feed({"choices": [], "usage": usage})
    assert acc.usage == Usage(36, 64, {}, 5, Decimal("0.5"))


def test_provider_cost_beside_ours_with_a_note_past_one_percent():
    price = Price(Decimal("1"), Decimal("2"), Decimal("0.25"))
    usage = Usage(1_000_000, 0, {}, 0, Decimal("1.005"))
    cost = price_usage(usage, price)
    assert Decimal(ledger_fields(usage, cost)["cost_usd"]) == 1 and ledger_fields(usage, cost)["provider_cost_usd"] == "1.005"
    assert cost_note(usage, cost, "openrouter/m") is None
    far = Usage(1_000_000, 0, {}, 0, Decimal("1.02"))
    assert "differ by over 1%" in cost_note(far, price_usage(far, price), "openrouter/m")
    # No price row: the provider's figure is the cost; neither: unpriced, never $0.
    assert ledger_fields(far, None)["cost_usd"] == "1.02"
    assert cost_note(far, None, "openrouter/m").startswith("priced from the provider's reported cost")
    bare = Usage(10, 0, {}, 1)
    assert ledger_fields(bare, None)["cost_usd"] is None
    assert cost_note(bare, None, "deepseek/x").startswith("unpriced: no price row for deepseek/x")
    assert (usage + far).reported_cost == Decimal("2.025") and (bare + bare).reported_cost is None
