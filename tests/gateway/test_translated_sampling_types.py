"""A sampling value of the wrong JSON type (`temperature: "x"`) on a request translated to another format is the
caller's 400 naming the field, in its own error shape, and nothing is sent upstream. It was taken as is: for a
model whose translation drops sampling (claude-sonnet-5-5) the caller got a 200 with its setting silently ignored,
and elsewhere the target's error about a different rule (Anthropic's `temperature: range: 0..1`)."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.support_gateway import keyed_stack

HI = [{"role": "user", "content": "Weather in Paris?"}]
BEARER = {"authorization": "Bearer pg-k"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with keyed_stack(tmp_path_factory.mktemp("sampling")) as stack:
        yield stack


@pytest.mark.parametrize("path,body,field", [
    ("/v1/chat/completions", {"model": "claude-sonnet-5-5", "messages": HI, "temperature": "x"}, "temperature"),
    ("/v1/chat/completions", {"model": "claude-haiku-4-5", "messages": HI, "top_p": [0.9]}, "top_p"),
    ("/v1/chat/completions", {"model": "gemini-3.5-flash", "messages": HI, "temperature": "x"}, "temperature"),
    ("/v1/responses", {"model": "claude-sonnet-5-5", "input": "hi", "temperature": "x"}, "temperature"),
    ("/v1/responses", {"model": "gemini-3.5-flash", "input": "hi", "top_p": {"p": 1}}, "top_p"),
])
def test_an_openai_caller(gw, path, body, field):
    server, up = gw
    answer = httpx.post(server.url + path, headers=BEARER, json=body)
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    assert answer.json()["error"]["message"].startswith(f"{field}: expected ")
    assert up.received == []


@pytest.mark.parametrize("model", ["gpt-5.4", "gemini-3.5-flash"])
def test_a_claude_caller(gw, model):
    server, up = gw
    answer = httpx.post(f"{server.url}/v1/messages", headers={"x-api-key": "pg-k", "anthropic-version": "2023-06-01"},
                        json={"model": model, "max_tokens": 50, "messages": HI, "temperature": "x"})
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    assert answer.json()["error"]["message"].startswith("temperature: expected ")
    assert up.received == []


@pytest.mark.parametrize("config,field", [({"temperature": "x"}, "inferenceConfig.temperature"),
                                          ({"topP": True}, "inferenceConfig.topP")])
def test_a_converse_caller(gw, config, field):
    server, up = gw
    answer = httpx.post(f"{server.url}/model/gpt-5.4/converse", headers=BEARER,
                        json={"messages": [{"role": "user", "content": [{"text": "hi"}]}], "inferenceConfig": config})
    # Bedrock's ValidationException: a 400 whose body is its message.
    assert answer.status_code == 400 and answer.json()["message"].startswith(f"{field}: expected ")
    assert up.received == []
