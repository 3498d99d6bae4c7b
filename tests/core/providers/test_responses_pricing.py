"""Golden prices for OpenAI Responses usage: cached tokens are inside `input_tokens`, reasoning tokens inside
`output_tokens`; a stream's usage (its terminal event) costs what the same response's body costs."""

from __future__ import annotations

from decimal import Decimal

from prefixgate.dialects import responses as rs
from prefixgate.dialects.sse import event_json, parse_sse
from prefixgate.providers.pricing import cost_of
from prefixgate.usage import Usage

M = 1_000_000
WIRE = {"input_tokens": 2006, "input_tokens_details": {"cached_tokens": 1920}, "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 256}, "total_tokens": 2306}


def test_golden_cached_and_reasoning_tokens_are_each_billed_once():
    usage = rs.parse_usage(WIRE)
    assert usage == Usage(uncached_input=86, cache_read=1920, output=300)
    assert rs.reasoning_tokens(WIRE) == 256
    # gpt-5.4: $2.50 in, $0.25 cached, $15 out per MTok (https://developers.openai.com/api/docs/models/gpt-5.4;
    # ../shared/reference/provider-caching.md); the 256 reasoning tokens are part of the 300.
    cost = cost_of("openai", "gpt-5.4", usage)
    assert cost.total == (86 * Decimal("2.50") + 1920 * Decimal("0.25") + 300 * Decimal(15)) / M
    assert cost.without_cache == (2006 * Decimal("2.50") + 300 * Decimal(15)) / M


def test_golden_streamed_usage_comes_from_the_terminal_event_only_and_costs_the_same():
    response = rs.response_object("gpt-5.4", [rs.message_item("Hello there.")], rs.parse_usage(WIRE), reasoning=256)
    stream = rs.StreamUsage()
    events = [e.json() for e in parse_sse(b"".join(rs.response_events(response, None)).split(b"\n"))]
    assert events[0]["type"] == "response.created" and events[0]["response"]["usage"] is None
    assert events[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    fed = 0
    for event in events:
        stream.feed(event)
        fed += stream.usage is not None
    assert fed == 1  # nothing before the terminal event carries usage
    assert stream.usage == rs.parse_usage(WIRE) and stream.finish_reason == "stop"
    assert events[-1]["response"]["usage"] == WIRE
    assert cost_of("openai", "gpt-5.4", stream.usage) == cost_of("openai", "gpt-5.4", rs.usage_from_response(response))


def test_golden_incomplete_stream_is_priced_from_response_incomplete():
    usage = Usage(uncached_input=1500, output=16)
    response = rs.build_response("gpt-5.4", "cut", usage, finish_reason="length")
    stream = rs.StreamUsage()
    for raw in rs.response_events(response):
        stream.feed(event_json(raw) or {})
    assert stream.usage == usage and stream.finish_reason == "length"
    # gpt-5.4: $2.50 in, $15 out per MTok (https://developers.openai.com/api/docs/models/gpt-5.4).
    assert cost_of("openai", "gpt-5.4", stream.usage).total == (1500 * Decimal("2.50") + 16 * Decimal(15)) / M


def test_golden_gpt_5_6_written_tokens_are_inside_input_and_billed_at_their_ttl():
    wire = {"input_tokens": 5000, "input_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 3000},
            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}}
    usage = rs.parse_usage(wire, write_ttl="30m")
    assert usage == Usage(uncached_input=1000, cache_read=1000, cache_writes={"30m": 3000}, output=10)
    cost = cost_of("openai", "gpt-5.6-sol", usage)
    assert cost.total == (1000 * Decimal(4) + 1000 * Decimal("0.40") + 3000 * Decimal(5) + 10 * Decimal(20)) / M
    assert rs.usage_json(usage)["input_tokens"] == 5000


def test_golden_writes_split_by_ttl_are_billed_each_at_its_own_price():
    """A breakpoint may carry its own `ttl`: one request writes at 12h and at 30m, and the answer's
    `cache_write_tokens_details` says how much of each (openai-python 3.57.0, `response_usage.py`)."""
    wire = {"input_tokens": 5000, "input_tokens_details": {
        "cached_tokens": 0, "cache_write_tokens": 4000,
        "cache_write_tokens_details": {"ttl_30m_tokens": 1000, "ttl_12h_tokens": 3000}}, "output_tokens": 10}
    usage = rs.parse_usage(wire, write_ttl="30m")
    assert usage.cache_writes == {"30m": 1000, "12h": 3000} and usage.uncached_input == 1000
    # gpt-6.2-sol: $2 in, $2.50 a 30-minute write, $5 a 12-hour one, $10 out per MTok (its model page).
    cost = cost_of("openai", "gpt-6.2-sol", usage)
    assert cost.total == (1000 * Decimal(2) + 1000 * Decimal("2.50") + 3000 * Decimal(5) + 10 * Decimal(10)) / M
    assert rs.parse_usage(rs.usage_json(usage)) == usage        # the mock answers in the same shape
    # Details that do not add up to the total are not trusted: all at the request's TTL.
    odd = {**wire, "input_tokens_details": {**wire["input_tokens_details"], "cache_write_tokens_details": {"ttl_30m_tokens": 5}}}
    assert rs.parse_usage(odd, write_ttl="30m").cache_writes == {"30m": 4000}
