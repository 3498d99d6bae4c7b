"""Cache markers on Chat Completions content parts: OpenAI's `prompt_cache_breakpoint` and the Anthropic-style
`cache_control` that OpenRouter passes to Claude and Gemini models. Both parse as checkpoints, a caller's come
back byte-for-byte, and a checkpoint the planner (or a translation) places is written in the form the request's
model takes: Anthropic's for a router's Claude and Gemini slugs, OpenAI's for any other."""

from __future__ import annotations

import pytest

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.dialects import anthropic, openai
from prefixgate.dialects.translate import translate_body
from prefixgate.ir import Checkpoint
from prefixgate.usage import Usage

BODY = {"model": "anthropic/claude-sonnet-4.6", "messages": [
    {"role": "system", "content": [{"type": "text", "text": "policy", "cache_control": {"type": "ephemeral"}}]},
    {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
    {"role": "user", "content": [{"type": "text", "text": "odd", "cache_control": {"type": "persistent"}}]},
]}


def test_cache_control_parts_are_checkpoints_and_round_trip():
    conv = openai.parse_request(BODY)
    assert [cp.ttl for _, _, cp in conv.checkpoints()] == ["5m", "1h"]      # an unknown type is the API's to judge
    assert openai.encode_request(conv) == BODY


@pytest.mark.parametrize("model, marker", [
    ("gpt-5.6", {"prompt_cache_breakpoint": {"mode": "explicit"}}),
    ("anthropic/claude-sonnet-4.6", {"cache_control": {"type": "ephemeral"}}),
    ("google/gemini-3.8-flash", {"cache_control": {"type": "ephemeral"}}),
])
def test_placed_checkpoints_take_the_models_form(model, marker):
    conv = openai.parse_request({"model": model, "messages": [{"role": "system", "content": "policy"},
                                                              {"role": "user", "content": "q"}]})
    conv.segments[0].blocks[0].checkpoint = Checkpoint("5m")
    sent = openai.encode_request(conv)
    assert sent["messages"][0]["content"] == [{"type": "text", "text": "policy", **marker}]
    assert sent["messages"][1]["content"] == "q"
    # A caller's marker the planner dropped (caller_checkpoints: optimize) leaves no trace.
    caller = openai.parse_request(BODY)
    caller.segments[1].blocks[0].checkpoint = None
    assert "cache_control" not in openai.encode_request(caller)["messages"][1]["content"][0]


def test_translated_markers_take_the_target_models_form():
    """An Anthropic caller's breakpoints (Claude Code's) routed to OpenRouter's Claude arrive as its
    `cache_control`, their TTL kept; routed to OpenAI, as OpenAI's breakpoints."""
    messages = {"model": "claude-sonnet-4-6", "max_tokens": 10, "system": [
        {"type": "text", "text": "policy", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}]}]}
    routed, _ = translate_body(messages, anthropic.WIRE, openai.WIRE, "anthropic/claude-sonnet-4.6")
    assert [p["cache_control"] for m in routed["messages"] for p in m["content"]] == [
        {"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral"}]
    direct, _ = translate_body(messages, anthropic.WIRE, openai.WIRE, "gpt-5.6")
    assert [set(p) - {"type", "text"} for m in direct["messages"] for p in m["content"]] == [{"prompt_cache_breakpoint"}] * 2


def test_writes_under_claude_markers_bill_at_the_markers_ttl():
    conv = openai.parse_request(BODY)
    usage = openai.WIRE.usage_of({"usage": {"prompt_tokens": 100, "completion_tokens": 5,
                                            "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 60}}}, conv)
    assert usage == Usage(uncached_input=30, cache_read=10, cache_writes={"1h": 60}, output=5)


def test_openrouter_claude_checkpoints_land_only_where_the_format_can_carry_them():
    """Under Claude's rules through OpenRouter's Chat Completions, tool definitions and tool calls take no
    marker: every checkpoint the planner places reaches the wire as a `cache_control` part."""
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "Looks things up. " * 80,
                                               "parameters": {"type": "object", "properties": {}}}} for i in range(3)]
    call = {"id": "c1", "type": "function", "function": {"name": "tool_0", "arguments": "{}"}}
    body = {"model": "anthropic/claude-sonnet-4.6", "tools": tools, "messages": [
        {"role": "user", "content": "Look it up. " * 200},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "found " * 300},
        {"role": "user", "content": "And then?"}]}
    target = Target("anthropic", "anthropic/claude-sonnet-4.6", rows_of="openrouter")
    state = PlannerState()
    for _ in range(3):      # the route learns its reuse
        planned = plan(openai.parse_request(body), target, state, route="r", now=1000.0)
    placed = planned.conversation.checkpoints()
    assert placed
    assert all(planned.conversation.segments[si].role not in ("tools", "assistant") for si, _, _ in placed)
    sent = openai.encode_request(planned.conversation)
    marked = [p for m in sent["messages"] if isinstance(m.get("content"), list) for p in m["content"] if "cache_control" in p]
    assert len(marked) == len(placed) and "cache_control" not in str(sent["tools"])
