"""The mocks answer agents as the providers document: tool calls per `tool_choice` in the four formats, whole
and streamed in each provider's own delta shape, text after a tool result unless the caller forces a call, and
structured-output requests answered with JSON their schema accepts (checked by jsonschema and the SDKs' parsers)."""

from __future__ import annotations

import json
import uuid

import anthropic
import jsonschema
import openai
import pytest
from google import genai
from google.genai import types
from pydantic import BaseModel

from prefixgate.simulation.mock.schema_value import value_for
from prefixgate.simulation.mock.server import MockContext, create_app
from tests.support_services import ServerThread

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
           "required": ["city", "unit"]}
TIME = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
# The schema's fixed values: strings "mock", an enum's first value.
WEATHER_ARGS = {"city": "mock", "unit": "c"}


class City(BaseModel):
    name: str
    population: int
    districts: list[str]
    mayor: str | None = None


@pytest.fixture(scope="module")
def url():
    with ServerThread(create_app(MockContext())) as server:
        yield server.url


def key() -> str:
    return "sk-test-" + uuid.uuid4().hex


# ---- the schema values ------------------------------------------------------------------------------------

@pytest.mark.parametrize("schema", [
    City.model_json_schema(),
    {"$defs": {"P": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5}}, "required": ["n"]}},
     "type": "object", "properties": {"ps": {"type": "array", "items": {"$ref": "#/$defs/P"}, "minItems": 2}},
     "required": ["ps"]},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                      "code": {"type": "string", "minLength": 10},
                                      "either": {"anyOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0}]},
                                      "tag": {"const": "x"}}, "required": ["when", "code", "either", "tag"]},
])
def test_schema_values_validate(schema):
    jsonschema.validate(value_for(schema), schema)


# ---- Chat Completions ---------------------------------------------------------------------------------------

def _oa_tools():
    return [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
            {"type": "function", "function": {"name": "get_time", "parameters": TIME}}]


def _oa(url):
    return openai.OpenAI(base_url=url + "/v1", api_key=key(), max_retries=0)


def test_chat_tool_choice_named_required_auto_none(url):
    client = _oa(url)
    ask = [{"role": "user", "content": "Hello there"}]
    named = client.chat.completions.create(model="gpt-5.4", messages=ask, tools=_oa_tools(),
                                           tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert named.choices[0].finish_reason == "tool_calls" and named.choices[0].message.content is None
    assert named.choices[0].message.tool_calls[0].function.name == "get_time"
    required = client.chat.completions.create(model="gpt-5.4", messages=ask, tools=_oa_tools(), tool_choice="required")
    call = required.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == WEATHER_ARGS
    after = [*ask, required.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": "18C"}]
    # Still forced: the tool not yet called (so a forced loop moves on to its output tool, as real agents do).
    forced = client.chat.completions.create(model="gpt-5.4", messages=after, tools=_oa_tools(), tool_choice="required")
    assert forced.choices[0].message.tool_calls[0].function.name == "get_time"
    answered = client.chat.completions.create(model="gpt-5.4", messages=after, tools=_oa_tools())
    assert answered.choices[0].finish_reason == "stop" and answered.choices[0].message.content
    auto = client.chat.completions.create(model="gpt-5.4", tools=_oa_tools(),
                                          messages=[{"role": "user", "content": "Get the weather in Paris"}])
    assert auto.choices[0].message.tool_calls[0].function.name == "get_weather"
    chat = client.chat.completions.create(model="gpt-5.4", messages=ask, tools=_oa_tools())
    assert chat.choices[0].message.tool_calls is None and chat.choices[0].message.content
    none = client.chat.completions.create(model="gpt-5.4", tools=_oa_tools(), tool_choice="none",
                                          messages=[{"role": "user", "content": "Get the weather in Paris"}])
    assert none.choices[0].message.tool_calls is None


def test_chat_streams_a_call_in_openais_delta_shape(url):
    chunks = list(_oa(url).chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "hi"}], tools=_oa_tools(), tool_choice="required",
        stream=True, stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].tool_calls[0].id.startswith("call_") and deltas[0].tool_calls[0].function.name == "get_weather"
    args = "".join(t.function.arguments or "" for d in deltas for t in d.tool_calls or [])
    assert json.loads(args) == WEATHER_ARGS and len([d for d in deltas if d.tool_calls]) > 2   # arguments in pieces
    assert chunks[-2].choices[0].finish_reason == "tool_calls" and chunks[-1].usage.completion_tokens > 0


@pytest.mark.parametrize("stream", [False, True])
def test_chat_structured_output_parses(url, stream):
    client = _oa(url)
    if stream:
        with client.chat.completions.stream(model="gpt-5.4", messages=[{"role": "user", "content": "A city"}],
                                            response_format=City) as s:
            parsed = s.get_final_completion().choices[0].message.parsed
    else:
        parsed = client.chat.completions.parse(model="gpt-5.4", messages=[{"role": "user", "content": "A city"}],
                                               response_format=City).choices[0].message.parsed
    assert parsed == City(name="mock", population=1, districts=["mock"], mayor="mock")


# ---- Messages ------------------------------------------------------------------------------------------------

def _an_tools():
    return [{"name": "get_weather", "input_schema": WEATHER}, {"name": "get_time", "input_schema": TIME}]


@pytest.mark.parametrize("stream", [False, True])
def test_messages_tool_choice_and_stream(url, stream):
    client = anthropic.Anthropic(base_url=url, api_key=key(), max_retries=0)

    def create(**kw):
        args = {"model": "claude-sonnet-5-5", "max_tokens": 200, "tools": _an_tools(), **kw}
        if stream:
            with client.messages.stream(**args) as s:
                return s.get_final_message()
        return client.messages.create(**args)

    ask = [{"role": "user", "content": "Hello there"}]
    named = create(messages=ask, tool_choice={"type": "tool", "name": "get_time"})
    assert named.stop_reason == "tool_use" and [b.type for b in named.content] == ["tool_use"]
    assert named.content[0].name == "get_time" and named.content[0].id.startswith("toolu_")
    any_ = create(messages=ask, tool_choice={"type": "any"})
    assert any_.content[0].name == "get_weather" and any_.content[0].input == WEATHER_ARGS
    after = [*ask, {"role": "assistant", "content": [b.model_dump() for b in any_.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": any_.content[0].id, "content": "18C"}]}]
    answered = create(messages=after)
    assert answered.stop_reason == "end_turn" and answered.content[0].type == "text"
    # The user named both tools: auto calls one, then answers (a tool result ends an auto turn).
    both = [{"role": "user", "content": "Get the weather and the time in Paris"}]
    first = create(messages=both)
    assert first.content[0].name == "get_weather"
    both += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": "18C"}]}]
    assert create(messages=both).content[0].type == "text"
    assert create(messages=after, tool_choice={"type": "any"}).content[0].name == "get_time"
    auto = create(messages=[{"role": "user", "content": "What time is it? Get the time for Oslo."}])
    assert auto.content[0].name == "get_time"


def test_messages_structured_output(url):
    client = anthropic.Anthropic(base_url=url, api_key=key(), max_retries=0)
    reply = client.messages.create(model="claude-sonnet-5-5", max_tokens=200,
                                   messages=[{"role": "user", "content": "A city"}],
                                   output_config={"format": {"type": "json_schema", "schema": City.model_json_schema()}})
    assert City.model_validate_json(reply.content[0].text).districts == ["mock"]


# ---- Gemini --------------------------------------------------------------------------------------------------

def _gtools():
    return [types.Tool(function_declarations=[types.FunctionDeclaration(name="get_weather", parameters_json_schema=WEATHER),
                                              types.FunctionDeclaration(name="get_time", parameters_json_schema=TIME)])]


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_function_calling_modes(url, stream):
    client = genai.Client(api_key=key(), http_options=types.HttpOptions(base_url=url))

    def call(text: str, mode: str | None = None, allowed: list[str] | None = None):
        config = types.GenerateContentConfig(tools=_gtools(), automatic_function_calling={"disable": True})
        if mode:
            config.tool_config = types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
                mode=mode, allowed_function_names=allowed))
        if stream:
            parts = [p for c in client.models.generate_content_stream(model="gemini-3.5-flash", contents=text,
                                                                      config=config)
                     for p in c.candidates[0].content.parts or []]
        else:
            parts = client.models.generate_content(model="gemini-3.5-flash", contents=text,
                                                   config=config).candidates[0].content.parts
        return [p.function_call for p in parts if p.function_call]

    named = call("Hello there", "ANY", ["get_time"])
    assert [c.name for c in named] == ["get_time"] and named[0].args == {"zone": "mock"}
    assert [c.name for c in call("Hello there", "ANY")] == ["get_weather"]
    assert [c.name for c in call("Get the weather in Rome")] == ["get_weather"]
    assert call("Get the weather in Rome", "NONE") == [] and call("Hello there") == []


def test_gemini_structured_output_parses(url):
    client = genai.Client(api_key=key(), http_options=types.HttpOptions(base_url=url))
    reply = client.models.generate_content(model="gemini-3.5-flash", contents="A city", config=types.GenerateContentConfig(
        response_mime_type="application/json", response_schema=City))
    assert isinstance(reply.parsed, City) and reply.parsed.population == 1


# ---- Responses -----------------------------------------------------------------------------------------------

def test_responses_named_choice_and_a_forced_call_after_output(url):
    client = _oa(url)
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER},
             {"type": "function", "name": "get_time", "parameters": TIME}]
    named = client.responses.create(model="gpt-5.4", input="Hello", tools=tools,
                                    tool_choice={"type": "function", "name": "get_time"})
    assert [i.name for i in named.output if i.type == "function_call"] == ["get_time"]
    call = next(i for i in named.output if i.type == "function_call")
    output = [{"type": "function_call_output", "call_id": call.call_id, "output": "12:00"}]
    forced = client.responses.create(model="gpt-5.4", previous_response_id=named.id, input=output, tools=tools,
                                     tool_choice="required")
    assert [i.name for i in forced.output if i.type == "function_call"] == ["get_weather"]
    parsed = client.responses.parse(model="gpt-5.4", input="A city", text_format=City).output_parsed
    assert parsed.name == "mock" and parsed.districts == ["mock"]


def test_responses_streams_a_call_as_function_call_argument_events(url):
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
    with _oa(url).responses.stream(model="gpt-5.4", input="Get the weather in Oslo", tools=tools) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.done" in kinds and "response.output_item.added" in kinds
    call = next(i for i in final.output if i.type == "function_call")
    assert call.name == "get_weather" and json.loads(call.arguments) == WEATHER_ARGS
