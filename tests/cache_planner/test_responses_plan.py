"""Planning Responses requests: volatile lines leave `instructions` for the newest input, the cache key
comes from the static prefix, retention follows reuse, and a `previous_response_id` chain keeps every
earlier turn as sent."""

from __future__ import annotations

from prefixgate.cache_planner.plan import plan
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.cache_planner.target import Target
from prefixgate.dialects import responses as rs
from tests.core.providers.support_prompts import text_of

STATIC = "You are the support agent for Acme.\n" + text_of(1500) + ".\n"
TARGET = Target("openai", "gpt-5.4")


def _body(day: int, **extra) -> dict:
    return {"model": "gpt-5.4", "instructions": f"Today is 2026-11-{day:02d}.\n" + STATIC,
            "input": "Where is my order?", **extra}


def _planned(body: dict, state: PlannerState, now: float = 0.0):
    result = plan(rs.parse_request(body), TARGET, state, route="r", now=now)
    return rs.encode_request(result.conversation), result.explanation


def test_dated_instructions_become_static_and_the_key_is_the_same_every_day():
    # A date waits for evidence (a fixed date in instructions must never move): once the route has seen it
    # change, it leaves `instructions` for the input, and the key stays the same from day to day.
    state = PlannerState()
    _planned(_body(1), state)
    second, notes = _planned(_body(2), state, now=60)
    third, _ = _planned(_body(3), state, now=120)
    assert second["instructions"] == third["instructions"] == STATIC
    assert second["prompt_cache_key"] == third["prompt_cache_key"]
    assert third["input"][0]["content"][0] == {"type": "input_text", "text": "Context:\nToday is 2026-11-03.\n"}
    assert any(n.startswith("rewrite: moved") for n in notes)


def test_previous_response_id_changes_only_the_new_input_and_keeps_the_key():
    state = PlannerState()
    for day in (1, 2, 3):  # the route has seen the date change: it is volatile, not learned static
        first, _ = _planned(_body(day), state, now=day)
    call_output = {"type": "function_call_output", "call_id": "c1", "output": "shipped"}
    chained, notes = _planned(_body(3, previous_response_id="resp_1", input=[call_output]), state, now=30)
    assert chained["instructions"] == first["instructions"]
    assert chained["prompt_cache_key"] == first["prompt_cache_key"]
    assert chained["input"][0] == call_output      # the tool output as sent, then the moved context after it
    assert chained["input"][1] == {"role": "user", "content": [
        {"type": "input_text", "text": "Context:\nToday is 2026-11-03.\n"}]}
    assert "plan: previous_response_id: the earlier turns live at the provider and were not changed" in notes


def test_retention_24h_when_prefixes_come_back_after_the_in_memory_window():
    state = PlannerState()
    for i in range(6):
        body, notes = _planned(_body(1, input=f"q{i}"), state, now=i * 1800.0)
    assert body["prompt_cache_retention"] == "24h"
    assert any(n.startswith("cache: retention 24h") for n in notes)
    quick = PlannerState()
    for i in range(6):
        body, notes = _planned(_body(1, input=f"q{i}"), quick, now=i * 10.0)
    assert "prompt_cache_retention" not in body
    kept, notes = _planned(_body(1, prompt_cache_retention="in_memory"), quick, now=100)
    assert kept["prompt_cache_retention"] == "in_memory"


def test_a_session_s_repeated_date_never_flips_the_prefix():
    # An agent loop: the same day's date on every turn. Whatever the planner decides for it, it decides the
    # same on every turn, or turn 2 would change the prefix turn 1 was cached with.
    state = PlannerState()
    turns = [_planned(_body(5, input=f"step {i}"), state, now=i * 5.0)[0] for i in range(4)]
    assert len({t["instructions"] for t in turns}) == 1
    assert len({t["prompt_cache_key"] for t in turns}) == 1


# ---- GPT-5.6+: paid writes at breakpoints ----------------------------------------------------------------

GPT6 = Target("openai", "gpt-6.2-sol")


def _gpt6(question: str, **extra) -> dict:
    return {"model": "gpt-6.2-sol", "instructions": STATIC, "input": question, **extra}


def _planned_gpt6(body: dict, state: PlannerState, now: float):
    result = plan(rs.parse_request(body), GPT6, state, route="r", now=now)
    return rs.encode_request(result.conversation), result.explanation


def test_stateless_instructions_go_as_a_marked_developer_message_so_a_new_session_reads_them():
    """`instructions` is a string no `prompt_cache_breakpoint` can mark, and GPT-5.6+ reads a prefix only where a
    breakpoint was written: a new session (another question) would write the whole static prefix again at 1.25x.
    On a request nothing chains to, they go as what they are, the context's first message, a developer one."""
    from prefixgate.simulation.simulator import Simulator  # noqa: PLC0415

    state, sim = PlannerState(), Simulator()
    reads = []
    for i, question in enumerate(("Where is my order?", "How do I get a refund for a damaged item?")):
        body, notes = _planned_gpt6(_gpt6(question, store=False), state, now=60.0 * i)
        assert "instructions" not in body and body["input"][0] == {
            "role": "developer", "content": [{"type": "input_text", "text": STATIC,
                                              "prompt_cache_breakpoint": {"mode": "explicit"}}]}
        assert any(n.startswith("cache: instructions sent as the first input item") for n in notes)
        reads.append(sim.respond("openai", body, now=60.0 * i).usage.cache_read)
    # The second session's first request reads the instructions the first wrote (the developer message's
    # framing tokens included), not 0.
    assert reads[0] == 0 and reads[1] >= 1500


def test_stored_instructions_stay_a_string_and_the_plan_says_they_are_not_marked():
    """A stored response (the default) may be chained from: a developer message in its input would be carried into
    the next response beside that one's own instructions. So they stay, unmarked, and the plan does not claim a
    static checkpoint it cannot send."""
    state = PlannerState()
    for i in range(2):
        body, notes = _planned_gpt6(_gpt6(f"Question {i}?"), state, now=60.0 * i)
        assert body["instructions"] == STATIC
        assert not any(n.startswith("checkpoint: static") for n in notes)
        assert any("`instructions` cannot carry a breakpoint" in n for n in notes)


def test_an_agent_loop_is_read_through_its_latest_tool_output():
    """A tool call's output given as a string is an input item no breakpoint can mark (it goes byte for byte):
    the planner asks for implicit mode, whose breakpoint OpenAI places at the newest tool message, so each step
    of the loop reads the last step's output instead of stopping at the user's message."""
    from prefixgate.simulation.simulator import Simulator  # noqa: PLC0415

    state, sim = PlannerState(), Simulator()
    items: list[dict] = [{"role": "user", "content": "Fix the failing test."}]
    reads, sent = [], []
    for step in range(4):
        body, notes = _planned_gpt6(_gpt6("", store=False, input=list(items)), state, now=5.0 * step)
        usage = sim.respond("openai", body, now=5.0 * step).usage
        reads.append(usage.cache_read)
        sent.append(usage.input_total)
        items += [{"type": "function_call", "call_id": f"c{step}", "name": "read_file", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"c{step}", "output": text_of(800, (" alpha", " beta", " gamma", " delta")[step])}]
    assert body["prompt_cache_options"]["mode"] == "implicit"
    assert any(n.startswith("implicit breakpoint: conversation") for n in notes)
    # Each step reads everything the step before sent, through its newest tool output: its prompt less the 3
    # tokens that prime the reply (ChatML, per OpenAI's counting cookbook).
    assert reads[1:] == [n - 3 for n in sent[:-1]]
