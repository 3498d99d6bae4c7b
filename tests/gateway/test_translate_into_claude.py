"""Translated into Claude, a request leaves out what Anthropic refuses but the caller's API takes, with a note:
- a temperature, for a Claude model that takes no sampling parameters (Opus 4.7 and later,
  prefixgate/dialects/sampling.py): Anthropic answers any non-default value with a 400 "`temperature` is
  deprecated for this model.", and OpenAI clients send one by default (LangChain: 0.7);
- an empty text part or message (an agent's "" assistant turn): "messages: text content blocks must be
  non-empty" (Converse: "The text field in the ContentBlock object ... is blank.")."""

from __future__ import annotations

import openai
import pytest

from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body
from tests.gateway.support_gateway import gateway_over_mock

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7, "top_p": 0.9}


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-sampling-openai-000")
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-sampling-000")
    with gateway_over_mock(tmp_path_factory.mktemp("sampling")) as server:
        yield server.url
    mp.undo()


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "claude-opus-4-7"])
def test_an_openai_caller_with_a_temperature_is_answered_by_a_newer_claude(gateway_url, model):
    client = openai.OpenAI(api_key="pg-sampling", base_url=gateway_url + "/v1", max_retries=0)
    reply = client.chat.completions.create(model=model, messages=CHAT["messages"], temperature=0.7, max_tokens=8)
    assert reply.choices[0].message.content


def test_an_older_claude_still_gets_the_callers_temperature():
    body, notes = translate_body(CHAT, wire_format("openai"), wire_format("anthropic"), "claude-sonnet-4-20250514")
    assert (body["temperature"], body["top_p"]) == (0.7, 0.9)
    assert not any("sampling" in n for n in notes)


@pytest.mark.parametrize("target,model,config", [
    ("anthropic", "claude-opus-4-7-20260416", None),
    ("bedrock_converse", "us.anthropic.claude-sonnet-5-5-v1:0", "inferenceConfig"),
])
def test_the_dropped_sampling_is_noted(target, model, config):
    body, notes = translate_body(CHAT, wire_format("openai"), wire_format(target), model)
    sent = body.get(config, {}) if config else body
    assert not {"temperature", "top_p", "topP"} & set(sent)
    assert any("temperature and " in n and "dropped" in n and "takes no sampling parameters" in n for n in notes), notes


def test_an_openai_agents_empty_assistant_turn_is_answered_by_claude(gateway_url):
    client = openai.OpenAI(api_key="pg-sampling", base_url=gateway_url + "/v1", max_retries=0)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""},
                {"role": "user", "content": "again"}]
    reply = client.chat.completions.create(model="claude-haiku-4-5", messages=messages, max_tokens=8)
    assert reply.choices[0].message.content


EMPTY_TURNS = {"model": "m", "messages": [{"role": "system", "content": ""}, {"role": "user", "content": "hi"},
                                          {"role": "assistant", "content": ""}, {"role": "user", "content": "again"}]}


def test_empty_text_is_left_out_and_the_turns_around_it_merge():
    body, notes = translate_body(EMPTY_TURNS, wire_format("openai"), wire_format("anthropic"), "claude-haiku-4-5")
    assert "system" not in body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                             {"type": "text", "text": "again"}]}]
    assert any("empty text" in n for n in notes), notes


def test_empty_text_is_left_out_for_converse_too():
    body, notes = translate_body(EMPTY_TURNS, wire_format("openai"), wire_format("bedrock_converse"),
                                 "us.anthropic.claude-haiku-4-5")
    assert "system" not in body
    assert body["messages"] == [{"role": "user", "content": [{"text": "hi"}, {"text": "again"}]}]
    assert any("empty text" in n for n in notes), notes
