"""Tool call ids that OpenAI Chat takes back but Claude refuses are renamed on the way to another format: ids
numbered per turn (`call_0` every turn, as grok over OpenAI Chat answers: NVIDIA-NeMo/Switchyard#502) would be
"`tool_use` ids must be unique", and kimi-k3's `list_dir:0` (fw-ai/fireconnect#16) breaks Claude's
`^[a-zA-Z0-9_-]+$`. Each result follows the call it answers."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body
from tests.gateway.support_gateway import gateway_over_mock

TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object",
                                                                             "properties": {"city": {"type": "string"}}}}}]


def history(first: str, second: str) -> list[dict]:
    """Two turns of weather calls, with the ids the caller's backend gave them."""
    def turn(tool_id: str, city: str, answer: str) -> list[dict]:
        return [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": tool_id, "type": "function", "function": {"name": "weather",
                                                                     "arguments": json.dumps({"city": city})}}]},
                {"role": "tool", "tool_call_id": tool_id, "content": answer}]
    return [{"role": "user", "content": "Weather in Paris, then Rome?"},
            *turn(first, "Paris", "Sunny"), *turn(second, "Rome", "Rain")]


def _ids(body: dict) -> list[tuple[str, str]]:
    return [(b["type"], b.get("id") or b.get("tool_use_id")) for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b["type"] in ("tool_use", "tool_result")]


@pytest.mark.parametrize("first,second,expected", [
    ("call_0", "call_0", ["call_0", "call_0", "call_0_2", "call_0_2"]),
    ("list_dir:0", "list_dir:1", ["list_dir_0", "list_dir_0", "list_dir_1", "list_dir_1"]),
])
def test_ids_claude_refuses_are_renamed_with_their_results(first, second, expected):
    body = {"model": "m", "messages": history(first, second), "tools": TOOLS}
    out, notes = translate_body(body, wire_format("openai"), wire_format("anthropic"), "claude-sonnet-5-5")
    assert _ids(out) == list(zip(["tool_use", "tool_result"] * 2, expected, strict=True))
    assert any("tool call ids renamed" in n for n in notes)


def test_ids_claude_takes_are_kept():
    body = {"model": "m", "messages": history("call_a1", "call_b2"), "tools": TOOLS}
    out, notes = translate_body(body, wire_format("openai"), wire_format("anthropic"), "claude-sonnet-5-5")
    assert [i for _, i in _ids(out)] == ["call_a1", "call_a1", "call_b2", "call_b2"]
    assert not any("renamed" in n for n in notes)


def test_a_chat_caller_with_per_turn_call_ids_reaches_claude(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-call-ids-0123456789")
    with gateway_over_mock(tmp_path) as gw:
        client = openai.OpenAI(api_key="pg-call-ids", base_url=gw.url + "/v1", max_retries=0)
        reply = client.chat.completions.create(model="claude-sonnet-5-5", messages=history("call_0", "call_0"),
                                               tools=TOOLS, max_tokens=200)
        assert reply.choices[0].finish_reason in ("stop", "tool_calls")


def test_a_call_id_that_is_not_a_string_is_the_callers_400_not_a_500(tmp_path, monkeypatch):
    # Both SDKs type these fields but send what they are given; each API refuses a non-string id.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-call-ids-0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-call-ids-0123456789")
    with gateway_over_mock(tmp_path) as gw:
        chat = openai.OpenAI(api_key="pg-call-ids", base_url=gw.url + "/v1", max_retries=0)
        for odd in (5, ["call_0"]):
            with pytest.raises(openai.BadRequestError) as refused:
                chat.chat.completions.create(model="claude-sonnet-5-5", messages=history(odd, odd), tools=TOOLS,
                                             max_tokens=50)
            assert "id must be a string" in refused.value.message
        claude = anthropic.Anthropic(api_key="pg-call-ids", base_url=gw.url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as refused:
            claude.messages.create(model="gpt-5.4", max_tokens=50, messages=[
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": 7, "name": "weather", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": 7, "content": "Sunny"}]}])
        assert "id must be a string" in refused.value.message
