"""Every checkpoint the planner places reaches the wire: the planned conversation, encoded in its own format and
parsed again, carries the same marks, on every format whose target takes breakpoints. (A mark a format cannot
express, such as one on Responses' string `instructions`, was once planned, noted and silently dropped.)"""

from __future__ import annotations

import pytest

from prefixgate.cache_planner.plan import plan
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.cache_planner.target import Target
from prefixgate.dialects import request_dialect, wire_format
from prefixgate.dialects.translate import translate_body
from tests.core.providers.support_prompts import text_of

STATIC = "You are the support agent for Acme.\n" + text_of(2500) + ".\n"
QUESTION = "Where is my order? " + text_of(1200, " parcel")

BODIES = {
    "anthropic (string system)": ("anthropic", "claude-sonnet-5-5", {
        "model": "claude-sonnet-5-5", "max_tokens": 100, "system": STATIC,
        "messages": [{"role": "user", "content": QUESTION}]}),
    "bedrock invoke": ("bedrock", "global.anthropic.claude-opus-5-5", {
        "anthropic_version": "bedrock-2023-05-31", "max_tokens": 100, "system": STATIC,
        "messages": [{"role": "user", "content": QUESTION}]}),
    "bedrock converse": ("bedrock", "global.anthropic.claude-opus-5-5", {
        "system": [{"text": STATIC}], "messages": [{"role": "user", "content": [{"text": QUESTION}]}]}),
    "openai chat (string system)": ("openai", "gpt-6.2-sol", {
        "model": "gpt-6.2-sol", "messages": [{"role": "system", "content": STATIC}, {"role": "user", "content": QUESTION}]}),
    "responses, stateless": ("openai", "gpt-6.2-sol", {
        "model": "gpt-6.2-sol", "instructions": STATIC, "input": QUESTION, "store": False}),
    "responses, stored": ("openai", "gpt-6.2-sol", {"model": "gpt-6.2-sol", "instructions": STATIC, "input": QUESTION}),
    # Conversations with tools, tool calls and their results (where a turn's marks go in an agent's loop).
    "anthropic agent": ("anthropic", "claude-sonnet-5-5", {
        "model": "claude-sonnet-5-5", "max_tokens": 100, "system": STATIC,
        "tools": [{"name": "grep", "description": "search", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": QUESTION},
                     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                   "content": text_of(1500, " result")}]}]}),
    "openai chat agent": ("openai", "gpt-6.2-sol", {
        "model": "gpt-6.2-sol", "tools": [{"type": "function", "function": {"name": "grep", "parameters": {}}}],
        "messages": [{"role": "developer", "content": STATIC}, {"role": "user", "content": QUESTION},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": text_of(1500, " result")}]}),
    "responses agent, stateless": ("openai", "gpt-6.2-sol", {
        "model": "gpt-6.2-sol", "instructions": STATIC, "store": False,
        "tools": [{"type": "function", "name": "grep", "parameters": {"type": "object"}}],
        "input": [{"role": "user", "content": QUESTION},
                  {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c1", "output": text_of(1500, " result")}]}),
    "bedrock converse agent": ("bedrock", "global.anthropic.claude-opus-5-5", {
        "system": [{"text": STATIC}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "grep", "inputSchema": {"json": {"type": "object"}}}}]},
        "messages": [{"role": "user", "content": [{"text": QUESTION}]},
                     {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "grep", "input": {}}}]},
                     {"role": "user", "content": [{"toolResult": {"toolUseId": "t1",
                                                                  "content": [{"text": text_of(1500, " result")}]}}]}]}),
    "vertex claude": ("vertex_anthropic", "claude-sonnet-5-5", {
        "anthropic_version": "vertex-2023-10-16", "max_tokens": 100, "system": STATIC,
        "messages": [{"role": "user", "content": QUESTION}]}),
}
TARGETS = {"vertex_anthropic": "anthropic"}     # whose caching rules a wire format's requests are planned by
# A Claude agent's request translated for GPT-6.2 Sol, as the gateway sends it (and plans it, parsed by the
# target's own parser): tool results become Chat tool messages, or Responses function_call_output items.
for _name, _wire in (("chat", "openai"), ("responses", "responses")):
    _body, _ = translate_body(BODIES["anthropic agent"][2], wire_format("anthropic"), wire_format(_wire), "gpt-6.2-sol")
    BODIES[f"anthropic agent translated to {_name}"] = ("openai", "gpt-6.2-sol", {**_body, "store": False})


def _marks(conv) -> int:
    return sum(block.checkpoint is not None for block in conv.blocks())


@pytest.mark.parametrize("case", list(BODIES))
def test_every_planned_mark_is_on_the_wire(case: str) -> None:
    provider, model, body = BODIES[case]
    wire = wire_format(provider) if provider in TARGETS else request_dialect(provider, body)
    target = Target(TARGETS.get(provider, provider), model)
    state = PlannerState()
    for i in range(3):      # the route's first request, and later ones that have seen the prefix come back
        result = plan(wire.parse_request(body, model=model), target, state, route="r", now=60.0 * i)
        planned = _marks(result.conversation)
        sent = wire.encode_request(result.conversation)
        assert _marks(wire.parse_request(sent, model=model)) == planned, result.explanation
        # The plan's notes name each mark it placed.
        assert sum(n.startswith("checkpoint:") for n in result.explanation) == planned, result.explanation
    assert planned > 0 or case == "responses, stored"
