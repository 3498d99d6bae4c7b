"""The hot path's memos (parsed segments by their JSON, prefix-key links, tool identities) change how
much work a request costs, never its answer: with them, parsing, planning and encoding give exactly
what the un-memoised path gives, for requests that repeat the last one and for requests that change
it anywhere, even by one byte of one block at the same length."""

from __future__ import annotations

import copy
import hashlib
import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixgate import ir, reuse
from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import anthropic, openai
from tests.cache_planner.support_planning import POLICY
from tests.core.support_strategies import anthropic_body, openai_body
from tests.support_bench import bench_module

TARGET = Target("anthropic", "claude-sonnet-4-6")
TARGETS = {"anthropic": TARGET, "openai": Target("openai", "gpt-5.6-sol")}


@pytest.fixture(scope="module")
def agent_request():
    with bench_module("agent_request") as module:
        yield module


def unmemoised(fn):
    """`fn()` with every memo of the request path empty and unable to keep anything."""
    saved = reuse.STORE.max_bytes
    reuse.keep(0)
    try:
        return fn()
    finally:
        reuse.keep(saved)


def reference_prefix_keys(conv: ir.Conversation) -> list[str]:
    """The prefix keys' definition, hashed from scratch."""
    keys, h = [], hashlib.sha256(f"{conv.dialect}:{conv.model}".encode())
    for b in conv.blocks():
        h.update(ir.content_hash(ir.canonical_native(
            {**b.native, "text": b.text} if b.edited and isinstance(b.native, dict) else b.text if b.edited else b.native)).encode())
        keys.append(h.copy().hexdigest()[:32])
    return keys


def run_session(bodies: list[dict], dialect=anthropic, caller: str = "keep") -> list[tuple]:
    """Parse, plan and encode each body in turn on one route: what the gateway sends and says."""
    state, out = PlannerState(), []
    for i, body in enumerate(bodies):
        conv = dialect.parse_request(json.dumps(body))
        result = plan(conv, TARGETS[dialect.NAME], state, "rewrite", route="session", now=1000.0 + 10 * i,
                      caller_checkpoints=caller)
        # The plan's draft shares the request's blocks, never changes them (`Conversation.draft`).
        assert conv == dialect.parse_request(json.dumps(body))
        out.append((conv, result.conversation, compact_bytes(dialect.encode_request(result.conversation)),
                    result.explanation, result.prefix_hash, conv.prefix_keys(), result.conversation.prefix_keys()))
    return out


def assert_same_sessions(bodies: list[dict], dialect=anthropic, caller: str = "keep") -> None:
    memoised = run_session(bodies, dialect, caller)
    again = run_session(bodies, dialect, caller)   # every segment now comes from the memo
    plain = unmemoised(lambda: run_session(bodies, dialect, caller))
    assert memoised == plain and again == plain
    for conv, planned, *_ in again:
        assert conv.prefix_keys() == reference_prefix_keys(conv)
        assert planned.prefix_keys() == reference_prefix_keys(planned)


def assert_natives_are_the_request_s(conv: ir.Conversation, body: dict) -> None:
    """A memoised segment points at this request's own JSON objects, as a fresh parse does."""
    messages = [s for s in conv.segments if s.native is not None]
    assert len(messages) == len(body["messages"])
    for seg, msg in zip(messages, body["messages"], strict=True):
        assert seg.native is msg
        parts = msg["content"] if isinstance(msg["content"], list) else [msg["content"]]
        assert all(b.native is p for b, p in zip(seg.blocks, parts, strict=True))
    tools = next((s for s in conv.segments if s.role == "tools"), None)
    if tools is not None:
        assert all(b.native is t for b, t in zip(tools.blocks, body["tools"], strict=True))


@pytest.mark.parametrize("caller", ["keep", "add", "optimize"])
def test_agent_session_plans_and_bodies_match_the_unmemoised_path(agent_request, caller):
    base = agent_request.agent_body(20_000)
    bodies = agent_request.variants(base, 4)
    # A turn appended, and the history edited mid-way, as well as the last text varied.
    grown = copy.deepcopy(bodies[-1])
    grown["messages"] += [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
                          {"role": "user", "content": "Thanks. Today is 2026-11-23, 09:14 UTC."}]
    edited = copy.deepcopy(bodies[0])
    edited["messages"][10]["content"][0]["text"] += " (edited)"
    assert_same_sessions([*bodies, grown, edited, bodies[1]], caller=caller)


def test_memoised_segments_point_at_the_request_s_own_json(agent_request):
    body = json.loads(json.dumps(agent_request.agent_body(20_000)))
    anthropic.parse_request(copy.deepcopy(body))
    conv = anthropic.parse_request(body)      # from the memo: the same content, other objects
    assert_natives_are_the_request_s(conv, body)
    # The memo keeps no request's JSON (each hit points at its own), nor orjson's spare capacity.
    entries = {key: e.value for (m, key), e in reuse.STORE._entries.items() if m is anthropic.SEGMENTS.memo}
    assert entries
    assert all(seg.native is None and all(b.native is None for b in seg.blocks) for seg in entries.values())
    assert all(sys.getsizeof(ident) < len(ident) + 64 for _, ident in entries)


def test_a_same_length_change_inside_a_block_is_seen(agent_request):
    body = agent_request.agent_body(20_000)
    first = anthropic.parse_request(json.dumps(body))
    changed = copy.deepcopy(body)
    result = changed["messages"][5]["content"][0]
    assert result["type"] == "tool_result"
    at = result["content"].index("service")     # a letter, mid-way, written as itself in JSON
    swap = "S"
    result["content"] = result["content"][:at] + swap + result["content"][at + 1:]
    assert len(json.dumps(changed)) == len(json.dumps(body))
    second = anthropic.parse_request(json.dumps(changed))
    assert second.segments[7].blocks[0].text == result["content"] != first.segments[7].blocks[0].text
    before, after = first.prefix_keys(), second.prefix_keys()
    diverge = next(i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b)
    assert diverge == sum(len(s.blocks) for s in first.segments[:7])
    assert after == reference_prefix_keys(second)
    planned = plan(second, TARGET, PlannerState(), "rewrite", now=0.0).conversation
    assert json.dumps(result["content"]) in compact_bytes(anthropic.encode_request(planned)).decode()


def test_a_volatile_system_prompt_session_matches_the_unmemoised_path():
    """The planner's own fixtures: a policy prompt with a timestamp that the rewrite moves every turn."""
    def body(i: int) -> dict:
        return {"model": "claude-sonnet-4-6", "max_tokens": 64,
                "system": [{"type": "text", "text": POLICY + f"\nCurrent time: 2026-11-23T09:{i:02d}:00Z. Request id: req_{i:08x}."}],
                "tools": [{"name": "lookup", "description": "Find an order.",
                           "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}],
                "messages": [{"role": "user", "content": f"Where is order {i}?"}]}
    assert_same_sessions([body(i) for i in range(6)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(anthropic_body, min_size=1, max_size=3))
def test_arbitrary_requests_match_the_unmemoised_path(bodies):
    # Each request twice: the second parse is served from the memo.
    assert_same_sessions([b for body in bodies for b in (body, copy.deepcopy(body))])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(openai_body, min_size=1, max_size=3))
def test_arbitrary_openai_requests_match_the_unmemoised_path(bodies):
    assert_same_sessions([b for body in bodies for b in (body, copy.deepcopy(body))], openai)


def test_an_openai_agent_session_matches_the_unmemoised_path():
    """Tools, tool calls and their results, and a growing history, as a Chat Completions agent sends them."""
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file. " * 40,
                                               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
    history = [{"role": "system", "content": POLICY}, {"role": "user", "content": "Fix the failing test."}]
    bodies = []
    for turn in range(5):
        history = [*history,
                   {"role": "assistant", "content": None, "tool_calls": [
                       {"id": f"call_{turn}", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "f{turn}.py"}}'}}]},
                   {"role": "tool", "tool_call_id": f"call_{turn}", "content": "def f():\n    return 1\n" * 30},
                   {"role": "user", "content": [{"type": "text", "text": f"Step {turn}: go on."}]}]
        bodies.append({"model": "gpt-5.6-sol", "tools": tools, "messages": copy.deepcopy(history)})
    assert_same_sessions(bodies, openai)


def test_a_value_orjson_cannot_write_is_parsed_without_the_memo():
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8,
            "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [],
                                                        "x_big": 2 ** 70}]}]}
    conv = anthropic.parse_request(json.dumps(body))
    assert conv.segments[0].blocks[0].native["x_big"] == 2 ** 70
    assert compact_bytes(anthropic.encode_request(conv)) == json.dumps(body, separators=(",", ":")).encode()
