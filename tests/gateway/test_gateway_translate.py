"""Cross-dialect translation keeps content, tool calls and caching intent, and refuses what it cannot carry."""

from __future__ import annotations

import json

import pytest

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body, translate_reply
from prefixgate.errors import RequestError
from prefixgate.usage import Usage

ANTHROPIC = {
    "model": "claude-opus-5", "max_tokens": 100, "top_k": 5,
    "tools": [{"name": "weather", "description": "w", "input_schema": {"type": "object"},
               "cache_control": {"type": "ephemeral"}}],
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"},
                                     {"type": "text", "text": "Thanks", "cache_control": {"type": "ephemeral"}}]},
    ],
}


WEATHER_FN = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}


def test_anthropic_to_openai_keeps_tools_calls_and_breakpoints():
    body, notes = translate_body(ANTHROPIC, wire_format("anthropic"), wire_format("openai"), "gpt-6-sol")
    oa.parse_request(body)     # a valid OpenAI body
    msgs = body["messages"]
    assert msgs[0] == {"role": "system", "content": [{"type": "text", "text": "sys",
                                                      "prompt_cache_breakpoint": {"mode": "explicit"}}]}
    assert msgs[2]["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
    assert msgs[3] == {"role": "tool", "tool_call_id": "t1", "content": "Sunny"}
    assert msgs[4]["content"][0]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert any("top_k" in n for n in notes) and any("tool checkpoint" in n for n in notes)


def test_openai_to_anthropic_round_trip_keeps_checkpoint_positions():
    body, _ = translate_body(ANTHROPIC, wire_format("anthropic"), wire_format("openai"), "gpt-6-sol")
    back, _ = translate_body(body, wire_format("openai"), wire_format("anthropic"), "claude-opus-5")
    an.parse_request(back)
    assert back["system"] == [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert back["messages"][1]["content"][0] == {"type": "tool_use", "id": "t1", "name": "weather",
                                                 "input": {"city": "Paris"}}
    last = back["messages"][2]["content"]
    assert last[0]["type"] == "tool_result" and last[-1]["cache_control"]["type"] == "ephemeral"


def test_anthropic_to_gemini_answers_tool_calls_by_name():
    body, notes = translate_body(ANTHROPIC, wire_format("anthropic"), wire_format("gemini"), "gemini-3.5-flash")
    conv = ge.parse_request(body, model="gemini-3.5-flash")
    assert conv.segments[0].role == "system"
    assert body["contents"][1]["parts"][0]["functionCall"]["name"] == "weather"
    assert body["contents"][2]["parts"][0]["functionResponse"]["name"] == "weather"
    assert any("implicit caching" in n for n in notes)


@pytest.mark.parametrize("source,body,what", [
    ("gemini", {"contents": [{"parts": [{"text": "x"}]}], "cachedContent": "cachedContents/1"}, "cachedContent"),
    ("openai", {"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}, "n > 1"),
    ("anthropic", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                   "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "server tool"),
    # A tool's screenshot: the other formats' tool results hold text only; dropping it answered without it.
    ("anthropic", {"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "screen", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "the screen:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]},
    ]}, "tool_result content of type 'image'"),
    # Anthropic's structured output: a JSON schema the answer must follow.
    ("anthropic", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                   "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
     "output_config.format"),
    # Gemini's structured output, candidates and logprobs: the answer's shape, in either spelling.
    *[("gemini", {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": gen}, what) for gen, what in (
        ({"responseMimeType": "application/json", "responseSchema": {"type": "OBJECT"}}, "generationConfig.responseSchema"),
        ({"response_mime_type": "application/json"}, "generationConfig.responseMimeType"),
        ({"candidateCount": 2}, "generationConfig.candidateCount"),
        ({"responseLogprobs": True, "logprobs": 3}, "generationConfig.responseLogprobs"))],
    # The caller reads logprobs from the answer; a translated answer has none (they came back as null).
    ("openai", {"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": True}, "logprobs"),
    ("openai", {"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}, "logprobs"),
    # OpenAI's web search and spoken answers would not happen; the caller got a plain text answer.
    ("openai", {"model": "m", "messages": [{"role": "user", "content": "x"}], "web_search_options": {}},
     "web_search_options"),
    ("openai", {"model": "m", "messages": [{"role": "user", "content": "x"}], "modalities": ["text", "audio"],
                "audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    # The deprecated function calling: the functions were left out and the model answered without them.
    ("openai", {"model": "m", "messages": [{"role": "user", "content": "x"}],
                "functions": [{"name": "weather", "parameters": {"type": "object"}}]}, "functions"),
    ("openai", {"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": "{}"}},
        {"role": "function", "name": "weather", "content": "Sunny"}]}, "messages.1.function_call"),
    # A custom (free-form) tool went out as a function named "" and tool_choice allowed_tools became auto.
    ("openai", {"model": "m", "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "custom", "custom": {"name": "sql"}}]}, "tools.0"),
    ("openai", {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [WEATHER_FN],
                "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
                    {"type": "function", "function": {"name": "weather"}}]}}}, "tool_choice"),
])
def test_untranslatable_requests_are_refused_by_name(source, body, what):
    with pytest.raises(RequestError, match=what.replace(">", ">")) as refused:
        translate_body(body, wire_format(source), wire_format("openai" if source != "openai" else "anthropic"), "m")
    assert refused.value.field.startswith(what.split()[0])


def test_replies_carry_tool_calls_and_usage_across_dialects():
    usage = Usage(uncached_input=10, cache_read=90, cache_writes={"1h": 5}, output=3)
    src = an.build_response("claude-opus-5", "", usage, finish_reason="tool_use")
    src["content"] = [{"type": "tool_use", "id": "t9", "name": "weather", "input": {"city": "Oslo"}}]
    out = translate_reply(src, an.WIRE, oa.WIRE, "smart")
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert out["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "weather"
    assert oa.usage_from_response(out) == Usage(uncached_input=10, cache_read=90, cache_writes={"30m": 5}, output=3)
    gem = translate_reply(src, an.WIRE, ge.WIRE, "x")
    assert gem["candidates"][0]["content"]["parts"] == [{"functionCall": {"id": "t9", "name": "weather",
                                                                          "args": {"city": "Oslo"}}}]


def test_streamed_tool_calls_translate_openai_to_anthropic():
    from prefixgate.dialects.sse import parse_sse, split_lines

    writer = an.WIRE.stream_writer("fast")
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me check. "}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "weather", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"Rome"}'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    out = b"".join(writer.write(oa.WIRE.read_deltas(c)) for c in chunks) + writer.finish(Usage(uncached_input=4, output=2))
    events = [e.json() for e in parse_sse(split_lines([out]))]
    types = [e["type"] for e in events]
    assert types == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                     "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    assert events[4]["content_block"]["name"] == "weather"
    assert events[8]["delta"]["stop_reason"] == "tool_use" and events[8]["usage"]["input_tokens"] == 4
    usage = an.StreamUsage()
    for e in events:
        usage.feed(e)
    assert usage.usage == Usage(uncached_input=4, output=2)


PARALLEL_CALLS = {"model": "m", "messages": [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
        {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
    {"role": "tool", "tool_call_id": "c2", "content": "Rain"},
], "tools": [WEATHER_FN]}


def test_calls_replayed_into_gemini_3_carry_googles_stand_in_signature():
    # Gemini 3 refuses a replayed functionCall without a thoughtSignature (400 "Function call is missing a
    # thought_signature"); for history from another model Google documents the value below, on the first call of
    # a step (https://ai.google.dev/gemini-api/docs/thought-signatures).
    body, _ = translate_body(PARALLEL_CALLS, wire_format("openai"), wire_format("gemini"), "gemini-3.5-flash")
    calls = body["contents"][1]["parts"]
    assert calls[0]["thoughtSignature"] == "skip_thought_signature_validator"
    assert "thoughtSignature" not in calls[1]
    assert all("thoughtSignature" not in p for c in body["contents"] if c["role"] == "user" for p in c["parts"])


def test_gemini_2_5_gets_no_signature():
    body, _ = translate_body(PARALLEL_CALLS, wire_format("openai"), wire_format("gemini"), "gemini-2.5-flash")
    assert not any("thoughtSignature" in p for c in body["contents"] for p in c["parts"])


def _gemini_call(name: str, args: dict) -> dict:
    # The Gemini API's functionCall.id is optional; answers often carry none.
    return {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]},
                            "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2}}


def test_gemini_calls_without_ids_link_results_to_the_right_tool_turns_later():
    # An Anthropic agent's loop through a Gemini target: two turns, each one call answered without an id.
    first = translate_reply(_gemini_call("weather", {"city": "Oslo"}), ge.WIRE, an.WIRE, "m")["content"][0]
    second = translate_reply(_gemini_call("clock", {}), ge.WIRE, an.WIRE, "m")["content"][0]
    history = {"model": "m", "max_tokens": 50, "messages": [
        {"role": "user", "content": "Weather in Oslo, then the time?"},
        {"role": "assistant", "content": [first]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first["id"], "content": "Snow"}]},
        {"role": "assistant", "content": [second]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": second["id"], "content": "09:00"}]},
    ]}
    body, _ = translate_body(history, an.WIRE, ge.WIRE, "gemini-3.5-flash")
    answers = [p["functionResponse"]["name"] for c in body["contents"] for p in c["parts"] if "functionResponse" in p]
    assert answers == ["weather", "clock"]


def test_gemini_calls_streamed_in_separate_chunks_stay_separate_for_an_openai_caller():
    from prefixgate.dialects.sse import parse_sse, split_lines

    writer = oa.WIRE.stream_writer("m")
    events = [_gemini_call("weather", {"city": "Oslo"}), _gemini_call("weather", {"city": "Rome"})]
    out = b"".join(writer.write(ge.WIRE.read_deltas(e)) for e in events) + writer.finish(Usage(uncached_input=5, output=4))
    calls: dict[int, dict] = {}      # accumulated by index, as the OpenAI SDK does
    for e in parse_sse(split_lines([out])):
        if e.data == "[DONE]":
            continue
        for choice in e.json()["choices"]:
            for c in choice["delta"].get("tool_calls") or []:
                acc = calls.setdefault(c["index"], {"id": "", "args": ""})
                acc["id"] += c.get("id") or ""
                acc["args"] += c["function"].get("arguments") or ""
    assert [json.loads(c["args"]) for c in calls.values()] == [{"city": "Oslo"}, {"city": "Rome"}]
    assert calls[0]["id"] != calls[1]["id"]


def test_a_gemini_callers_parallel_calls_of_one_tool_keep_apart_in_claude():
    # Gemini calls without ids, twice the same function, answered in order; Anthropic refuses repeated
    # tool_use ids ("tool_use ids must be unique"), and each result must answer its own call.
    body = {"contents": [
        {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                                    {"functionCall": {"name": "weather", "args": {"city": "Rome"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"sky": "sun"}}},
                                   {"functionResponse": {"name": "weather", "response": {"sky": "rain"}}}]},
    ], "tools": [{"functionDeclarations": [{"name": "weather", "parameters": {"type": "object"}}]}]}
    out, _ = translate_body(body, ge.WIRE, an.WIRE, "claude-sonnet-5-5")
    calls, results = out["messages"][1]["content"], out["messages"][2]["content"]
    ids = {c["input"]["city"]: c["id"] for c in calls}
    assert len(set(ids.values())) == 2
    assert {r["tool_use_id"]: json.loads(r["content"]) for r in results} == {
        ids["Paris"]: {"sky": "sun"}, ids["Rome"]: {"sky": "rain"}}


@pytest.mark.parametrize("source,body,finish", [
    # Anthropic: "the model reached the context window limit" -- the answer was cut, as with max_tokens.
    ("anthropic", {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Once"}],
                   "stop_reason": "model_context_window_exceeded", "usage": {"input_tokens": 9, "output_tokens": 1}},
     "length"),
    # Gemini: blocked for prohibited content, a blocklist term or sensitive personal information.
    *[("gemini", {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": reason}],
                  "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 0}}, "content_filter")
      for reason in ("PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY")],
])
def test_a_cut_or_blocked_answer_is_not_reported_as_finished(source, body, finish):
    out = translate_reply(body, wire_format(source), oa.WIRE, "m")
    assert out["choices"][0]["finish_reason"] == finish


def _responses_turn(output) -> dict:
    return {"model": "m", "input": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ], "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]}


def test_a_responses_function_output_in_parts_reaches_claude_as_its_text():
    # The Responses API takes a function_call_output's output as a string or a list of input_text/input_image/
    # input_file parts; the text of the parts, not their JSON, is the tool's result.
    body, _ = translate_body(_responses_turn([{"type": "input_text", "text": "Snow, -3C"}]), wire_format("responses"),
                             an.WIRE, "claude-sonnet-5-5")
    assert body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "c1", "content": "Snow, -3C"}]
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    with pytest.raises(RequestError, match="input_image") as refused:
        translate_body(_responses_turn([image]), wire_format("responses"), an.WIRE, "claude-sonnet-5-5")
    assert refused.value.field.startswith("input.2.output.0")


ONE_AT_A_TIME = {
    # OpenAI Chat and Responses: parallel_tool_calls false; Anthropic: tool_choice.disable_parallel_tool_use.
    "openai": {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [WEATHER_FN],
               "parallel_tool_calls": False},
    "responses": {"model": "m", "input": "x", "parallel_tool_calls": False,
                  "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]},
    "anthropic": {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "x"}],
                  "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
                  "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
}


@pytest.mark.parametrize("source,target", [("openai", "anthropic"), ("responses", "anthropic"),
                                           ("anthropic", "openai"), ("anthropic", "responses")])
def test_one_tool_call_at_a_time_survives_translation(source, target):
    body, _ = translate_body(ONE_AT_A_TIME[source], wire_format(source), wire_format(target), "m")
    if target == "anthropic":
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    else:
        assert body["parallel_tool_calls"] is False


def test_one_tool_call_at_a_time_is_noted_where_the_target_cannot_say_it():
    _, notes = translate_body(ONE_AT_A_TIME["openai"], wire_format("openai"), ge.WIRE, "gemini-3.5-flash")
    assert any("parallel_tool_calls" in n for n in notes), notes


# Claude calling a tool without parameters: the block opens with input {} and its only delta is empty.
CLAUDE_NO_ARG_CALL = [
    {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                          "usage": {"input_tokens": 9, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "clock",
                                                                  "input": {}}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
]


def test_a_streamed_call_without_arguments_reaches_openai_callers_as_an_empty_object():
    from prefixgate.dialects.sse import parse_sse, split_lines

    chat = oa.WIRE.stream_writer("m")
    out = b"".join(chat.write(an.WIRE.read_deltas(e)) for e in CLAUDE_NO_ARG_CALL) + chat.finish(Usage(9, output=5))
    args = "".join(c["function"].get("arguments") or "" for e in parse_sse(split_lines([out])) if e.data != "[DONE]"
                   for ch in e.json()["choices"] for c in ch["delta"].get("tool_calls") or [])
    assert args == "{}"
    responses = wire_format("responses").stream_writer("m")
    out = b"".join(responses.write(an.WIRE.read_deltas(e)) for e in CLAUDE_NO_ARG_CALL) + responses.finish(Usage(9, output=5))
    done = [e.json() for e in parse_sse(split_lines([out])) if e.json()["type"] == "response.completed"]
    assert done[0]["response"]["output"][0]["arguments"] == "{}"


def test_tool_choice_none_is_refused_for_converse_which_cannot_forbid_calls():
    # Bedrock's ToolChoice is auto | any | tool: without "none" the model was free to call the tools it was told not to.
    body = {"model": "m", "messages": [{"role": "user", "content": "Summarise."}], "tools": [WEATHER_FN],
            "tool_choice": "none"}
    with pytest.raises(RequestError, match="tool_choice none") as refused:
        translate_body(body, oa.WIRE, wire_format("bedrock_converse"), "us.anthropic.claude-sonnet-5-5-v1:0")
    assert refused.value.field == "tool_choice"


STRICT_FN = {"type": "function", "function": {"name": "weather", "strict": True, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}


def test_a_strict_tool_stays_strict_in_claude():
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [STRICT_FN, WEATHER_FN]}
    out, _ = translate_body(body, oa.WIRE, an.WIRE, "claude-sonnet-5-5")
    assert [t.get("strict") for t in out["tools"]] == [True, None]
    back, _ = translate_body(out, an.WIRE, oa.WIRE, "gpt-5.4")
    assert [t["function"].get("strict") for t in back["tools"]] == [True, None]


def test_a_chat_callers_loose_tool_stays_loose_on_a_responses_upstream():
    # "If you omit strict, ... Responses requests will normalize your schema into strict mode ..., while Chat
    # Completions requests remain non-strict by default" (OpenAI's function calling guide): it must be said.
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [WEATHER_FN, STRICT_FN]}
    out, _ = translate_body(body, oa.WIRE, wire_format("responses"), "gpt-5.4-pro")
    assert [t["strict"] for t in out["tools"]] == [False, True]


def test_strict_tools_are_noted_where_the_target_cannot_constrain_arguments():
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [STRICT_FN]}
    _, notes = translate_body(body, oa.WIRE, ge.WIRE, "gemini-3.5-flash")
    assert any("strict" in n for n in notes), notes


def test_stop_sequences_are_refused_for_a_responses_upstream_which_has_none():
    # A ReAct agent stops the model at "Observation:"; without it the model writes its own observations.
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": ["\nObservation:"]}
    with pytest.raises(RequestError, match="stop sequences") as refused:
        translate_body(body, oa.WIRE, wire_format("responses"), "gpt-5.4-pro")
    assert refused.value.field == "stop"


@pytest.mark.parametrize("target", ["openai", "responses"])
def test_a_failed_tool_result_is_noted_where_the_target_has_no_error_flag(target):
    body = {"model": "m", "max_tokens": 50, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "timeout", "is_error": True}]},
    ]}
    _, notes = translate_body(body, an.WIRE, wire_format(target), "gpt-5.4")
    assert any("is_error" in n for n in notes), notes
