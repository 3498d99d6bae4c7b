"""A compatible server repeating a tool call's id on every chunk (LiteLLM's proxy, BerriAI/litellm#20480) streams one
call, merged by index as the OpenAI SDK does, never one call per chunk."""

from __future__ import annotations

import json

from gateway.response_cache import Answer
from prefixgate.dialects import anthropic as an
from prefixgate.dialects import openai as oa
from prefixgate.dialects.sse import parse_sse, split_lines
from prefixgate.usage import Usage


def _call_chunk(arguments: str, name: str | None = None) -> dict:
    fn = {"arguments": arguments} | ({"name": name} if name else {})
    return {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_abc", "type": "function", "function": fn}]}}]}


CHUNKS = [_call_chunk('{"qu', "search"), _call_chunk('ery":'), _call_chunk('"hello"}'),
          {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]


def test_a_claude_caller_gets_one_tool_use_with_the_whole_arguments():
    writer = an.WIRE.stream_writer("claude-sonnet-5-5")
    out = b"".join(writer.write(oa.WIRE.read_deltas(c)) for c in CHUNKS) + writer.finish(Usage(uncached_input=4, output=9))
    events = [e.json() for e in parse_sse(split_lines([out]))]
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert starts == [{"type": "tool_use", "id": "call_abc", "name": "search", "input": {}}]
    args = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
    assert json.loads(args) == {"query": "hello"}


def test_the_response_cache_keeps_the_whole_arguments():
    answer = Answer()
    for c in CHUNKS:
        answer.feed(oa.WIRE.read_deltas(c), oa.WIRE)
    assert list(answer.calls.values()) == [["call_abc", "search", '{"query":"hello"}']]


def test_calls_without_an_index_but_with_their_own_ids_stay_apart_for_a_claude_caller():
    # A server that sends no `index` (read as 0) streams each call whole, with an id of its own.
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"id": ident, "type": "function", "function": {"name": "weather", "arguments": f'{{"city": "{city}"}}'}}]}}]}
        for ident, city in (("call_1", "Oslo"), ("call_2", "Rome"))]
    writer = an.WIRE.stream_writer("claude-sonnet-5-5")
    out = b"".join(writer.write(oa.WIRE.read_deltas(c)) for c in chunks) + writer.finish(Usage(uncached_input=4, output=9))
    events = [e.json() for e in parse_sse(split_lines([out]))]
    assert [e["content_block"]["id"] for e in events if e["type"] == "content_block_start"] == ["call_1", "call_2"]


def test_the_response_cache_keeps_calls_without_an_index_apart():
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"id": ident, "type": "function", "function": {"name": "weather", "arguments": f'{{"city":"{city}"}}'}}]}}]}
        for ident, city in (("call_1", "Oslo"), ("call_2", "Rome"))]
    answer = Answer()
    for c in chunks:
        answer.feed(oa.WIRE.read_deltas(c), oa.WIRE)
    assert list(answer.calls.values()) == [["call_1", "weather", '{"city":"Oslo"}'], ["call_2", "weather", '{"city":"Rome"}']]
