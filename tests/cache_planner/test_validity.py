"""The planner never turns a valid request into an invalid one: every generated request the provider
simulator accepts as sent, it also accepts as planned (0 errors allowed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.dialects import DIALECTS
from prefixgate.errors import RequestError
from prefixgate.simulation.simulator import Simulator
from tests.core.support_strategies import anthropic_body, gemini_body, openai_body

MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5.6-sol", "gemini": "gemini-3.5-flash"}
BODIES = {"anthropic": anthropic_body, "openai": openai_body, "gemini": gemini_body}
VOLATILE = st.sampled_from(["", "Current time: 2026-11-22T10:00:00Z\n", "Request ID: req_9f8e7d6c\n", "Today is Monday, Nov 3, 2025.\n"])


def _with_system(provider: str, body: dict, header: str, filler: int) -> dict:
    text = header + "Static instructions that never change. " * filler
    if provider == "anthropic":
        return {**body, "system": text}
    if provider == "openai":
        return {**body, "messages": [{"role": "system", "content": text}, *body["messages"]]}
    return {**body, "systemInstruction": {"parts": [{"text": text}]}}


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_planned_requests_stay_valid(provider, data):
    body = data.draw(BODIES[provider])
    body = _with_system(provider, body, data.draw(VOLATILE), data.draw(st.integers(0, 300)))
    if provider == "anthropic":
        body["model"] = MODELS[provider]
    elif provider == "openai":
        body["model"] = MODELS[provider]
    sim = Simulator()
    model = MODELS[provider]
    try:
        sim.respond(provider, json.loads(json.dumps(body)), now=0, model=model)
    except RequestError:
        assume(False)  # only requests the provider accepts are in scope
    module = DIALECTS[provider]
    conv = module.parse_request(body, model=model) if provider == "gemini" else module.parse_request(body)
    state = PlannerState()
    for i in range(2):  # a second request on the route plans with history
        planned = module.encode_request(plan(conv, Target(provider, model), state, now=float(i)).conversation)
        Simulator().respond(provider, planned, now=0, model=model)
