"""Request bodies produced by the real openai, anthropic and google-genai SDKs survive parse -> encode
byte for byte, and the SDKs parse our responses and streams with the usage we meant."""

from __future__ import annotations

import json

import pytest

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.dialects.sse import parse_sse, split_lines
from tests.core.support_sdk_capture import USAGE, Capture, anthropic_client, gemini_client, openai_client

LONG_SYSTEM = "You are a support agent for ACME. " * 40
TOOLS_AN = [{"name": "get_weather", "description": "Weather for a city",
             "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
TOOLS_OA = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                             "parameters": TOOLS_AN[0]["input_schema"]}}]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def assert_round_trip(module, body: dict, **kw) -> None:
    conv = module.parse_request(body, **kw)
    assert json.dumps(module.encode_request(conv)) == json.dumps(body)


def anthropic_calls(client) -> None:
    client.messages.create(model="claude-opus-5", max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    client.messages.create(
        model="claude-opus-5", max_tokens=64, stop_sequences=["END"], service_tier="auto",
        cache_control={"type": "ephemeral"},
        metadata={"user_id": "u-1"}, tools=TOOLS_AN, tool_choice={"type": "auto"},
        system=[{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        messages=[
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "A long doc."},
                 "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "What is in these?"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Let me check.", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Sunny"}]},
                {"type": "text", "text": "Thanks"}]},
        ],
        thinking={"type": "enabled", "budget_tokens": 1024},
        extra_body={"some_future_field": {"x": [1, 2]}},
    )
    with client.messages.stream(model="claude-haiku-5-5", max_tokens=16, system=LONG_SYSTEM,
                                messages=[{"role": "user", "content": "stream please"}]) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "Hello, world"
    assert final.usage.cache_read_input_tokens == USAGE.cache_read
    assert final.usage.input_tokens == USAGE.uncached_input
    assert final.usage.output_tokens == USAGE.output
    client.messages.count_tokens(model="claude-opus-5", messages=[{"role": "user", "content": "count"}])


def test_anthropic_sdk_bodies_round_trip():
    cap = Capture()
    anthropic_calls(anthropic_client(cap))
    assert len(cap.bodies) == 4
    for request, body in zip(cap.requests, cap.bodies, strict=True):
        assert_round_trip(an, body, count_tokens=request.url.path.endswith("count_tokens"))


def test_anthropic_sdk_reads_our_usage():
    cap = Capture()
    msg = anthropic_client(cap).messages.create(model="claude-opus-5", max_tokens=8,
                                                messages=[{"role": "user", "content": "Hi"}])
    assert msg.usage.input_tokens == 50
    assert msg.usage.cache_read_input_tokens == 2048
    assert msg.usage.cache_creation_input_tokens == 130
    assert msg.usage.cache_creation.ephemeral_1h_input_tokens == 30
    assert an.parse_usage(msg.usage.model_dump()) == USAGE


def openai_calls(client) -> None:
    client.chat.completions.create(model="gpt-5.4-mini", messages=[{"role": "user", "content": "Hi"}])
    client.chat.completions.create(
        model="gpt-5.4", temperature=0.3, max_completion_tokens=100, user="u-1", seed=7,
        prompt_cache_key="route-a", tools=TOOLS_OA, tool_choice="auto", parallel_tool_calls=False,
        response_format={"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}}},
        messages=[
            {"role": "developer", "content": LONG_SYSTEM},
            {"role": "user", "content": [{"type": "text", "text": "Look"},
                                         {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
            {"role": "assistant", "content": "It is sunny.", "name": "bot"},
            {"role": "user", "content": "Thanks"},
        ],
        prompt_cache_options={"mode": "implicit", "ttl": "30m"},
        extra_body={"some_future_field": True},
    )
    stream = client.chat.completions.create(model="gpt-5.4", stream=True, stream_options={"include_usage": True},
                                            messages=[{"role": "system", "content": LONG_SYSTEM},
                                                      {"role": "user", "content": "stream please"}])
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello, world"
    last = chunks[-1]
    assert last.choices == [] and last.usage.prompt_tokens_details.cached_tokens == USAGE.cache_read
    assert last.usage.prompt_tokens == USAGE.input_total


def test_openai_sdk_bodies_round_trip():
    cap = Capture()
    openai_calls(openai_client(cap))
    assert len(cap.bodies) == 3
    for body in cap.bodies:
        assert_round_trip(oa, body)


def test_openai_sdk_reads_our_usage():
    cap = Capture(usage=USAGE.__class__(uncached_input=300, cache_read=1024, output=9))
    resp = openai_client(cap).chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    assert resp.usage.prompt_tokens == 1324
    assert resp.usage.prompt_tokens_details.cached_tokens == 1024
    assert oa.parse_usage(resp.usage.model_dump()) == cap.usage


def gemini_calls(client) -> None:
    from google.genai import types

    client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    client.models.generate_content(
        model="gemini-3.8-flash",
        contents=[
            types.Content(role="user", parts=[types.Part(text="Look"),
                                              types.Part.from_bytes(data=b"\x89PNG", mime_type="image/png")]),
            types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name="get_weather", args={"city": "Paris"}))]),
            types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(name="get_weather", response={"result": "Sunny"}))]),
        ],
        config=types.GenerateContentConfig(
            system_instruction=LONG_SYSTEM, temperature=0.1, max_output_tokens=50, stop_sequences=["END"],
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name="get_weather", description="Weather", parameters={"type": "OBJECT", "properties": {"city": {"type": "STRING"}}})])],
        ),
    )
    text = "".join(c.text or "" for c in client.models.generate_content_stream(
        model="gemini-3.5-flash", contents="stream please",
        config=types.GenerateContentConfig(system_instruction="Be brief.")))
    assert text == "Hello, world"


def test_gemini_sdk_bodies_round_trip():
    cap = Capture()
    gemini_calls(gemini_client(cap))
    assert len(cap.bodies) == 3
    for request, body in zip(cap.requests, cap.bodies, strict=True):
        model = request.url.path.split("/models/")[-1].split(":")[0]
        assert_round_trip(ge, body, model=model)
    assert ge.parse_request(cap.bodies[1], model="gemini-3.8-flash").segments[0].role == "system"


def test_gemini_sdk_reads_our_usage():
    cap = Capture(usage=USAGE.__class__(uncached_input=10, cache_read=4096, output=3))
    resp = gemini_client(cap).models.generate_content(model="gemini-3.5-flash", contents="Hi")
    meta = resp.usage_metadata
    assert (meta.prompt_token_count, meta.cached_content_token_count, meta.candidates_token_count) == (4106, 4096, 3)
    assert ge.parse_usage(resp.model_dump(by_alias=True, exclude_none=True)["usageMetadata"]) == cap.usage


@pytest.mark.parametrize("module", [an, oa, ge], ids=["anthropic", "openai", "gemini"])
def test_stream_usage_reads_final_usage_from_our_stream(module):
    raw = b"".join(module.stream_events("m", ["a", "b"], USAGE))
    # Split at awkward places, as network reads do.
    pieces = [raw[i:i + 7] for i in range(0, len(raw), 7)]
    acc = module.StreamUsage()
    for ev in parse_sse(split_lines(pieces)):
        if ev.data != "[DONE]":
            acc.feed(ev.json())
    expected = USAGE if module is an else USAGE.__class__(USAGE.uncached_input + USAGE.cache_write, USAGE.cache_read, {}, USAGE.output)
    if module is oa:
        expected = USAGE.__class__(USAGE.uncached_input, USAGE.cache_read, {"30m": USAGE.cache_write}, USAGE.output)
    assert acc.usage == expected
