"""The provider SDKs through the zero-config gateway and the mocks, each in its main modes: a call, a stream, a
tool call and its answer, structured output, and a repeated prompt whose cache read is taken from the SDK's own
usage object. Base URLs as docs/clients.md gives them."""

from __future__ import annotations

import json
from decimal import Decimal

import anthropic
import openai
from google import genai
from google.genai import types
from pydantic import BaseModel

from tests.clients.conftest import SYSTEM, WEATHER_PROMPT

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


class Trip(BaseModel):
    city: str
    nights: int


# ---- openai: Chat Completions and Responses ----------------------------------------------------------------

def _oa(gateway: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway + "/v1", api_key=key, max_retries=0)


def test_openai_chat_call_stream_and_cache(gateway, key):
    client = _oa(gateway, key)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}]
    first = client.chat.completions.create(model="gpt-5.4", messages=messages)
    assert first.choices[0].message.content and first.usage.prompt_tokens_details.cached_tokens == 0
    chunks = list(client.chat.completions.create(model="gpt-5.4", messages=messages, stream=True,
                                                 stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= 1024


def test_openai_chat_tool_loop_and_structured_output(gateway, key):
    client = _oa(gateway, key)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    messages = [{"role": "user", "content": WEATHER_PROMPT}]
    ask = client.chat.completions.create(model="gpt-5.4", messages=messages, tools=tools)
    call = ask.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "mock"}
    messages += [ask.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21C"}]
    assert client.chat.completions.create(model="gpt-5.4", messages=messages, tools=tools).choices[0].message.content
    trip = client.chat.completions.parse(model="gpt-5.4", messages=[{"role": "user", "content": "Plan a trip"}],
                                         response_format=Trip).choices[0].message.parsed
    assert trip == Trip(city="mock", nights=1)


def test_openai_responses_call_stream_structured_and_cache(gateway, key):
    client = _oa(gateway, key)
    first = client.responses.create(model="gpt-5.4", instructions=SYSTEM, input="Hi")
    assert first.output_text and first.usage.input_tokens_details.cached_tokens == 0
    with client.responses.stream(model="gpt-5.4", instructions=SYSTEM, input="Hi") as stream:
        final = stream.get_final_response()
    assert final.output_text and final.usage.input_tokens_details.cached_tokens >= 1024
    parsed = client.responses.parse(model="gpt-5.4", input="Plan a trip", text_format=Trip).output_parsed
    assert parsed == Trip(city="mock", nights=1)


def test_openai_lists_models(gateway, key):
    assert "gpt-5.4" in {m.id for m in _oa(gateway, key).models.list()}


# ---- anthropic ----------------------------------------------------------------------------------------------

def test_anthropic_call_stream_tools_structured_and_cache(gateway, key):
    client = anthropic.Anthropic(base_url=gateway, api_key=key, max_retries=0)
    args = {"model": "claude-sonnet-5-5", "max_tokens": 200, "system": SYSTEM}
    first = client.messages.create(**args, messages=[{"role": "user", "content": "Hi"}])
    assert first.content[0].text and first.usage.cache_read_input_tokens == 0
    with client.messages.stream(**args, messages=[{"role": "user", "content": "Hi"}]) as stream:
        final = stream.get_final_message()
    assert final.content[0].text and final.usage.cache_read_input_tokens > 0     # the gateway placed the marker
    tools = [{"name": "get_weather", "description": "Weather by city", "input_schema": WEATHER}]
    ask = client.messages.create(**args, tools=tools, messages=[{"role": "user", "content": WEATHER_PROMPT}])
    assert ask.stop_reason == "tool_use" and ask.content[0].input == {"city": "mock"}
    reply = client.messages.create(**args, tools=tools, messages=[
        {"role": "user", "content": WEATHER_PROMPT}, {"role": "assistant", "content": ask.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": ask.content[0].id, "content": "21C"}]}])
    assert reply.stop_reason == "end_turn" and reply.content[0].text
    structured = client.messages.create(**args, messages=[{"role": "user", "content": "Plan a trip"}],
                                        output_config={"format": {"type": "json_schema",
                                                                  "schema": Trip.model_json_schema()}})
    assert Trip.model_validate_json(structured.content[0].text) == Trip(city="mock", nights=1)
    assert "claude-sonnet-5-5" in {m.id for m in client.models.list()}


# ---- google-genai -------------------------------------------------------------------------------------------

def test_google_genai_call_stream_tools_structured_and_cache(gateway, key):
    client = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=gateway))
    config = types.GenerateContentConfig(system_instruction=SYSTEM)
    first = client.models.generate_content(model="gemini-3.5-flash", contents="Hi", config=config)
    assert first.text and not first.usage_metadata.cached_content_token_count
    chunks = list(client.models.generate_content_stream(model="gemini-3.5-flash", contents="Hi", config=config))
    assert "".join(c.text or "" for c in chunks)
    assert chunks[-1].usage_metadata.cached_content_token_count > 0
    # Automatic function calling: the SDK runs the Python function and sends its result back.
    calls: list[str] = []

    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return "Sunny, 21C"

    answer = client.models.generate_content(model="gemini-3.5-flash", contents=WEATHER_PROMPT,
                                            config=types.GenerateContentConfig(tools=[get_weather]))
    assert calls == ["mock"] and answer.text
    trip = client.models.generate_content(model="gemini-3.5-flash", contents="Plan a trip", config=types.GenerateContentConfig(
        response_mime_type="application/json", response_schema=Trip)).parsed
    assert trip == Trip(city="mock", nights=1)
    assert "models/gemini-3.5-flash" in {m.name for m in client.models.list()}


# ---- helper models clients call by default ------------------------------------------------------------------

def test_helper_models_clients_call_by_default(gateway, key):
    # opencode and pi title their sessions with gpt-5.4-nano; gemini-cli's router asks a Flash-Lite model.
    raw = _oa(gateway, key).chat.completions.with_raw_response.create(
        model="gpt-5.4-nano", messages=[{"role": "user", "content": "Title this chat"}])
    reply = raw.parse()
    # gpt-5.4-nano: $0.20 input, $1.25 output per million tokens (pydantic genai-prices).
    expected = (reply.usage.prompt_tokens * Decimal("0.20") + reply.usage.completion_tokens * Decimal("1.25")) / 10**6
    assert reply.choices[0].message.content and Decimal(raw.headers["x-prefixgate-cost-usd"]) == expected
    client = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=gateway))
    assert client.models.generate_content(model="gemini-3.5-flash-lite", contents="Route this").text
