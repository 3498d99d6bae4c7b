"""A Gemini caller's `toolConfig.functionCallingConfig` (https://ai.google.dev/api/caching#FunctionCallingConfig:
AUTO, ANY with optional allowedFunctionNames, NONE) reaches another provider as its tool choice: forcing a call
(an agent's next step) or forbidding one changes the answer, so it is never dropped on the way."""

from __future__ import annotations

import httpx
import pytest
from google import genai
from google.genai import types

from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body
from prefixgate.errors import RequestError
from tests.gateway.support_gateway import running_gateway, running_upstream, settings_for

WEATHER = {"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
CLOCK = {"name": "clock", "parameters": {"type": "object", "properties": {}}}


def gemini_body(config: dict) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
            "tools": [{"functionDeclarations": [WEATHER, CLOCK]}], "toolConfig": {"functionCallingConfig": config}}


@pytest.mark.parametrize("config,anthropic,openai", [
    ({"mode": "ANY", "allowedFunctionNames": ["weather"]}, {"type": "tool", "name": "weather"},
     {"type": "function", "function": {"name": "weather"}}),
    ({"mode": "ANY"}, {"type": "any"}, "required"),
    ({"mode": "ANY", "allowedFunctionNames": ["weather", "clock"]}, {"type": "any"}, "required"),
    ({"mode": "NONE"}, {"type": "none"}, "none"),
    ({"mode": "AUTO"}, {"type": "auto"}, "auto"),
])
def test_the_function_calling_mode_becomes_the_targets_tool_choice(config, anthropic, openai):
    claude, notes = translate_body(gemini_body(config), wire_format("gemini"), wire_format("anthropic"), "claude-sonnet-5-5")
    assert claude["tool_choice"] == anthropic
    assert not any("toolConfig" in n for n in notes), notes
    gpt, _ = translate_body(gemini_body(config), wire_format("gemini"), wire_format("openai"), "gpt-5.4")
    assert gpt["tool_choice"] == openai


def test_some_but_not_all_functions_is_refused_by_name():
    with pytest.raises(RequestError) as refused:
        translate_body({**gemini_body({"mode": "ANY", "allowedFunctionNames": ["weather", "clock"]}),
                        "tools": [{"functionDeclarations": [WEATHER, CLOCK, {**CLOCK, "name": "map"}]}]},
                       wire_format("gemini"), wire_format("anthropic"), "claude-sonnet-5-5")
    assert "allowedFunctionNames" in refused.value.message


def test_a_google_genai_caller_forcing_a_function_reaches_claude_forcing_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-tool-config-000")
    with running_upstream() as up, running_gateway(settings_for(up.url, tmp_path)) as gw:
        client = genai.Client(api_key="pg-tool-config", http_options=types.HttpOptions(base_url=gw.url))
        client.models.generate_content(model="claude-sonnet-5-5", contents="Weather in Paris?", config=types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(**WEATHER), types.FunctionDeclaration(**CLOCK)])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
                mode="ANY", allowed_function_names=["weather"])), max_output_tokens=50))
        sent = [r.body for r in up.received if r.path == "/v1/messages"]
        assert [b["tool_choice"] for b in sent] == [{"type": "tool", "name": "weather"}]


@pytest.mark.parametrize("field,config", [
    ("toolConfig", {"toolConfig": "ANY"}),
    ("toolConfig.functionCallingConfig", {"toolConfig": {"functionCallingConfig": "ANY"}}),
    ("toolConfig.functionCallingConfig.allowedFunctionNames", gemini_body({"mode": "ANY", "allowedFunctionNames": 5})),
    ("toolConfig.functionCallingConfig.allowedFunctionNames[]", gemini_body({"mode": "ANY", "allowedFunctionNames": [{}]})),
    ("generationConfig", {"generationConfig": "x"}),
    ("generationConfig.maxOutputTokens", {"generationConfig": {"maxOutputTokens": "many"}}),
    ("generationConfig.stopSequences", {"generationConfig": {"stopSequences": 5}}),
    ("generationConfig.candidateCount", {"generationConfig": {"candidateCount": "two"}}),
])
@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "gpt-5.4"])
def test_a_malformed_config_translated_elsewhere_is_googles_400_naming_it(tmp_path, monkeypatch, field, config, model):
    # A hand-written client (google-genai checks these types itself); each was a 500 on a translated route.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-tool-config-000")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-tool-config-000")
    with running_upstream() as up, running_gateway(settings_for(up.url, tmp_path)) as gw:
        answer = httpx.post(f"{gw.url}/v1beta/models/{model}:generateContent", headers={"x-goog-api-key": "pg-k"},
                            json={**gemini_body({}), **config})
    assert answer.status_code == 400 and answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert answer.json()["error"]["message"].startswith(f"{field}: expected ")
    assert up.received == []
