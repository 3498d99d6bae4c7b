"""Planning a recorded trace, request by request, learning as the gateway would.

Trace records are JSON objects: `{"t", "provider", "model", "route", "tenant", "output_tokens",
"body"}` (the format `prefixgate replay` reads). `plan_record` is also the `planner` strategy of
`prefixgate replay`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from prefixgate.cache_planner.plan import Mode, plan
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.cache_planner.target import PROVIDERS, Target

from prefixgate.dialects import DIALECTS
from prefixgate.errors import RequestError

PROVIDER_DIALECT = {"anthropic": "anthropic", "openai": "openai", "gemini": "gemini", "local": "openai"}


class TraceError(ValueError):
    """A trace line that is not a usable record; the message names the line and the field."""


def read_trace(lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"line {number}: not valid JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise TraceError(f"line {number}: a record must be a JSON object")
        for key, kind in (("provider", str), ("model", str), ("body", dict)):
            if not isinstance(record.get(key), kind):
                raise TraceError(f"line {number}: field {key!r} is missing or not a {kind.__name__}")
        if record["provider"] not in PROVIDERS:
            raise TraceError(f"line {number}: provider must be one of {', '.join(PROVIDERS)}, got {record['provider']!r}")
        if not isinstance(record.get("t", 0), (int, float)):
            raise TraceError(f"line {number}: field 't' must be a number of seconds")
        yield number, record


def plan_record(record: dict, state: PlannerState, mode: Mode = "rewrite") -> tuple[dict[str, Any], list[str]]:
    """The planned native body for one trace record, and the plan's explanation."""
    provider, model = record["provider"], record["model"]
    dialect = DIALECTS[PROVIDER_DIALECT[provider]]
    try:
        conv = dialect.parse_request(record["body"], model=model) if provider == "gemini" else dialect.parse_request(record["body"])
    except RequestError as e:
        return record["body"], [f"passthrough: the body is not a valid {provider} request ({e.message})"]
    route = f"{record.get('tenant', '')}/{record['route']}" if record.get("route") else None
    result = plan(conv, Target(provider, model), state, mode, route=route, now=float(record.get("t", 0)))
    return dialect.encode_request(result.conversation), result.explanation


def plan_trace(lines: Iterable[str], mode: Mode = "rewrite") -> Iterator[dict]:
    state = PlannerState()
    for _, record in read_trace(lines):
        body, explanation = plan_record(record, state, mode)
        yield {**record, "body": body, "plan": explanation}
