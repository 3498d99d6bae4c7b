"""A request translated to another format whose fields have the wrong JSON type is the caller's 400 naming the
field, in its own error shape, and nothing is sent upstream; each of these was a 500 (the reader of the caller's
format took the value as is and failed on it)."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.support_gateway import running_gateway, running_upstream, settings_for

TOOL = {"toolSpec": {"name": "weather", "inputSchema": {"json": {"type": "object"}}}}
CHAT = {"model": "claude-sonnet-5-5", "messages": [{"role": "user", "content": "Weather in Paris?"}]}
CONVERSE = {"messages": [{"role": "user", "content": [{"text": "Weather in Paris?"}]}]}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-translated-bad-input-000")
    mp.setenv("OPENAI_API_KEY", "sk-openai-translated-bad-input-000")
    with running_upstream() as up, running_gateway(settings_for(up.url, tmp_path_factory.mktemp("bad"))) as server:
        yield server, up
    mp.undo()


@pytest.mark.parametrize("extra,field", [
    ({"stop": 5}, "stop"),
    ({"tool_choice": {"type": "function", "function": "weather"}}, "tool_choice.function"),
])
def test_a_chat_caller_routed_to_claude(gw, extra, field):
    server, up = gw
    answer = httpx.post(f"{server.url}/v1/chat/completions", headers={"authorization": "Bearer pg-k"},
                        json={**CHAT, **extra})
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    assert answer.json()["error"]["message"].startswith(f"{field}: expected ")
    assert up.received == []


@pytest.mark.parametrize("extra,field", [
    ({"inferenceConfig": {"stopSequences": 5}}, "inferenceConfig.stopSequences"),
    ({"toolConfig": {"tools": [{"toolSpec": "weather"}]}}, "toolConfig.tools.toolSpec"),
    ({"toolConfig": {"tools": [{"toolSpec": {"name": "weather", "inputSchema": "{}"}}]}},
     "toolConfig.tools.toolSpec.inputSchema"),
    ({"toolConfig": {"tools": [TOOL], "toolChoice": {"tool": "weather"}}}, "toolConfig.toolChoice.tool"),
    ({"messages": [{"role": "user", "content": [{"image": "iVBOR"}]}]}, "messages.content.image"),
    ({"messages": [{"role": "user", "content": [{"image": {"format": "png", "source": "iVBOR"}}]}]},
     "messages.content.image.source"),
    ({"messages": [{"role": "user", "content": [{"text": "Weather?"}]},
                   {"role": "assistant", "content": [{"toolUse": "weather"}]}]}, "messages.content.toolUse"),
])
def test_a_converse_caller_routed_to_openai(gw, extra, field):
    server, up = gw
    answer = httpx.post(f"{server.url}/model/gpt-5.4/converse", headers={"authorization": "Bearer pg-k"},
                        json={**CONVERSE, **extra})
    # Bedrock's ValidationException: a 400 whose body is its message.
    assert answer.status_code == 400 and answer.json()["message"].startswith(f"{field}: expected ")
    assert up.received == []


@pytest.mark.parametrize("extra,field", [
    ({"stop_sequences": 5}, "stop_sequences"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"metadata": "user-7"}, "metadata"),
])
def test_a_claude_caller_routed_to_openai(gw, extra, field):
    server, up = gw
    answer = httpx.post(f"{server.url}/v1/messages", headers={"x-api-key": "pg-k", "anthropic-version": "2023-06-01"},
                        json={"model": "gpt-5.4", "max_tokens": 50, "messages": CHAT["messages"], **extra})
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    assert answer.json()["error"]["message"].startswith(f"{field}: expected ")
    assert up.received == []


@pytest.mark.parametrize("path,headers,body,field", [
    ("/v1/chat/completions", {"authorization": "Bearer pg-k"},
     {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "https://x.test/a.png"}]}]},
     "messages.content.image_url"),
    ("/v1/chat/completions", {"authorization": "Bearer pg-k"},
     {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": 5}}]}]},
     "messages.content.image_url.url"),
    ("/v1/messages", {"x-api-key": "pg-k", "anthropic-version": "2023-06-01"},
     {"model": "gpt-5.4", "max_tokens": 50, "messages": [{"role": "user", "content": [{"type": "image", "source": 5}]}]},
     "messages.content.source"),
    ("/v1/messages", {"x-api-key": "pg-k", "anthropic-version": "2023-06-01"},
     {"model": "gpt-5.4", "max_tokens": 50, "messages": [
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": 5}]}]},
     "messages.content.tool_result.content"),
    ("/v1beta/models/gpt-5.4:generateContent", {"x-goog-api-key": "pg-k"},
     {"contents": [{"role": "model", "parts": [{"functionCall": "weather"}]}]}, "contents.parts.functionCall"),
    ("/v1beta/models/gpt-5.4:generateContent", {"x-goog-api-key": "pg-k"},
     {"contents": [{"role": "user", "parts": [{"inlineData": "iVBOR"}]}]}, "contents.parts.inlineData"),
    ("/v1beta/models/gpt-5.4:generateContent", {"x-goog-api-key": "pg-k"},
     {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}], "tools": [{"functionDeclarations": "weather"}]},
     "tools.functionDeclarations"),
    ("/v1beta/models/gpt-5.4:generateContent", {"x-goog-api-key": "pg-k"},
     {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}], "tools": [{"functionDeclarations": ["weather"]}]},
     "tools.functionDeclarations[]"),
])
def test_a_message_part_of_the_wrong_type(gw, path, headers, body, field):
    server, up = gw
    answer = httpx.post(server.url + path, headers=headers, json=body)
    assert answer.status_code == 400 and field + ": expected " in answer.text
    assert up.received == []
