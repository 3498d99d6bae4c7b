"""Planning that reuses the request it resends (`cache_planner.carried`, `ir.Carry`) plans exactly as
planning from scratch: the same body upstream, the same explanation, the same prefix hash, request after
request of agent sessions, with and without the caller's markers, volatile system text and documents."""

from __future__ import annotations

import json
import random

import pytest

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.dialects import anthropic as an
from prefixgate.dialects.resent import encode
from prefixgate.prefix_shape import prefix_shape

WORDS = "file test build cache token plan step read write edit search error diff commit".split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _turn(rng: random.Random, i: int) -> list[dict]:
    user: dict = {"role": "user", "content": [{"type": "text", "text": _text(rng, 30)}]}
    if rng.random() < 0.3:      # a large document after a short question: documents_first moves it
        user["content"] = [{"type": "text", "text": "Summarise this."}, {"type": "text", "text": _text(rng, 900)}]
    return [user,
            {"role": "assistant", "content": [{"type": "text", "text": _text(rng, 20)},
                                              {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"n": i}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": _text(rng, 200)}]}]


def _same_both_ways(parse, encode_body, body: dict, target: Target, states: tuple, request: int) -> None:
    """`body` planned parsed from its bytes (carrying the request it resends) and from the dict (from
    scratch), each with its own planner state: the same body upstream, explanation and keys."""
    conv = parse(json.dumps(body).encode())
    assert (conv.source.reused > 0) == (request > 0)
    mine = plan(conv, target, states[0], route="r", now=1000.0 + request)
    fresh = plan(parse(body), target, states[1], route="r", now=1000.0 + request)
    assert json.loads(encode(encode_body(mine.conversation), conv.source)) == encode_body(fresh.conversation)
    assert mine.explanation == fresh.explanation
    assert mine.prefix_hash == fresh.prefix_hash
    assert mine.conversation.prefix_keys() == fresh.conversation.prefix_keys()
    # The ledger's prefix shape, which the next request takes over for the segments it repeats.
    assert prefix_shape(mine.conversation, target.provider, volatile_spans) == \
        prefix_shape(fresh.conversation, target.provider, volatile_spans)


@pytest.mark.parametrize("markers", [False, True])
@pytest.mark.parametrize("volatile", [False, True])
def test_carried_planning_equals_planning_from_scratch(markers: bool, volatile: bool):
    rng = random.Random(3)
    an.BODIES.clear()
    carried, scratch = PlannerState(), PlannerState()
    system = [{"type": "text", "text": "You are a coding agent. " + _text(rng, 3000)}]
    if markers:
        system[-1]["cache_control"] = {"type": "ephemeral"}
    messages: list[dict] = []
    target = Target("anthropic", "claude-sonnet-4-6")
    for request in range(14):
        messages = messages + _turn(rng, request)
        head = system if not volatile else [
            {"type": "text", "text": f"Current time: 2026-11-24T07:{request:02d}:00Z. Request id {rng.randrange(10**9)}."},
            *system]
        last = {"role": "user", "content": [{"type": "text", "text": f"Now step {request}."}]}
        if markers:
            last["content"][0]["cache_control"] = {"type": "ephemeral"}
        body = {"model": "claude-sonnet-4-6", "max_tokens": 100, "system": head,
                "tools": [{"name": "Read", "description": _text(rng, 50), "input_schema": {"type": "object"}}],
                "messages": [*messages, last]}
        _same_both_ways(an.parse_request, an.encode_request, body, target, (carried, scratch), request)
        # The next request resends this one with the newest user text replaced by its turn.
        messages = [*messages, last, {"role": "assistant", "content": "ok"}]


def test_openai_chat_and_vertex_claude_plan_the_same_carried_or_not():
    """The other formats that take the body memo: OpenAI Chat Completions (an agent with tool calls) and
    Claude on Vertex (Anthropic's body without its model)."""
    from prefixgate.dialects import openai as oa
    from prefixgate.dialects import vertex_anthropic as va

    rng = random.Random(9)
    oa.BODIES.clear()
    an.BODIES.clear()
    tools = [{"type": "function", "function": {"name": "read", "description": _text(rng, 60), "parameters": {"type": "object"}}}]
    chat: list[dict] = [{"role": "system", "content": "You are a coding agent. " + _text(rng, 3000)}]
    claude: list[dict] = []
    states = {name: (PlannerState(), PlannerState()) for name in ("openai", "vertex")}
    for request in range(10):
        chat += [{"role": "user", "content": _text(rng, 40)},
                 {"role": "assistant", "content": None,
                  "tool_calls": [{"id": f"c{request}", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{request}", "content": _text(rng, 300)}]
        claude += _turn(rng, request)
        bodies = {
            "openai": ({"model": "gpt-5.4", "tools": tools, "messages": [*chat, {"role": "user", "content": f"step {request}"}]},
                       oa.parse_request, oa.encode_request, Target("openai", "gpt-5.4")),
            "vertex": ({"anthropic_version": "vertex-2023-10-16", "max_tokens": 100, "system": chat[0]["content"],
                        "messages": [*claude, {"role": "user", "content": f"step {request}"}]},
                       lambda b: va.parse_request(b, model="claude-sonnet-4-6"), va.encode_request,
                       Target("anthropic", "claude-sonnet-4-6")),
        }
        for name, (body, parse, encode_body, target) in bodies.items():
            _same_both_ways(parse, encode_body, body, target, states[name], request)


def test_responses_agent_plans_the_same_carried_or_not():
    """Codex's format: instructions, tools and an input of messages, reasoning, function calls and their
    outputs, resent every turn."""
    from prefixgate.dialects import responses as rs

    rng = random.Random(11)
    rs.BODIES.clear()
    carried, scratch = PlannerState(), PlannerState()
    tools = [{"type": "function", "name": "shell", "description": _text(rng, 80), "parameters": {"type": "object"}}]
    instructions = "You are Codex. " + _text(rng, 2500)
    items: list[dict] = []
    target = Target("openai", "gpt-5.4")
    for request in range(10):
        items += [{"role": "user", "content": [{"type": "input_text", "text": _text(rng, 30)}]},
                  {"type": "reasoning", "id": f"rs_{request}", "summary": [], "encrypted_content": "gAAA" + _text(rng, 40)},
                  {"type": "function_call", "call_id": f"call_{request}", "name": "shell", "arguments": '{"cmd": "ls"}'},
                  {"type": "function_call_output", "call_id": f"call_{request}", "output": _text(rng, 300)}]
        body = {"model": "gpt-5.4", "instructions": instructions, "tools": tools,
                "input": [*items, {"role": "user", "content": f"step {request}"}], "store": False}
        _same_both_ways(rs.parse_request, rs.encode_request, body, target, (carried, scratch), request)
