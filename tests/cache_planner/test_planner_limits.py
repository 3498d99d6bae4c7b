"""The planner never asks a provider for what it refuses or ignores, checked against published limits:

- Anthropic allows at most 4 `cache_control` breakpoints per request (a fifth is a 400 on every later turn:
  https://docs.claude.com/en/docs/build-with-claude/prompt-caching, "Cache limitations").
- A prefix shorter than the model's minimum cacheable length is not cached (Claude Opus 4.6: 4,096 tokens,
  same page, "Cache limitations" table): a checkpoint there writes nothing, so the planner places none."""

from __future__ import annotations

import json

from prefixgate import tokens
from prefixgate.cache_planner import PlannerState, Target
from tests.cache_planner.support_planning import plan_body

OPUS = Target("anthropic", "claude-opus-4-6")
OPUS_MINIMUM = 4096       # published; typed here, not read from the catalogue
ANTHROPIC_MAX_BREAKPOINTS = 4
SENTENCE = "Refunds are accepted within thirty days of purchase when the item is unused and boxed. "


def _text_of(n_tokens: int) -> str:
    one = tokens.count_tokens(SENTENCE, tokens.encoding_for("anthropic", OPUS.model))
    return SENTENCE * (n_tokens // one)


def _markers(body: dict) -> int:
    return json.dumps(body).count('"cache_control"')


def _warm_plans(system: str, n: int = 4) -> list[dict]:
    """The same system prompt sent n times a minute apart on one route: reuse the planner would pay for."""
    state, outs = PlannerState(), []
    for i in range(n):
        body = {"model": OPUS.model, "max_tokens": 50, "system": system,
                "messages": [{"role": "user", "content": f"Question {i}: where is my parcel?"}]}
        out, _ = plan_body("anthropic", body, OPUS, state, route="support", now=i * 60.0)
        outs.append(out)
    return outs


def test_no_checkpoint_below_the_models_minimum_even_on_a_route_that_repeats() -> None:
    outs = _warm_plans(_text_of(int(OPUS_MINIMUM * 0.75)))
    assert all(_markers(out) == 0 for out in outs)


def test_a_checkpoint_once_the_prefix_passes_the_minimum() -> None:
    # The same route with the prompt past the minimum: the test above is not passing for another reason.
    outs = _warm_plans(_text_of(int(OPUS_MINIMUM * 1.3)))
    assert _markers(outs[-1]) >= 1


def test_an_agent_turn_of_120_tool_blocks_never_gets_a_fifth_marker() -> None:
    state = PlannerState()
    tools = [{"name": f"tool_{i}", "description": SENTENCE * 20, "input_schema": {"type": "object"}} for i in range(4)]
    messages: list = [{"role": "user", "content": "Fix the failing tests in the repository."}]
    for turn in range(3):
        body = {"model": OPUS.model, "max_tokens": 100, "tools": tools, "system": _text_of(5000), "messages": list(messages)}
        out, _ = plan_body("anthropic", body, OPUS, state, route="agent", now=turn * 30.0)
        assert _markers(out) <= ANTHROPIC_MAX_BREAKPOINTS, turn
        # 60 tool calls and 60 results per turn: 120 blocks, many lookback bridge candidates.
        for k in range(60):
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{turn}_{k}", "name": "tool_0", "input": {"k": k}}]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{turn}_{k}", "content": SENTENCE * 6}]})
    assert _markers(out) == ANTHROPIC_MAX_BREAKPOINTS  # the limit is reached, so a fifth was a candidate
