"""A call replayed into Gemini 3 carries Google's stand-in thought signature whatever name the route gives the model:
`gemini-pro-latest` is an alias of Gemini 3.1 Pro in the catalogue, and Gemini 3 refuses an unsigned replayed call
(400 "Function call is missing a thought_signature"; https://ai.google.dev/gemini-api/docs/thought-signatures)."""

from __future__ import annotations

import openai
import pytest

from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread

TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
]


# gemini-2.5-pro stays: a model before Gemini 3 takes no thought signature, the case under test
@pytest.mark.parametrize("model,signed", [("gemini-pro-latest", True), ("gemini-3.1-pro", True),
                                          ("gemini-2.5-pro", False)])
def test_the_model_behind_an_alias_decides_the_signature(model, signed):
    body, _ = translate_body({"model": "m", "messages": HISTORY, "tools": TOOLS}, wire_format("openai"),
                             wire_format("gemini"), model)
    call = body["contents"][1]["parts"][0]
    assert call.get("thoughtSignature") == ("skip_thought_signature_validator" if signed else None)


def test_a_chat_callers_tool_history_reaches_gemini_pro_latest(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gk-signatures-0123456789")
    with ServerThread(mock_app(MockContext()), log_level="critical") as mock, \
            running_gateway(settings_for(mock.url, tmp_path)) as gw:
        client = openai.OpenAI(api_key="pg-signatures", base_url=gw.url + "/v1", max_retries=0)
        reply = client.chat.completions.create(model="gemini-pro-latest", messages=HISTORY, tools=TOOLS)
        assert reply.choices[0].message.content
