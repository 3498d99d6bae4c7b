"""Planning a recorded trace (the format of `prefixgate.providers.trace`) request by request,
learning as the gateway would. `plan_record` is also the `planner` strategy of `prefixgate replay`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prefixgate.cache_planner.plan import Mode, plan
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.cache_planner.target import Target

from prefixgate.dialects import DIALECTS
from prefixgate.errors import RequestError
from prefixgate.providers.trace import TraceRecord, record_json


def plan_record(record: TraceRecord, state: PlannerState, mode: Mode = "rewrite") -> tuple[dict[str, Any], list[str]]:
    """The planned native body for one trace record, and the plan's explanation."""
    if record.endpoint != "generate":
        return record.body, [f"passthrough: {record.endpoint} is not a generate request"]
    dialect = DIALECTS[record.provider]
    try:
        conv = (dialect.parse_request(record.body, model=record.model) if record.provider == "gemini"
                else dialect.parse_request(record.body))
    except RequestError as e:
        return record.body, [f"passthrough: the body is not a valid {record.provider} request ({e.message})"]
    result = plan(conv, Target(record.provider, record.model), state, mode,  # type: ignore[arg-type]
                  route=f"{record.tenant}/{record.route}", now=record.t)
    return dialect.encode_request(result.conversation), result.explanation


def plan_trace(records: Iterable[TraceRecord], mode: Mode = "rewrite") -> Iterator[dict]:
    """Trace lines with `body` planned and a `plan` field explaining each decision."""
    state = PlannerState()
    for record in records:
        body, explanation = plan_record(record, state, mode)
        yield {**record_json(record), "body": body, "plan": explanation}


def replay_strategy(mode: Mode = "rewrite") -> Callable[[TraceRecord, object], dict]:
    """A `prefixgate replay` strategy with its own planner state, fresh for each replay."""
    state = PlannerState()

    def strategy(record: TraceRecord, _replay_state: object) -> dict:
        return plan_record(record, state, mode)[0]

    return strategy
