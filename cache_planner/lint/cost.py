"""Money each rule loses on a trace, estimated with the provider simulator.

For a rule the planner can fix, the trace is replayed twice: as recorded, and with that rule's fix
applied to the records it flagged (the planner's own rewrite for it). The difference is what the rule
costs. Conversation rewrites come straight from the simulated usage (`lint_simulation`); rules whose
requests the provider rejects cost no tokens and are reported as rejected. Fixes of different rules
can overlap (a record flagged twice), so per-rule losses are not additive.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

from prefixgate.cache_planner.plan import plan
from prefixgate.cache_planner.rewrite import (
    SYSTEM_ROLES,
    documents_first,
    move_volatile_units,
    stable_tool_forms,
)
from prefixgate.cache_planner.stability import PlannerState, RouteState
from prefixgate.cache_planner.target import Target
from prefixgate.dialects import request_dialect
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation
from prefixgate.providers.rules import Catalog
from prefixgate.providers.trace import TraceRecord
from prefixgate.simulation.replay import ReplayState, passthrough, replay

if TYPE_CHECKING:
    from prefixgate.cache_planner.lint.inputs import Request
    from prefixgate.cache_planner.lint.rules import Hit, Rule

# A fix edits one parsed record in place, given the route's state and the finding's data.
Fix = Callable[[Conversation, TraceRecord, RouteState, PlannerState, dict], None]


def _move_volatile(conv: Conversation, record: TraceRecord, route: RouteState, state: PlannerState, data: dict) -> None:
    move_volatile_units(conv, route, [])


def _stable_tools(conv: Conversation, record: TraceRecord, route: RouteState, state: PlannerState, data: dict) -> None:
    stable_tool_forms(conv, route, [])


def _documents_first(conv: Conversation, record: TraceRecord, route: RouteState, state: PlannerState, data: dict) -> None:
    documents_first(conv, [])


def _first_whitespace(conv: Conversation, record: TraceRecord, route: RouteState, state: PlannerState, data: dict) -> None:
    blocks = [b for s in conv.segments if s.role in SYSTEM_ROLES for b in s.blocks if b.text]
    if len(blocks) == 1:
        blocks[0].set_text(data["first"])


# Fixes that learn from every record (the first-seen tool form, the first system prompt), not only
# from the flagged ones.
LEARNING = ("PG007",)
FIXES: dict[str, Fix] = {
    "PG001": _move_volatile, "PG005": _move_volatile, "PG007": _stable_tools, "PG008": _first_whitespace,
    "PG011": _documents_first,
}


def trace_losses(requests: list[Request], hits: list[tuple[Rule, Hit]], catalog: Catalog
                 ) -> dict[str, dict[str, Decimal | None]]:
    """Trace file -> rule id -> dollars lost (None where the provider rejects the flagged requests)."""
    traces: dict[str, list[Request]] = {}
    for req in requests:
        if req.record is not None and req.source.path.suffix == ".jsonl":
            traces.setdefault(req.source.display, []).append(req)
    out: dict[str, dict[str, Decimal | None]] = {}
    for name, trace in traces.items():
        records = sorted((r.record for r in trace), key=lambda r: r.t)  # type: ignore[union-attr]
        flagged: dict[str, dict[int, dict]] = {}
        rules: dict[str, Rule] = {}
        members = {id(r) for r in trace}
        for rule, hit in hits:
            if id(hit.subject) in members and rule.cost:
                flagged.setdefault(rule.id, {})[hit.subject.record.line] = hit.data  # type: ignore[union-attr]
                rules[rule.id] = rule
        if not flagged:
            continue
        # Requests with no checkpoint at all (PG012) cache nothing on Anthropic whatever their shape, so
        # every other rule is priced with the planner's checkpoints on those requests: its loss is what
        # its fix saves once caching is on. PG012's own loss is what turning caching on saves.
        unmarked = set(flagged.get("PG012", {}))
        recorded = replay(records, passthrough, catalog=catalog).total.cost.total
        baseline = _cost(records, "", {}, unmarked, catalog) if unmarked else recorded
        losses: dict[str, Decimal | None] = {}
        for rule_id in sorted(flagged):
            rule = rules[rule_id]
            if rule.cost == "rejected":
                losses[rule_id] = None
            elif rule.cost == "simulated":
                losses[rule_id] = sum((Decimal(d.get("loss", "0")) for d in flagged[rule_id].values()), Decimal(0))
            elif rule_id == "PG012":
                losses[rule_id] = max(recorded - baseline, Decimal(0))
            else:
                losses[rule_id] = max(baseline - _cost(records, rule_id, flagged[rule_id], unmarked, catalog), Decimal(0))
        out[name] = losses
    return out


def _cost(records: list[TraceRecord], rule_id: str, flagged: dict[int, dict], unmarked: set[int],
          catalog: Catalog) -> Decimal:
    return replay(records, _fixing(rule_id, flagged, unmarked), catalog=catalog).total.cost.total


def _fixing(rule_id: str, flagged: dict[int, dict], unmarked: set[int]) -> Callable[[TraceRecord, ReplayState], dict]:
    """A replay strategy that sends flagged records with the rule's fix (`rule_id` "" for none) and the
    `unmarked` ones with the planner's checkpoints; the rest as recorded."""
    routes: dict[tuple[str, str], tuple[RouteState, PlannerState]] = {}

    def strategy(record: TraceRecord, state: ReplayState) -> dict:
        fix = bool(rule_id) and (record.line in flagged or rule_id in LEARNING)
        if not fix and record.line not in unmarked:
            return record.body
        dialect = request_dialect(record.provider, record.body)
        try:
            conv = dialect.parse_request(record.body, model=record.model)
        except RequestError:
            return record.body
        route, planner_state = routes.setdefault((record.tenant, record.route), (RouteState(), PlannerState()))
        if fix:
            FIXES[rule_id](conv, record, route, planner_state, flagged.get(record.line, {}))
        if record.line in unmarked:
            conv = plan(conv, Target(record.provider, record.model), planner_state, "checkpoints",  # type: ignore[arg-type]
                        route=record.route, now=record.t, catalog=state.simulator.catalog).conversation
        return dialect.encode_request(conv)

    return strategy
