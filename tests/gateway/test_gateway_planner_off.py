"""With planning off for a route, the upstream gets the caller's request byte for byte (its spacing, key
order and number spelling included), unless the gateway must change it: another model, another format,
or the usage option a billed stream needs."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.gateway.support_gateway import policy_stack

POLICY = {"routes": [
    {"name": "as-sent", "models": ["claude-*", "gpt-*"], "planner": "off",
     "targets": [{"upstream": "anthropic"}], "caller_checkpoints": "keep"},
    {"name": "renamed", "models": ["alias"], "planner": "off", "targets": [{"upstream": "anthropic", "model": "claude-haiku-4-5"}]},
    {"name": "chat", "models": ["o-*"], "planner": "off", "targets": [{"upstream": "openai"}]},
    {"name": "planned", "models": ["plan-*"], "targets": [{"upstream": "anthropic", "model": "claude-haiku-4-5"}]},
]}
ANTHROPIC = {"anthropic-version": "2023-06-01", "content-type": "application/json"}
# Spacing, key order and a float spelling that no JSON encoder here would write back the same way.
BODY = ('{ "max_tokens" : 16,\n  "model": "%s", "temperature": 1.50,\n  "system": [{"type": "text", "text": "Be brief.",'
        ' "cache_control": {"type": "ephemeral"}}],\n  "messages": [ {"role": "user", "content": "Hi \\u00e9"} ] }')


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with policy_stack(tmp_path_factory.mktemp("planner-off"), POLICY) as (up, gw, _):
        yield up, gw


def send(gw, path: str, raw: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(gw.url + path, content=raw.encode(), headers={**headers, "x-api-key": "caller"}, timeout=10)


def test_planning_off_sends_the_caller_s_bytes(stack):
    up, gw = stack
    up.reset()
    raw = BODY % "claude-sonnet-4-6"
    assert send(gw, "/v1/messages", raw, ANTHROPIC).status_code == 200
    assert up.received[-1].raw == raw.encode()


def test_a_renamed_model_or_a_planned_route_is_encoded_again(stack):
    up, gw = stack
    up.reset()
    for model in ("alias", "plan-x"):
        assert send(gw, "/v1/messages", BODY % model, ANTHROPIC).status_code == 200
        sent = up.received[-1]
        assert sent.body["model"] == "claude-haiku-4-5" and sent.raw != (BODY % model).encode()
        assert sent.body["messages"] == json.loads(BODY % model)["messages"]


def test_a_stream_that_needs_its_usage_option_is_encoded_with_it(stack):
    up, gw = stack
    up.reset()
    raw = '{"model": "o-mini", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}'
    assert send(gw, "/v1/chat/completions", raw, {"content-type": "application/json"}).status_code == 200
    assert up.received[-1].body["stream_options"] == {"include_usage": True}
    raw = '{"model": "o-mini",  "messages": [{"role": "user", "content": "Hi"}]}'
    assert send(gw, "/v1/chat/completions", raw, {"content-type": "application/json"}).status_code == 200
    assert up.received[-1].raw == raw.encode()
