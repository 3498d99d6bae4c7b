"""A caller whose format lets it leave the output limit out (OpenAI Chat Completions and Responses, Gemini) gets,
translated into Claude, the target model's documented output limit (the model pages' "Max output", typed here),
not 4,096: OpenAI and Gemini let such an answer run to the model's limit, and Anthropic requires `max_tokens`.
Claude models older than Sonnet 4.5 refuse a prompt plus max_tokens over their context window, so they keep 4,096.
"""

from __future__ import annotations

import openai
import pytest

from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body
from tests.gateway.support_gateway import running_gateway, running_upstream, settings_for

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Write the whole report."}]}
RESPONSES = {"model": "m", "input": "Write the whole report."}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "Write the whole report."}]}]}


@pytest.mark.parametrize("source,body,target,model,limit", [
    ("openai", CHAT, "anthropic", "claude-sonnet-5-5", 128_000),
    ("openai", CHAT, "anthropic", "claude-opus-4-5-20251101", 64_000),
    ("openai", CHAT, "bedrock_invoke", "us.anthropic.claude-sonnet-5-5-v1:0", 128_000),
    ("openai", CHAT, "vertex_anthropic", "claude-haiku-4-5@20251001", 64_000),
    ("responses", RESPONSES, "anthropic", "claude-opus-5-5", 128_000),
    ("gemini", GEMINI, "anthropic", "claude-haiku-5-5", 128_000),
    ("gemini", GEMINI, "vertex_anthropic", "claude-fable-5-1", 128_000),
])
def test_no_output_limit_becomes_the_claude_models_own(source, body, target, model, limit):
    out, notes = translate_body(body, wire_format(source), wire_format(target), model)
    assert out["max_tokens"] == limit
    assert any(f"max_tokens {limit}" in n for n in notes), notes


def test_an_older_claude_or_an_unknown_one_keeps_4096():
    for model in ("claude-opus-4-1", "claude-sonnet-4-20250514", "claude-someday-9"):
        out, _ = translate_body(CHAT, wire_format("openai"), wire_format("anthropic"), model)
        assert out["max_tokens"] == 4096, model


@pytest.mark.parametrize("source,body", [
    ("openai", {**CHAT, "max_completion_tokens": 300}),
    ("responses", {**RESPONSES, "max_output_tokens": 300}),
    ("gemini", {**GEMINI, "generationConfig": {"maxOutputTokens": 300}}),
])
def test_the_callers_own_limit_is_kept(source, body):
    out, notes = translate_body(body, wire_format(source), wire_format("anthropic"), "claude-sonnet-5-5")
    assert out["max_tokens"] == 300
    assert not any("output limit" in n for n in notes)


def test_an_openai_sdk_caller_without_max_tokens_reaches_claude_with_its_output_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-output-limit-000")
    with running_upstream() as up, running_gateway(settings_for(up.url, tmp_path)) as gw:
        client = openai.OpenAI(api_key="pg-output-limit", base_url=gw.url + "/v1", max_retries=0)
        reply = client.chat.completions.create(model="claude-sonnet-5-5", messages=CHAT["messages"])
        assert reply.choices[0].message.content == "Hello, world"
        sent = [r.body for r in up.received if r.path == "/v1/messages"]
        assert [b["max_tokens"] for b in sent] == [128_000]


@pytest.mark.parametrize("source,body,target,model,limit", [
    ("openai", {**CHAT, "max_completion_tokens": 100_000}, "anthropic", "claude-haiku-4-5", 64_000),
    ("responses", {**RESPONSES, "max_output_tokens": 200_000}, "bedrock_invoke", "us.anthropic.claude-opus-5-5-v1:0",
     128_000),
    ("gemini", {**GEMINI, "generationConfig": {"maxOutputTokens": 65_536}}, "vertex_anthropic",
     "claude-opus-4-5@20251101", 64_000),
])
def test_a_limit_over_the_claude_models_own_is_cut_to_it(source, body, target, model, limit):
    out, notes = translate_body(body, wire_format(source), wire_format(target), model)
    assert out["max_tokens"] == limit
    assert any(f"-> {limit}" in n for n in notes), notes


def test_an_older_claude_without_a_catalogued_limit_keeps_the_callers():
    out, _ = translate_body({**CHAT, "max_tokens": 20_000}, wire_format("openai"), wire_format("anthropic"),
                            "claude-opus-4-1")
    assert out["max_tokens"] == 20_000


def test_converse_gets_no_default_but_a_limit_over_the_claude_models_is_cut():
    # Converse's maxTokens is optional ("The default value is the maximum allowed value for the model", the
    # InferenceConfiguration reference): left out when the caller set none, cut when over the model's own.
    model = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    out, _ = translate_body(CHAT, wire_format("openai"), wire_format("bedrock_converse"), model)
    assert "maxTokens" not in out.get("inferenceConfig", {})
    out, notes = translate_body({**CHAT, "max_completion_tokens": 100_000}, wire_format("openai"),
                                wire_format("bedrock_converse"), model)
    assert out["inferenceConfig"]["maxTokens"] == 64_000
    assert any("-> 64000" in n for n in notes), notes
