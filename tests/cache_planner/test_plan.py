"""Planner behaviour: rewrites keep every byte, checkpoints follow each provider's rules and pay for
themselves, and what the planner cannot plan goes out unchanged."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from prefixgate.cache_planner import PlannerState, RedisStore, Target
from prefixgate.cache_planner.stability import DYNAMIC_KINDS
from prefixgate.dialects import anthropic as an
from tests.cache_planner.support_planning import DETECTOR_CASES, POLICY, plan_body, texts

SONNET = Target("anthropic", "claude-sonnet-4-6")
SYSTEM = "You are Ava, the ACME support agent.\nCurrent time: 2026-11-22T10:{:02d}:00Z\n" + POLICY


def support(i: int, history: list | None = None) -> dict:
    return {"model": SONNET.model, "max_tokens": 200, "system": SYSTEM.format(i % 60),
            "messages": (history or []) + [{"role": "user", "content": f"Where is my parcel {i}?"}]}


def test_volatile_line_moves_to_user_turn_and_no_byte_is_lost():
    out, plan = plan_body("anthropic", support(7), SONNET, PlannerState(), now=0)
    system_text = "".join(b["text"] for b in out["system"])
    assert "Current time" not in system_text and system_text.startswith("You are Ava")
    first = out["messages"][0]["content"]
    assert first[0]["text"] == "Context:\nCurrent time: 2026-11-22T10:07:00Z\n"
    # Every original character is still sent; only the label is new.
    before = Counter("".join(texts(support(7)["system"])) + "Where is my parcel 7?")
    after = Counter("".join(texts(out["system"]) + texts(out["messages"])))
    assert after - before == Counter("Context:\n") and not (before - after)
    assert any(line.startswith("rewrite: moved") for line in plan.explanation)


def _changed(value: str) -> str:
    """Another value of the same kind: a weekday's neighbour, or the last digit moved on."""
    if value == "Sunday":
        return "Monday"
    i = max(i for i, c in enumerate(value) if c.isdigit())
    return value[:i] + str((int(value[i]) + 1) % 10) + value[i + 1:]


@pytest.mark.parametrize(("sentence", "kind", "value"), DETECTOR_CASES, ids=[f"{k}:{v}" for _, k, v in DETECTOR_CASES])
def test_each_detector_s_value_leaves_the_static_prefix(sentence, kind, value):
    """Static-first for every detector: a per-request value (timestamp, id) leaves the system prompt on the
    route's first request; a session value (date, reference) once the route's traffic shows it changing,
    since a fixed example in the instructions must never move (issue 20)."""
    state = PlannerState()

    def planned(text: str, now: float) -> tuple[dict, object]:
        body = {"model": SONNET.model, "max_tokens": 200, "system": f"You are Ava.\n{text}\n{POLICY}",
                "messages": [{"role": "user", "content": "Where is my parcel?"}]}
        return plan_body("anthropic", body, SONNET, state, now=now)

    first, plan = planned(sentence, 0)
    if kind in DYNAMIC_KINDS:
        assert value not in "".join(texts(first["system"]))
    other = _changed(value)
    out, plan = planned(sentence.replace(value, other), 10)
    system_text = "".join(texts(out["system"]))
    assert other not in system_text and system_text == "You are Ava.\n" + POLICY
    assert other in "".join(texts(out["messages"]))
    assert any(line.startswith("rewrite: moved") for line in plan.explanation)


def test_input_conversation_is_not_modified():
    conv = an.parse_request(support(1))
    snapshot = json.dumps(an.encode_request(conv))
    from prefixgate.cache_planner import plan

    plan(conv, SONNET, PlannerState(), now=0)
    assert json.dumps(an.encode_request(conv)) == snapshot


def test_static_prefix_is_identical_across_requests_and_marked():
    state = PlannerState()
    systems = []
    for i in range(5):
        out, plan = plan_body("anthropic", support(i), SONNET, state, now=i * 20.0)
        systems.append(json.dumps(out["system"]))
        assert out["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert len(set(systems)) == 1


def test_previous_turn_context_is_resent_so_history_stays_cacheable():
    state = PlannerState()
    history: list = []
    sent = []
    for i in range(3):
        out, _ = plan_body("anthropic", support(i, history), SONNET, state, now=i * 30.0)
        sent.append(out["messages"])
        history = history + [{"role": "user", "content": f"Where is my parcel {i}?"}, {"role": "assistant", "content": f"On its way {i}."}]
    # Turn 2 re-sends turn 1's user message exactly as planned then (minus the checkpoint marker).
    strip = lambda m: json.dumps(m).replace(', "cache_control": {"type": "ephemeral"}', "")  # noqa: E731
    assert strip(sent[2][0]) == strip(sent[1][0]) == strip(sent[0][0])
    assert strip(sent[2][2]) == strip(sent[1][2])


def test_one_off_route_stops_paying_for_writes():
    state = PlannerState()
    marks = []
    for i in range(6):
        body = {"model": SONNET.model, "max_tokens": 10,
                "messages": [{"role": "user", "content": f"Summarise report {i}: " + f"unique finding {i} " * 1500}]}
        out, plan = plan_body("anthropic", body, SONNET, state, route="oneoff", now=i * 60.0)
        marks.append(len(plan.conversation.checkpoints()))
    assert marks[0] == 1 and marks[2:] == [0, 0, 0, 0]


def test_long_gaps_choose_the_one_hour_ttl():
    state = PlannerState()
    ttl = None
    for i in range(8):
        out, _ = plan_body("anthropic", support(i), SONNET, state, now=i * 900.0)  # every 15 minutes
        ttl = out["system"][-1]["cache_control"].get("ttl", "5m")
    assert ttl == "1h"


def test_at_most_four_checkpoints_with_long_ttls_first_and_bridges_for_long_turns():
    state = PlannerState()
    tools = [{"name": f"tool_{i}", "description": "d" * 50, "input_schema": {"type": "object"}} for i in range(3)]
    messages: list = [{"role": "user", "content": "Fix the bug in the repo."}]
    outs = []
    for turn in range(3):
        body = {"model": SONNET.model, "max_tokens": 100, "tools": tools, "system": POLICY, "messages": list(messages)}
        out, plan = plan_body("anthropic", body, SONNET, state, route="agent", now=turn * 10.0)
        outs.append((out, plan))
        # Each turn appends 30 tool calls and results: far past the 20-position lookback.
        for k in range(15):
            messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{turn}_{k}", "name": "tool_0", "input": {"k": k}}]})
            messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{turn}_{k}", "content": "ok " * 40}]})
    out, plan = outs[-1]
    marks = [m for m in json.dumps(out).split('"cache_control": ')[1:]]
    assert 2 <= len(marks) <= 4
    ttls = [m.split("}")[0] for m in marks]
    assert ttls == sorted(ttls, key=lambda t: '"1h"' not in t)
    assert any(line.startswith("checkpoint: lookback") for line in plan.explanation)


def test_context_goes_after_tool_results():
    body = {"model": SONNET.model, "max_tokens": 10, "system": SYSTEM.format(1),
            "messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]}]}
    out, _ = plan_body("anthropic", body, SONNET, PlannerState(), now=0)
    last = out["messages"][-1]["content"]
    assert last[0]["type"] == "tool_result" and last[1]["text"].startswith("Context:")


def test_documents_move_ahead_of_the_question():
    doc = "The ACME 3000 manual. " * 400
    body = {"model": SONNET.model, "max_tokens": 10, "system": "Answer from the document.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What is the warranty?"},
                                                      {"type": "text", "text": doc}]}]}
    out, plan = plan_body("anthropic", body, SONNET, PlannerState(), now=0)
    content = out["messages"][0]["content"]
    assert content[0]["text"] == doc and content[1]["text"] == "What is the warranty?"
    assert content[0].get("cache_control")  # the document prefix is its own checkpoint
    assert any("document" in line for line in plan.explanation)


def test_tool_key_order_churn_is_undone():
    state = PlannerState()
    a = {"name": "search", "description": "Search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    b = {"input_schema": {"properties": {"q": {"type": "string"}}, "type": "object"}, "description": "Search", "name": "search"}
    first, _ = plan_body("anthropic", {"model": SONNET.model, "max_tokens": 5, "tools": [a], "messages": [{"role": "user", "content": "x"}]},
                         SONNET, state, now=0)
    second, plan = plan_body("anthropic", {"model": SONNET.model, "max_tokens": 5, "tools": [b], "messages": [{"role": "user", "content": "y"}]},
                             SONNET, state, now=1)
    strip = lambda t: {k: v for k, v in t.items() if k != "cache_control"}  # noqa: E731
    assert json.dumps(strip(second["tools"][0])) == json.dumps(strip(first["tools"][0]))
    assert any("first-seen form" in line for line in plan.explanation)
    # A `required` list from a Python set, and a moved marker, are the same tool too.
    c = {**a, "input_schema": {"type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer"}},
                               "required": ["q", "k"]}}
    d = {**c, "input_schema": {**c["input_schema"], "required": ["k", "q"]}, "cache_control": {"type": "ephemeral"}}
    plan_body("anthropic", {"model": SONNET.model, "max_tokens": 5, "tools": [c], "messages": [{"role": "user", "content": "x"}]},
              SONNET, state, now=2)
    out, _ = plan_body("anthropic", {"model": SONNET.model, "max_tokens": 5, "tools": [d], "messages": [{"role": "user", "content": "y"}]},
                       SONNET, state, now=3)
    assert out["tools"][0]["input_schema"]["required"] == ["q", "k"] and out["tools"][0]["cache_control"] == {"type": "ephemeral"}


def test_caller_checkpoints_are_kept_and_rewrites_still_apply():
    body = support(1) | {"cache_control": {"type": "ephemeral"}}
    body["system"] = [{"type": "text", "text": SYSTEM.format(1), "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    out, plan = plan_body("anthropic", body, SONNET, PlannerState(), now=0)
    assert out["cache_control"] == {"type": "ephemeral"}
    assert out["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "Current time" not in out["system"][0]["text"]  # the marked block now caches its static part
    assert json.dumps(out).count("cache_control") == 2
    assert any("caller placed 2" in line for line in plan.explanation)


def test_checkpoints_mode_does_not_rewrite_and_off_mode_is_passthrough():
    out, plan = plan_body("anthropic", support(3), SONNET, PlannerState(), now=0, mode="checkpoints")
    assert "Current time" in json.dumps(out["system"]) and not any(x.startswith("rewrite:") for x in plan.explanation)
    body = support(3)
    out, plan = plan_body("anthropic", body, SONNET, PlannerState(), now=0, mode="off")
    assert json.dumps(out) == json.dumps(body)


def test_below_minimum_tokens_no_checkpoint():
    body = {"model": "claude-haiku-4-5", "max_tokens": 5, "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    out, plan = plan_body("anthropic", body, Target("anthropic", "claude-haiku-4-5"), PlannerState(), now=0)
    assert "cache_control" not in json.dumps(out)
    assert any("below" in line and "minimum" in line for line in plan.explanation)


def test_unknown_model_passes_through_with_a_note():
    body = support(1) | {"model": "claude-imaginary-9"}
    out, plan = plan_body("anthropic", body, Target("anthropic", "claude-imaginary-9"), PlannerState(), now=0)
    assert json.dumps(out) == json.dumps(body) and plan.explanation[0].startswith("passthrough:")


def test_openai_implicit_regime_sets_a_cache_key_and_respects_the_callers():
    target = Target("openai", "gpt-5.4")
    body = {"model": "gpt-5.4", "messages": [{"role": "system", "content": SYSTEM.format(2)}, {"role": "user", "content": "hi"}]}
    out, _ = plan_body("openai", body, target, PlannerState(), now=0)
    assert out["prompt_cache_key"].startswith("pg-") and "Current time" not in out["messages"][0]["content"]
    assert "cache_control" not in json.dumps(out) and "prompt_cache_breakpoint" not in json.dumps(out)
    out, _ = plan_body("openai", body | {"prompt_cache_key": "mine"}, target, PlannerState(), now=0)
    assert out["prompt_cache_key"] == "mine"


def test_openai_breakpoint_regime_marks_only_non_assistant_parts_and_stops_on_one_off():
    target = Target("openai", "gpt-5.6-sol")
    body = {"model": target.model, "messages": [{"role": "developer", "content": POLICY},
                                                {"role": "assistant", "content": "Hello"},
                                                {"role": "user", "content": "hi"}]}
    out, _ = plan_body("openai", body, target, PlannerState(), now=0)
    assert out["prompt_cache_options"] == {"mode": "explicit", "ttl": "30m"}
    assert out["messages"][0]["content"][0]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert "prompt_cache_breakpoint" not in json.dumps(out["messages"][1])
    state = PlannerState()
    for i in range(4):
        one_off = {"model": target.model, "messages": [{"role": "user", "content": f"doc {i} " * 3000}]}
        out, _ = plan_body("openai", one_off, target, state, route="oneoff", now=i * 60.0)
    assert out["prompt_cache_options"] == {"mode": "explicit"} and "prompt_cache_breakpoint" not in json.dumps(out)


def test_gemini_rewrite_keeps_implicit_prefix_stable():
    target = Target("gemini", "gemini-3.5-flash")
    body = {"systemInstruction": {"parts": [{"text": SYSTEM.format(4)}]}, "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    out, plan = plan_body("gemini", body, target, PlannerState(), now=0, model=target.model)
    assert "Current time" not in out["systemInstruction"]["parts"][0]["text"]
    assert out["contents"][0]["parts"][0]["text"].startswith("Context:")
    assert any(line.startswith("cache: gemini caches implicitly") for line in plan.explanation)


def test_state_is_bounded():
    state = PlannerState(max_routes=3)
    for i in range(10):
        plan_body("anthropic", support(i), SONNET, state, route=f"route-{i}", now=0)
    assert len(state.routes) == 3
    with pytest.raises(ValueError):
        PlannerState(max_routes=0)


def test_redis_store_shares_learning_between_replicas(redis_url):
    a = PlannerState(store=RedisStore(redis_url, prefix="pgtest:"), publish_every_s=0)
    b = PlannerState(store=RedisStore(redis_url, prefix="pgtest:"), publish_every_s=0)
    for i in range(4):
        plan_body("anthropic", support(i), SONNET, a, route="shared", now=i * 10.0)
    # Replica b has never seen the route, yet knows its static prefix recurs.
    _, plan = plan_body("anthropic", support(9), SONNET, b, route="shared", now=50.0)
    static = next(line for line in plan.explanation if line.startswith("checkpoint: static"))
    assert "p(reuse<5m)=0.4" not in static
    assert b.routes["shared"].reuse.level("static").reuses >= 3


def test_a_list_of_tools_is_checked_tool_by_tool_whatever_lists_came_before():
    # The tools' identities are memoised per list: a list differing in one tool must not be answered for another.
    state = PlannerState()
    clock = {"name": "clock", "description": "Time", "input_schema": {"type": "object", "properties": {}}}
    a = {"name": "search", "description": "Search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    b = {"input_schema": {"properties": {"q": {"type": "string"}}, "type": "object"}, "description": "Search", "name": "search"}

    def send(tools: list, now: int) -> tuple[dict, object]:
        body = {"model": SONNET.model, "max_tokens": 5, "tools": tools, "messages": [{"role": "user", "content": f"q{now}"}]}
        return plan_body("anthropic", body, SONNET, state, now=now)

    _, plan = send([clock, a], 0)
    assert not any("first-seen form" in line for line in plan.explanation)
    out, plan = send([clock, b], 1)
    strip = lambda t: {k: v for k, v in t.items() if k != "cache_control"}  # noqa: E731
    assert json.dumps(strip(out["tools"][1]), separators=(",", ":")) == (
        '{"name":"search","description":"Search","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}')
    assert [line for line in plan.explanation if "first-seen form" in line] == [
        "rewrite: restored the first-seen form of tool 'search' (its keys or `required` came reordered)"]
    _, plan = send([clock, a], 2)
    assert not any("first-seen form" in line for line in plan.explanation)


def test_a_fingerprint_follows_the_tool_names_and_masked_system_it_is_given():
    # The route a prompt plans under: its tool names and its system text with volatile values masked. The
    # fingerprint is memoised by the blocks' content: another tool or other system text is another route.
    from prefixgate.cache_planner import fingerprint
    from prefixgate.dialects import anthropic

    def conv(tool: str, system: str):
        body = {"model": SONNET.model, "max_tokens": 5, "system": system, "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": tool, "description": "Look things up", "input_schema": {"type": "object"}}]}
        return anthropic.parse_request(json.dumps(body).encode())

    base = fingerprint(conv("search", "Today is 2026-11-27. You help with orders."))
    assert fingerprint(conv("search", "Today is 2026-11-27. You help with orders.")) == base
    assert fingerprint(conv("search", "Today is 2026-11-28. You help with orders.")) == base     # a date is masked
    assert fingerprint(conv("lookup", "Today is 2026-11-27. You help with orders.")) != base
    assert fingerprint(conv("search", "Today is 2026-11-27. You help with refunds.")) != base
