"""`caller_checkpoints`: what the planner does with cache markers the caller placed itself, with real
Anthropic `cache_control` (with and without `ttl`) and OpenAI breakpoints."""

from __future__ import annotations

import json

import pytest

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.dialects import anthropic as an
from tests.cache_planner.support_planning import POLICY, plan_body

SONNET = Target("anthropic", "claude-sonnet-4-6")
GPT = Target("openai", "gpt-5.6-sol")
EPHEMERAL = {"type": "ephemeral"}


def marked_support(i: int, ttl: str | None = None) -> dict:
    """A support request marked "system + last message", as LiteLLM's injection does."""
    mark = EPHEMERAL | ({"ttl": ttl} if ttl else {})
    return {"model": SONNET.model, "max_tokens": 200,
            "system": [{"type": "text", "text": "You are Ava.\n" + POLICY, "cache_control": mark}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"Where is my parcel {i}?",
                                                      "cache_control": EPHEMERAL}]}]}


def marks(out: dict) -> list[dict]:
    """Every `cache_control` in a body, in prefix order."""
    found: list[dict] = []

    def walk(v: object) -> None:
        if isinstance(v, dict):
            if isinstance(v.get("cache_control"), dict):
                found.append(v["cache_control"])
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk({k: out[k] for k in ("tools", "system", "messages") if k in out})
    return found


@pytest.mark.parametrize("ttl", [None, "1h"])
def test_keep_sends_the_callers_markers_as_they_are(ttl):
    state = PlannerState()
    for i in range(4):
        out, result = plan_body("anthropic", marked_support(i, ttl), SONNET, state, now=i * 1200.0)
        assert marks(out) == [EPHEMERAL | ({"ttl": ttl} if ttl else {}), EPHEMERAL]
        assert any("kept as sent" in line for line in result.explanation)


def test_add_lengthens_a_5m_marker_when_the_routes_gaps_make_1h_cheaper():
    state = PlannerState()
    for i in range(8):  # every 20 minutes: a 5m entry is always gone, a 1h one always read
        out, result = plan_body("anthropic", marked_support(i), SONNET, state, now=i * 1200.0, caller="add")
    assert marks(out)[0] == EPHEMERAL | {"ttl": "1h"}
    assert any("ttl 5m -> 1h" in line for line in result.explanation)
    # keep on the same history leaves it at 5m, and add never shortens a caller's 1h.
    out, _ = plan_body("anthropic", marked_support(9), SONNET, state, now=9 * 1200.0, caller="keep")
    assert marks(out)[0] == EPHEMERAL
    out, _ = plan_body("anthropic", marked_support(10, "1h"), SONNET, state, now=10 * 1200.0 + 5, caller="add")
    assert marks(out)[0] == EPHEMERAL | {"ttl": "1h"}


def agent_turns(caller_marks_system: bool, turns: int = 3) -> list[dict]:
    """A tool loop whose turns append 30 blocks each, far past Anthropic's 20-block lookback; the caller
    marks the last block (and optionally the system prompt), as Claude Code does."""
    tools = [{"name": f"tool_{i}", "description": "d" * 50, "input_schema": {"type": "object"}} for i in range(3)]
    messages: list = [{"role": "user", "content": "Fix the bug in the repo."}]
    bodies = []
    for turn in range(turns):
        system = [{"type": "text", "text": POLICY} | ({"cache_control": EPHEMERAL} if caller_marks_system else {})]
        sent = json.loads(json.dumps(messages))
        last = sent[-1]["content"]
        if isinstance(last, str):
            sent[-1]["content"] = [{"type": "text", "text": last, "cache_control": EPHEMERAL}]
        else:
            last[-1]["cache_control"] = EPHEMERAL
        bodies.append({"model": SONNET.model, "max_tokens": 100, "tools": tools, "system": system, "messages": sent})
        for k in range(15):
            messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{turn}_{k}", "name": "tool_0", "input": {"k": k}}]})
            messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{turn}_{k}", "content": "ok " * 40}]})
    return bodies


def marked_positions(out: dict) -> list[int]:
    conv = an.parse_request(out)
    return [i for i, b in enumerate(conv.blocks()) if b.checkpoint is not None]


def test_add_bridges_the_20_block_lookback_within_the_4_marker_limit():
    state = PlannerState()
    bodies = agent_turns(caller_marks_system=True)
    for turn, body in enumerate(bodies):
        out, result = plan_body("anthropic", body, SONNET, state, route="agent", now=turn * 10.0, caller="add")
    positions = marked_positions(out)
    sent = marked_positions(body)
    previous_end = marked_positions(bodies[-2])[-1]
    # As sent, the last marker is 30 blocks past the previous turn's entry: it could not find it.
    assert sent[-1] - previous_end > 20
    # The caller's markers are still there, with the planner's bridges, within the limit of 4.
    assert set(sent) < set(positions) and len(positions) <= 4
    # Each marker after the previous turn's entry is within 20 blocks of it or of the one before.
    chain = [previous_end] + [p for p in positions if p > previous_end]
    assert all(b - a <= 20 for a, b in zip(chain, chain[1:], strict=False))
    assert any(line.startswith("checkpoint: added") for line in result.explanation)


def test_add_respects_the_limit_when_the_caller_used_all_four():
    state = PlannerState()
    for turn, body in enumerate(agent_turns(caller_marks_system=True)):
        # Also the tools' end and the first user turn: 4 markers in all, Anthropic's limit.
        body["tools"][-1]["cache_control"] = EPHEMERAL
        if len(body["messages"]) > 1:
            body["messages"][0]["content"] = [{"type": "text", "text": "Fix the bug in the repo.", "cache_control": EPHEMERAL}]
        out, _ = plan_body("anthropic", body, SONNET, state, route="agent4", now=turn * 10.0, caller="add")
        assert len(marks(out)) == len(marks(body)) <= 4
        assert marked_positions(out) == marked_positions(body)
    assert len(marks(body)) == 4


def test_optimize_drops_markers_that_never_pay_and_lists_them():
    state = PlannerState()
    for i in range(4):
        body = {"model": SONNET.model, "max_tokens": 100, "system": [
            {"type": "text", "text": "You summarise reports.", "cache_control": EPHEMERAL}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"report {i} " * 3000,
                                                      "cache_control": EPHEMERAL}]}]}
        out, result = plan_body("anthropic", body, SONNET, state, route="oneoff", now=i * 150.0, caller="optimize")
    assert marks(out) == []
    assert any(line.startswith("checkpoint: dropped the caller's 5m marker") for line in result.explanation)
    # add, on the same traffic, never drops a caller's marker.
    out, _ = plan_body("anthropic", body, SONNET, state, route="oneoff", now=900.0, caller="add")
    assert marks(out) == marks(body)


def test_optimize_keeps_the_marker_that_pays_and_drops_the_one_that_does_not():
    state = PlannerState()
    for i in range(6):
        out, result = plan_body("anthropic", marked_support(i), SONNET, state, now=i * 30.0, caller="optimize")
    # Requests every 30 s: the system prompt's 5m marker is already the cheapest choice and stays; the
    # marker on each single-turn question is never read (no follow-up turn) and goes.
    assert marks(out) == [EPHEMERAL]
    assert "cache_control" in out["system"][0]
    assert [line for line in result.explanation if line.startswith("checkpoint:")] == [
        line for line in result.explanation if line.startswith("checkpoint: dropped the caller's 5m marker")]


def openai_marked(i: int) -> dict:
    return {"model": GPT.model, "prompt_cache_options": {"mode": "explicit", "ttl": "30m"}, "messages": [
        {"role": "developer", "content": [{"type": "text", "text": "Summarise.", "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": [{"type": "text", "text": f"doc {i} " * 3000, "prompt_cache_breakpoint": {"mode": "explicit"}}]}]}


def test_openai_breakpoints_keep_and_optimize():
    state = PlannerState()
    out, result = plan_body("openai", openai_marked(0), GPT, state, route="o", now=0)
    assert json.dumps(out).count("prompt_cache_breakpoint") == 2 and out["prompt_cache_options"]["ttl"] == "30m"
    for i in range(1, 5):
        out, result = plan_body("openai", openai_marked(i), GPT, state, route="o", now=i * 60.0, caller="optimize")
    # One-off documents: the document's breakpoint never pays and is dropped.
    assert json.dumps(out["messages"][1]).count("prompt_cache_breakpoint") == 0
    assert any("dropped the caller's" in line for line in result.explanation)


def test_bad_caller_checkpoints_value_is_a_clear_error():
    conv = an.parse_request(marked_support(0))
    with pytest.raises(ValueError, match="caller_checkpoints must be one of keep, add, optimize"):
        plan(conv, SONNET, PlannerState(), caller_checkpoints="replace")  # type: ignore[arg-type]


# ---- stable decisions ---------------------------------------------------------------------------

AGENT_SYSTEM = ("You are a coding agent.\n" + POLICY + "\nWhen you write a note, follow this example:\n"
                "Merge freeze begins 2026-03-05; see TICKET-4411 for the checklist.\n" + POLICY)


def agent_request(question: str, system: str = AGENT_SYSTEM) -> dict:
    return {"model": SONNET.model, "max_tokens": 100, "system": [{"type": "text", "text": system, "cache_control": EPHEMERAL}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": question, "cache_control": EPHEMERAL}]}]}


@pytest.mark.parametrize("caller", ["keep", "add", "optimize"])
def test_a_dated_example_in_fixed_instructions_is_never_moved(caller):
    """The Claude Code case: a date and a ticket number inside an example in fixed instructions. The
    detectors fire, but with no history nothing says the line is volatile, and every later request
    shows it identical: it stays in place on the first request and on every one after."""
    state = PlannerState()
    systems = []
    for i in range(3):
        out, result = plan_body("anthropic", agent_request(f"task {i}"), SONNET, state, route="cc", now=i * 20.0,
                                caller=caller)
        systems.append(out["system"])
        assert not any(line.startswith("rewrite:") for line in result.explanation)
    assert systems[0] == systems[1] == systems[2] and "2026-03-05" in systems[0][0]["text"]


def test_a_changing_date_moves_once_it_changes_and_stays_moved_while_unchanged():
    state = PlannerState()
    day = "Today's date is 2026-11-{:02d}.\n"
    seen = []
    for i, d in enumerate([22, 22, 23, 23, 23]):
        out, _ = plan_body("anthropic", agent_request(f"task {i}", day.format(d) + AGENT_SYSTEM), SONNET, state,
                           route="daily", now=i * 20.0)
        seen.append("Today's date" in out["system"][0]["text"])
    # Kept while identical; moved the day it changed (the prefix past it broke anyway), and still
    # moved the next request although it is identical again: a moved unit moves back only if it changes.
    assert seen == [True, True, False, False, False]


def test_a_timestamp_moves_from_the_first_request_and_the_decision_holds():
    state = PlannerState()
    moved = []
    for i in range(3):
        system = "Current time: 2026-11-22T10:00:00Z\n" + AGENT_SYSTEM  # identical on every request
        out, _ = plan_body("anthropic", agent_request(f"task {i}", system), SONNET, state, route="ts", now=i * 20.0)
        moved.append("Current time" not in out["system"][0]["text"])
    assert moved == [True, True, True]
