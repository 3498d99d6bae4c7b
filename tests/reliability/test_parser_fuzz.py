"""Fuzzing the dialect parsers and the planner behind them: valid requests with one node replaced by
arbitrary JSON, deleted or joined by a stray key, and arbitrary bytes. A parser answers a Conversation
or a RequestError, nothing else; whatever it accepts, the planner plans without raising, and the
planned request encodes into a body the same parser accepts again."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.dialects import DIALECTS
from prefixgate.errors import RequestError
from tests.core.support_strategies import anthropic_body, gemini_body, openai_body

MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5.6-sol", "gemini": "gemini-3.5-flash"}
BODIES = {"anthropic": anthropic_body, "openai": openai_body, "gemini": gemini_body}
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                    max_leaves=12)
STRAY_KEYS = st.sampled_from(["cache_control", "type", "role", "content", "text", "parts", "tools", "system",
                              "stream", "model", "messages", "contents", "prompt_cache_key", "__proto__", ""])


def paths(node, at=()) -> list[tuple]:
    out = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*at, i))
    return out


def mutate(body: dict, data) -> dict:
    body = copy.deepcopy(body)
    where = data.draw(st.sampled_from(paths(body)[1:] or [()]))
    if not where:
        return body
    parent = body
    for step in where[:-1]:
        parent = parent[step]
    op = data.draw(st.sampled_from(["replace", "delete", "stray"]))
    if op == "replace":
        parent[where[-1]] = data.draw(JSON)
    elif op == "delete":
        del parent[where[-1]]
    elif isinstance(parent[where[-1]], dict):
        parent[where[-1]][data.draw(STRAY_KEYS)] = data.draw(JSON)
    return body


def parse(provider: str, body):
    module = DIALECTS[provider]
    return module.parse_request(body, model=MODELS[provider]) if provider == "gemini" else module.parse_request(body)


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_requests_parse_or_are_refused_and_plans_stay_valid(provider, data):
    body = mutate(data.draw(BODIES[provider]), data)
    try:
        conv = parse(provider, json.loads(json.dumps(body)))
    except RequestError:
        return
    module = DIALECTS[provider]
    state = PlannerState()
    for mode in ("rewrite", "checkpoints"):
        planned = plan(conv, Target(provider, MODELS[provider]), state, mode, now=0.0).conversation
        again = parse(provider, json.loads(json.dumps(module.encode_request(planned))))
        assert len(again.segments) == len(planned.segments)


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
@settings(max_examples=150, deadline=None)
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode) | JSON.map(lambda v: json.dumps(v).encode()))
def test_arbitrary_bytes_are_a_request_error_or_a_conversation(provider, raw):
    try:
        parse(provider, raw)
    except RequestError as e:
        assert e.status == 400 and e.message


@pytest.mark.parametrize("provider,body,field", [
    # Found by schemathesis: a text part whose text is not a string reached tiktoken (a 500).
    ("openai", {"model": "gpt-5.4", "messages": [{"role": "system", "content": [{"type": "text", "text": {}}]}]},
     "messages.0.content.0.text"),
    ("openai", {"model": "gpt-5.4", "messages": [{"role": "assistant", "content": [{"type": "refusal", "refusal": 1}]}]},
     "messages.0.content.0.refusal"),
    ("anthropic", {"model": "claude-haiku-4-5", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "text", "text": [None, None]}]}]}, "messages.0.content.0.text"),
    ("gemini", {"contents": [{"role": "model", "parts": [{"thought": True, "text": {"a": 1}}]}]}, "contents.0.parts.0.text"),
])
def test_non_string_text_is_refused_naming_the_field(provider, body, field):
    with pytest.raises(RequestError) as info:
        parse(provider, body)
    assert info.value.field == field
