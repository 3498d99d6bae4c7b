"""Helpers for planner tests: plan a native body and get the native body back."""

from __future__ import annotations

import json

from prefixgate.cache_planner import Plan, PlannerState, Target, plan
from prefixgate.cache_planner.variance import NO_RULE, Rule
from prefixgate.dialects import DIALECTS

# (text, the kind its volatile span is labelled with, the value the span must cover): one case per
# detector at least; the detector tests check the labels and the planner tests that each value leaves the
# static prefix.
DETECTOR_CASES = [
    ("Current time: 2026-11-22T10:42:13Z.", "timestamp", "2026-11-22T10:42:13Z"),
    ("Now: 2026-11-22 10:42 UTC", "timestamp", "2026-11-22 10:42 UTC"),
    ("Today is 2026-11-22.", "date", "2026-11-22"),
    ("Today is November 22, 2026.", "date", "November 22, 2026"),
    ("Today is 22 Nov 2026", "date", "22 Nov 2026"),
    ("Date: 11/22/2026", "date", "11/22/2026"),
    ("It is 10:42 now", "time", "10:42"),
    ("Meeting at 3pm", "time", "3pm"),
    ("It is Sunday, the best day", "weekday", "Sunday"),
    ("Event 123e4567-e89b-12d3-a456-426614174000 done", "uuid", "123e4567-e89b-12d3-a456-426614174000"),
    # A uuid named as a trace id is labelled by its name: the span starts at "trace" and the earliest start wins.
    ("trace 123e4567-e89b-12d3-a456-426614174000 done", "request_id", "123e4567-e89b-12d3-a456-426614174000"),
    ("commit 9fceb02d0ae598e95dc970b74767f19372d61af8", "hex_id", "9fceb02d0ae598e95dc970b74767f19372d61af8"),
    ("epoch 1763805733 s", "unix_time", "1763805733"),
    ("Request ID: req_8f3k2m9x", "request_id", "Request ID: req_8f3k2m9x"),
    ("See ticket #48213 please", "reference", "#48213"),
    ("Customer ID: C-99812", "reference", "C-99812"),
    ("Escalate JIRA-4821 now", "ticket_ref", "JIRA-4821"),
    ("This is turn 3 of 10.", "counter", "turn 3 of 10"),
]

POLICY = "Policy: refunds are accepted within 30 days of purchase; shipping is free over $50. " * 60


def plan_body(dialect: str, body: dict, target: Target, state: PlannerState, *, now: float, route: str = "r",
              mode: str = "rewrite", model: str | None = None, caller: str = "keep", rule: Rule = NO_RULE
              ) -> tuple[dict, Plan]:
    module = DIALECTS[dialect]
    conv = module.parse_request(json.dumps(body), model=model) if dialect == "gemini" else module.parse_request(json.dumps(body))
    result = plan(conv, target, state, mode, route=route, now=now, caller_checkpoints=caller, rule=rule)
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
