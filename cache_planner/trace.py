"""Planning a recorded trace (the format of `prefixgate.providers.trace`) request by request,
learning as the gateway would. `plan_record` is also the `planner` strategy of `prefixgate replay`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prefixgate.cache_planner.caller_markers import CallerCheckpoints
from prefixgate.cache_planner.keepalive import reply_content
from prefixgate.cache_planner.plan import Mode, Plan, plan
from prefixgate.cache_planner.refresh_plan import RefreshPlanner
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.cache_planner.target import Target
from prefixgate.dialects import DIALECTS, request_dialect
from prefixgate.errors import RequestError
from prefixgate.providers.trace import TraceRecord, record_json
from prefixgate.simulation.replay import ReplayState


def plan_record(record: TraceRecord, state: PlannerState, mode: Mode = "rewrite",
                caller: CallerCheckpoints = "keep") -> tuple[dict[str, Any], list[str]]:
    """The planned native body for one trace record, and the plan's explanation."""
    result = _plan(record, state, mode, caller)
    if isinstance(result, list):
        return record.body, result
    return DIALECTS[result.conversation.dialect].encode_request(result.conversation), result.explanation


def _plan(record: TraceRecord, state: PlannerState, mode: Mode, caller: CallerCheckpoints,
          keepalive: bool = False) -> Plan | list[str]:
    if record.endpoint != "generate":
        return [f"passthrough: {record.endpoint} is not a generate request"]
    dialect = request_dialect(record.provider, record.body)
    try:
        conv = dialect.parse_request(record.body, model=record.model)
    except RequestError as e:
        return [f"passthrough: the body is not a valid {record.provider} request ({e.message})"]
    return plan(conv, Target(record.provider, record.model), state, mode,  # type: ignore[arg-type]
                route=f"{record.tenant}/{record.route}", now=record.t, caller_checkpoints=caller, keepalive=keepalive,
                upgrade=keepalive and reply_content(record.provider, record.response) is not None)


def plan_trace(records: Iterable[TraceRecord], mode: Mode = "rewrite",
               caller: CallerCheckpoints = "keep", keepalive: bool = False) -> Iterator[dict]:
    """Trace lines with `body` planned and a `plan` field explaining each decision. With no provider
    to run it, a Gemini explicit cache the planner wants is reported as `cache_create`. With `keepalive`,
    the refreshes the planner would send while sessions idle are added as records of their own
    (`refresh_plan`), in time order; every original request is kept, in its order."""
    state = PlannerState()
    # An upgrade's entry is held by the session's later requests, as the planner's own hour-long marks are.
    refreshes = RefreshPlanner(held=lambda route, key, ttl, expires: state.route(route).held.note(key, ttl, expires)) \
        if keepalive else None
    for record in records:
        if refreshes is not None:
            yield from refreshes.due(record.t)
        result = _plan(record, state, mode, caller, keepalive)
        if isinstance(result, list):
            yield {**record_json(record), "plan": result}
            continue
        body = DIALECTS[result.conversation.dialect].encode_request(result.conversation)
        out = {**record_json(record), "body": body, "plan": result.explanation}
        if result.cache_create is not None:
            out["cache_create"] = result.cache_create
        if refreshes is not None:
            refreshes.after(record, result.conversation, body)
        yield out
    if refreshes is not None:
        yield from refreshes.due(float("inf"))


def replay_strategy(mode: Mode = "rewrite", caller: CallerCheckpoints = "keep") -> Callable[[TraceRecord, ReplayState], dict]:
    """A `prefixgate replay` strategy with its own planner state, fresh for each replay; it creates the
    Gemini explicit caches the planner asks for, billed like any other create."""
    state = PlannerState()

    def strategy(record: TraceRecord, replay: ReplayState) -> dict:
        result = _plan(record, state, mode, caller)
        if isinstance(result, list):
            return record.body
        if result.cache_create is not None:
            try:
                content = replay.create_cached_content(record, result.cache_create)
                result.adopt_cached_content(content.name, content.expire_time)
            except RequestError:
                pass  # the provider refused the cache: the request goes out as planned without it
        return DIALECTS[result.conversation.dialect].encode_request(result.conversation)

    return strategy
