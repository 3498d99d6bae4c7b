"""The wire-format registry: every registered adapter round-trips requests, answers, streams and usage
through its own interface, and an unknown format is refused by name. A new format registered without a
sample here fails `test_every_registered_format_has_a_sample`."""

from __future__ import annotations

import json

import pytest

from prefixgate.dialects import WIRE_FORMATS, format_of_path, wire_format
from prefixgate.dialects.neutral import Chat, Part, Reply, Tool, ToolCall, Turn
from prefixgate.dialects.wire import WireFormat
from prefixgate.errors import RequestError
from prefixgate.usage import Usage

# Per format: a model request path, a request body in the format, and the model that path names.
SAMPLES: dict[str, tuple[str, dict]] = {
    "openai": ("/v1/chat/completions", {
        "model": "gpt-5.4", "messages": [{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "temperature": 0.2}),
    "anthropic": ("/v1/messages", {
        "model": "claude-sonnet-4-6", "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Hi"}]}),
    "responses": ("/v1/responses", {
        "model": "gpt-5.4", "instructions": "Be brief.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}], "temperature": 0.2}),
    "gemini": ("/v1beta/models/gemini-3.5-flash:generateContent", {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}], "generationConfig": {"temperature": 0.2}}),
    "interactions": ("/v1/interactions", {
        "model": "gemini-3.8-flash", "system_instruction": "Be brief.",
        "input": [{"type": "user_input", "content": [{"type": "text", "text": "Hi"}]}],
        "generation_config": {"temperature": 0.2}}),
    "bedrock_invoke": ("/model/us.anthropic.claude-sonnet-5-5/invoke", {
        "anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Hi"}]}),
    "bedrock_converse": ("/model/anthropic.claude-sonnet-4-6/converse-stream", {
        "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [{"text": "Hi"}]}], "inferenceConfig": {"maxTokens": 64}}),
    "vertex_anthropic": ("/v1/projects/p-1/locations/us-east5/publishers/anthropic/models/claude-haiku-4-5@20251001"
                         ":streamRawPredict", {
        "anthropic_version": "vertex-2023-10-16", "max_tokens": 64, "stream": True,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Hi"}]}),
    "vertex_gemini": ("/v1beta1/projects/p-1/locations/global/publishers/google/models/gemini-3.5-flash:generateContent", {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}], "generationConfig": {"temperature": 0.2}}),
}
# Where each format's upstream lives: a host, or Vertex's project/location resource root.
BASE = {"vertex_anthropic": "https://api.example.com/v1/projects/p-1/locations/us-east5",
        "vertex_gemini": "https://api.example.com/v1/projects/p-1/locations/us-east5"}
# Usage every format can express (not every one reports cache writes).
USAGE = Usage(uncached_input=10, cache_read=90, output=3)
FORMATS = sorted(WIRE_FORMATS)


def test_every_registered_format_has_a_sample():
    assert set(SAMPLES) == set(WIRE_FORMATS)


def test_an_unknown_format_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match=r"unknown wire format 'vertex'; expected one of anthropic, bedrock_converse, "
                                         r"bedrock_invoke, gemini, interactions, openai, responses, vertex_anthropic, vertex_gemini"):
        wire_format("vertex")


@pytest.mark.parametrize("name", FORMATS)
def test_a_format_is_registered_under_its_own_name_and_fills_the_interface(name):
    wire = wire_format(name)
    assert isinstance(wire, WireFormat) and wire.name == name
    # natural_finishes too: without it the response cache would never store this format's answers.
    for attr in ("planner_provider", "span_name", "finish_from", "finish_to", "natural_finishes"):
        assert getattr(wire, attr), attr
    # A stream's end is seen in its bytes, or (base64 or binary payloads) by `ends_stream` on the parsed event.
    assert wire.terminal or type(wire).ends_stream is not WireFormat.ends_stream
    # Every neutral finish reason has a native one, and every native one read back is neutral.
    assert set(wire.finish_to) == {"stop", "length", "tool_calls", "content_filter"}
    assert set(wire.finish_from.values()) <= set(wire.finish_to)


@pytest.mark.parametrize("name", FORMATS)
def test_a_request_parsed_from_its_path_encodes_back_to_the_same_body(name):
    wire = wire_format(name)
    path, body = SAMPLES[name]
    parse = wire.parser_for(path)
    assert parse is not None and format_of_path(path) is wire
    conv = parse(json.dumps(body).encode())
    assert wire.encode_request(conv) == body
    assert wire.encode_request(wire.parse_request(body, model=conv.model)) == body


@pytest.mark.parametrize("name", FORMATS)
def test_a_bad_body_is_a_request_error_naming_the_field(name):
    with pytest.raises(RequestError) as err:
        wire_format(name).parse_request({"model": "m"}, model="m")
    assert err.value.field


@pytest.mark.parametrize("name", FORMATS)
def test_usage_of_a_whole_answer_round_trips(name):
    wire = wire_format(name)
    answer = wire.build_response("m", "Hello", USAGE)
    assert wire.has_usage(answer) and wire.usage_of(answer) == USAGE


@pytest.mark.parametrize("name", FORMATS)
def test_a_reply_round_trips_through_the_neutral_form(name):
    wire = wire_format(name)
    reply = Reply("Checking.", USAGE, "tool_calls", [ToolCall("c1", "weather", {"city": "Oslo"})])
    back = wire.read_reply(wire.write_reply(reply, "m"))
    assert (back.text, back.usage, back.finish, back.tool_calls) == (reply.text, reply.usage, reply.finish,
                                                                     reply.tool_calls)


@pytest.mark.parametrize("name", FORMATS)
def test_a_chat_round_trips_through_the_neutral_form(name):
    wire = wire_format(name)
    chat = Chat([Turn("system", [Part("text", "Be brief.")]), Turn("user", [Part("text", "Weather in Oslo?")]),
                 Turn("assistant", [Part("tool_call", call_id="c1", name="weather", args={"city": "Oslo"})]),
                 Turn("tool", [Part("tool_result", "Sunny", call_id="c1", name="weather")])],
                tools=[Tool("weather", "the weather", {"type": "object", "properties": {}})], max_tokens=50)
    body = wire.write_chat(chat, "m")
    wire.parse_request(body, model="m")        # a valid body of the format
    back = wire.read_chat(body)
    assert [t.role for t in back.turns] == ["system", "user", "assistant", "tool"]
    assert back.turns[1].parts[0].text == "Weather in Oslo?"
    assert (back.turns[2].parts[0].name, back.turns[2].parts[0].args) == ("weather", {"city": "Oslo"})
    assert "Sunny" in back.turns[3].parts[0].text
    assert [t.name for t in back.tools] == ["weather"] and back.max_tokens == 50


@pytest.mark.parametrize("name", FORMATS)
def test_a_written_stream_reads_back_as_the_same_deltas_and_usage(name):
    wire = wire_format(name)
    writer = wire.stream_writer("m")
    raw = writer.write([("text", "Hel"), ("text", "lo"), ("finish", "length")]) + writer.finish(USAGE)
    # Network reads split events anywhere.
    buffer, events = bytearray(), []
    for i in range(0, len(raw), 7):
        events += wire.framing.split(buffer, raw[i:i + 7])
    counter, text, finish, ended = wire.stream_usage(), "", None, False
    for event in events:
        ended = ended or (wire.terminal is not None and wire.terminal in event)
        payload = wire.framing.payload(event)
        if payload is None:
            continue
        # A format may end a stream several ways (Responses: completed, incomplete, failed).
        ended = ended or wire.ends_stream(payload)
        counter.feed(payload)
        for d in wire.read_deltas(payload):
            text += d[1] if d[0] == "text" else ""
            finish = d[1] if d[0] == "finish" else finish
    assert (text, finish, counter.usage, ended) == ("Hello", "length", USAGE, True)


@pytest.mark.parametrize("name", FORMATS)
def test_a_stream_error_event_is_read_back_as_an_error(name):
    wire = wire_format(name)
    event = wire.error_event(RequestError("upstream broke", status=502, kind="server"))
    payload = wire.framing.payload(wire.framing.split(bytearray(), event)[0])
    assert payload is not None and wire.stream_error(payload) == "upstream broke"


@pytest.mark.parametrize("name", FORMATS)
def test_an_upstream_request_has_a_url_and_the_key(name):
    wire = wire_format(name)
    url = wire.upstream_url(BASE.get(name, "https://api.example.com"), "m-1", stream=False)
    assert url.startswith("https://api.example.com/")
    assert "k-123" in "".join(wire.auth_headers("k-123").values())
