"""mock-providers refuses a conversation's tool history where the hosted APIs do, in their words (sources in
prefixgate/simulation/mock/anthropic_tool_params.py and gemini_signature_params.py): on Anthropic, a `tool_use` id
used twice or spelt outside `[a-zA-Z0-9_-]`, a `tool_use` left unanswered by the next message, a `tool_result`
answering no `tool_use` of the message before; on Gemini 3, a function call of the current turn replayed without its
`thoughtSignature`."""

from __future__ import annotations

import uuid

import anthropic
import httpx
import pytest
from google import genai
from google.genai import types

WEATHER = [{"name": "weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def key() -> str:
    return "sk-tools-" + uuid.uuid4().hex


@pytest.fixture
def claude(mock_server):
    return anthropic.Anthropic(api_key=key(), base_url=mock_server[0], max_retries=0)


def call(tool_id: str, city: str) -> dict:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "weather",
                                              "input": {"city": city}}]}


def result(tool_id: str, text: str) -> dict:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text}]}


ASK = {"role": "user", "content": "Weather in Paris, then Rome?"}


@pytest.mark.parametrize("messages,message", [
    ([ASK, call("toolu_1", "Paris"), result("toolu_1", "Sunny"), call("toolu_1", "Rome"), result("toolu_1", "Rain")],
     "messages.3.content.0: `tool_use` ids must be unique"),
    ([ASK, call("list_dir:0", "Paris"), result("list_dir:0", "Sunny")],
     "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"),
    ([ASK, call("toolu_1", "Paris"), result("toolu_2", "Sunny")],
     "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2. Each `tool_result` "
     "block must have a corresponding `tool_use` block in the previous message."),
    ([ASK, call("toolu_1", "Paris"), {"role": "user", "content": "never mind"}],
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each "
     "`tool_use` block must have a corresponding `tool_result` block in the next message."),
])
def test_anthropic_refuses_a_broken_tool_history(claude, messages, message):
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model="claude-haiku-4-5", max_tokens=64, tools=WEATHER, messages=messages)
    assert e.value.body["error"] == {"type": "invalid_request_error", "message": message}


def test_anthropic_takes_a_well_paired_tool_history(claude):
    messages = [ASK, call("toolu_1", "Paris"), result("toolu_1", "Sunny"), call("toolu_2", "Rome"),
                result("toolu_2", "Rain")]
    assert claude.messages.create(model="claude-haiku-4-5", max_tokens=64, tools=WEATHER, messages=messages).content


def gemini_call(name: str, signature: str | None = None) -> dict:
    part: dict = {"functionCall": {"name": name, "args": {"city": "Paris"}}}
    if signature is not None:
        part["thoughtSignature"] = signature
    return {"role": "model", "parts": [part]}


def gemini_answer(name: str) -> dict:
    return {"role": "user", "parts": [{"functionResponse": {"name": name, "response": {"output": "Sunny"}}}]}


QUESTION = {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
MISSING = ("Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
           "correctly, and missing thought_signature may lead to degraded model performance. Additional data, "
           "function call `default_api:weather` , position 2. Please refer to "
           "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")


def _generate(mock_server, model: str, contents: list[dict]) -> httpx.Response:
    return httpx.post(f"{mock_server[0]}/v1beta/models/{model}:generateContent", json={"contents": contents},
                      headers={"x-goog-api-key": key()})


def test_gemini_3_refuses_a_call_of_the_current_turn_replayed_unsigned(mock_server):
    r = _generate(mock_server, "gemini-3.5-flash", [QUESTION, gemini_call("weather"), gemini_answer("weather")])
    assert r.status_code == 400
    assert r.json()["error"] == {"code": 400, "status": "INVALID_ARGUMENT", "message": MISSING}


@pytest.mark.parametrize("model,contents", [
    ("gemini-3.5-flash", [QUESTION, gemini_call("weather", "c2lnbmVk"), gemini_answer("weather")]),
    # Google's documented stand-in for history from another model
    ("gemini-3.5-flash", [QUESTION, gemini_call("weather", "skip_thought_signature_validator"), gemini_answer("weather")]),
    # an earlier turn is not checked
    ("gemini-3.5-flash", [QUESTION, gemini_call("weather"), gemini_answer("weather"),
                          {"role": "model", "parts": [{"text": "Sunny."}]}, QUESTION]),
    # models before Gemini 3 check nothing
    ("gemini-2.5-flash", [QUESTION, gemini_call("weather"), gemini_answer("weather")]),
])
def test_gemini_takes_a_history_it_does_not_check(mock_server, model, contents):
    assert _generate(mock_server, model, contents).status_code == 200


def test_gemini_3_signs_its_calls_and_the_sdk_sends_them_back(mock_server):
    client = genai.Client(api_key=key(), http_options=types.HttpOptions(base_url=mock_server[0], api_version="v1beta"))

    def weather(city: str) -> str:
        """The weather in a city."""
        return "Sunny"

    config = types.GenerateContentConfig(tools=[weather])
    chat = client.chats.create(model="gemini-3.5-flash", config=config)
    reply = chat.send_message("What is the weather in Paris? Use the weather tool.")
    signed = [p for c in chat.get_history() for p in c.parts or [] if p.function_call]
    assert signed and signed[0].thought_signature
    assert reply.text
