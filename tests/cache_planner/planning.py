"""Helpers for planner tests: plan a native body and get the native body back."""

from __future__ import annotations

import json

from prefixgate.cache_planner import Plan, PlannerState, Target, plan
from prefixgate.dialects import DIALECTS

POLICY = "Policy: refunds are accepted within 30 days of purchase; shipping is free over $50. " * 60


def plan_body(dialect: str, body: dict, target: Target, state: PlannerState, *, now: float, route: str = "r",
              mode: str = "rewrite", model: str | None = None, caller: str = "keep") -> tuple[dict, Plan]:
    module = DIALECTS[dialect]
    conv = module.parse_request(json.dumps(body), model=model) if dialect == "gemini" else module.parse_request(json.dumps(body))
    result = plan(conv, target, state, mode, route=route, now=now, caller_checkpoints=caller)
    out = module.encode_request(result.conversation)
    # A planned request must still be a valid request of its dialect.
    module.parse_request(out, model=model) if dialect == "gemini" else module.parse_request(out)
    return out, result


def texts(value) -> list[str]:
    """The prompt text in a JSON value: bare strings and every `text` field, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [value["text"]] if isinstance(value.get("text"), str) else [t for v in value.values() if isinstance(v, (dict, list)) for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return []
