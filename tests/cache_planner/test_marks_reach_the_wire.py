"""Every checkpoint the planner places reaches the wire: the planned conversation, encoded in its own format and
parsed again, carries the same marks, on every format whose target takes breakpoints. (A mark a format cannot
express, such as one on Responses' string `instructions`, was once planned, noted and silently dropped.)"""

from __future__ import annotations

import pytest

from prefixgate.cache_planner.plan import plan
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.cache_planner.target import Target
from prefixgate.dialects import request_dialect
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
}


def _marks(conv) -> int:
    return sum(block.checkpoint is not None for block in conv.blocks())


@pytest.mark.parametrize("case", list(BODIES))
def test_every_planned_mark_is_on_the_wire(case: str) -> None:
    provider, model, body = BODIES[case]
    wire = request_dialect(provider, body)
    state = PlannerState()
    for i in range(3):      # the route's first request, and later ones that have seen the prefix come back
        result = plan(wire.parse_request(body, model=model), Target(provider, model), state, route="r", now=60.0 * i)
        planned = _marks(result.conversation)
        sent = wire.encode_request(result.conversation)
        assert _marks(request_dialect(provider, sent).parse_request(sent, model=model)) == planned, result.explanation
        # The plan's notes name each mark it placed.
        assert sum(n.startswith("checkpoint:") for n in result.explanation) == planned, result.explanation
    assert planned > 0 or case == "responses, stored"
