"""Replay a trace through the cache simulator and add up tokens, cost, cost without caching and savings.

A strategy turns each recorded request into the body actually sent: `passthrough` sends it as recorded,
`planner` asks the cache planner to rewrite it first. Requests the provider would reject are counted as
errors (with their line and message) instead of stopping the replay.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from prefixgate.cost import ZERO, Cost
from prefixgate.errors import RequestError
from prefixgate.providers.cached_contents import CachedContent
from prefixgate.providers.pricing import cost_of, storage_cost
from prefixgate.providers.rules import Catalog
from prefixgate.providers.trace import TraceRecord
from prefixgate.simulation.simulator import Simulator
from prefixgate.usage import Usage

MAX_ERRORS_KEPT = 20


@dataclass
class ReplayState:
    """What a strategy may consult: the simulator (its caches as they stand) and the records so far.
    A strategy that manages explicit caches creates them through `create_cached_content`, which bills
    the creation and the storage to the record's route like a recorded create."""

    simulator: Simulator
    report: ReplayReport
    seen: int = 0
    # (tenant, cache name) -> the route that created it, for storage billing.
    created: dict[tuple[str, str], str] = field(default_factory=dict)

    def create_cached_content(self, record: TraceRecord, body: dict) -> CachedContent:
        sim = self.simulator
        content = sim.create_cached_content(body, now=record.t, tenant=record.tenant)
        self.created[(record.tenant, content.name)] = record.route
        # Creating the cache bills its tokens at the input rate; without caching it would not exist.
        usage = Usage(cache_writes={"explicit": content.tokens})
        cost = replace(cost_of("gemini", content.model, usage, catalog=sim.catalog), without_cache=ZERO)
        self.report.routes.setdefault(record.route, RouteTotals()).add(usage, cost)
        return content


Strategy = Callable[[TraceRecord, ReplayState], dict]


class ReplayError(Exception):
    """The replay cannot run at all (as opposed to one request failing)."""


def passthrough(record: TraceRecord, state: ReplayState) -> dict:
    return record.body


def planner() -> Strategy:
    # Imported here: the planner builds on this package, not the other way round.
    from prefixgate.cache_planner.trace import replay_strategy

    return replay_strategy()


STRATEGIES: dict[str, Callable[[], Strategy]] = {"passthrough": lambda: passthrough, "planner": planner}


@dataclass
class RouteTotals:
    requests: int = 0
    errors: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: Cost = field(default_factory=Cost)
    keepalives: int = 0       # of `requests`, the keep-alive refreshes

    def add(self, usage: Usage, cost: Cost, keepalive: bool = False) -> None:
        self.requests += 1
        self.keepalives += keepalive
        self.usage = self.usage + usage
        self.cost = self.cost + cost

    def to_dict(self) -> dict[str, Any]:
        u, c = self.usage, self.cost
        return {
            "requests": self.requests,
            "keepalive_requests": self.keepalives,
            "errors": self.errors,
            **u.token_counts(),
            "cache_write_tokens_by_ttl": dict(sorted(u.cache_writes.items())),
            "cost": money(c.total),
            "cost_without_cache": money(c.without_cache),
            "savings": money(c.savings),
            "storage_cost": money(c.storage),
        }


@dataclass
class ReplayReport:
    strategy: str
    routes: dict[str, RouteTotals] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def total(self) -> RouteTotals:
        out = RouteTotals()
        for r in self.routes.values():
            out.requests += r.requests
            out.keepalives += r.keepalives
            out.errors += r.errors
            out.usage = out.usage + r.usage
            out.cost = out.cost + r.cost
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "routes": {name: r.to_dict() for name, r in sorted(self.routes.items())},
            "total": self.total.to_dict(),
            "errors": self.errors,
        }


def replay(
    records: Iterable[TraceRecord],
    strategy: Strategy = passthrough,
    *,
    strategy_name: str = "passthrough",
    catalog: Catalog | None = None,
    progress: Callable[[], None] | None = None,
) -> ReplayReport:
    """Replay `records` (in time order) through a fresh simulator."""
    sim = Simulator(catalog)
    report = ReplayReport(strategy_name)
    state = ReplayState(sim, report)
    for record in records:
        totals = report.routes.setdefault(record.route, RouteTotals())
        try:
            _replay_one(record, strategy, state, totals)
        except RequestError as e:
            totals.errors += 1
            if len(report.errors) < MAX_ERRORS_KEPT:
                report.errors.append(f"line {record.line}: {e.status} {e.message}")
        state.seen += 1
        if progress is not None:
            progress()
    _bill_storage(sim, report, state.created)
    return report


def _replay_one(record: TraceRecord, strategy: Strategy, state: ReplayState, totals: RouteTotals) -> None:
    sim = state.simulator
    if record.endpoint == "generate":
        body = strategy(record, state)
        result = sim.respond(record.provider, body, now=record.t, tenant=record.tenant,
                             model=record.model, output_tokens=record.output_tokens)
        cost = cost_of(record.provider, result.model.id, result.usage, catalog=sim.catalog)
        # A keep-alive refresh exists only because of caching: without it, it would cost nothing.
        totals.add(result.usage, replace(cost, without_cache=ZERO) if record.keepalive else cost, record.keepalive)
    elif record.endpoint == "cachedContents.create":
        body = dict(record.body)
        body.setdefault("model", record.model)
        if record.name is not None:
            body.setdefault("name", record.name)
        state.create_cached_content(record, body)
    elif record.endpoint == "cachedContents.update":
        sim.update_cached_content(record.name or "", record.body, now=record.t, tenant=record.tenant)
    else:
        sim.delete_cached_content(record.name or "", now=record.t, tenant=record.tenant)


def _bill_storage(sim: Simulator, report: ReplayReport, created: dict[tuple[str, str], str]) -> None:
    """Storage for every cache, from creation to deletion or expiry (a cache outliving the trace still bills)."""
    for tenant, contents in sim.cached_contents.by_tenant().items():
        for content in contents:
            route = created.get((tenant, content.name))
            if route is None:
                continue
            cost = storage_cost("gemini", content.model, content.token_hours(), catalog=sim.catalog)
            report.routes[route].cost = report.routes[route].cost + cost


def money(value: Decimal) -> str:
    """Dollars to the micro-dollar, as a string (exact decimals in JSON)."""
    return str(value.quantize(Decimal("0.000001")))


def render_table(report: ReplayReport) -> str:
    header = ("route", "requests", "errors", "input tok", "cache read", "cache write", "cost $", "no-cache $",
              "savings $", "saved")
    rows = [_row(name, r) for name, r in sorted(report.routes.items())]
    rows.append(_row("TOTAL", report.total))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines = [_line(header, widths), _line(tuple("-" * w for w in widths), widths)]
    lines += [_line(r, widths) for r in rows[:-1]] + [_line(tuple("-" * w for w in widths), widths), _line(rows[-1], widths)]
    lines.append(f"strategy: {report.strategy}")
    if report.errors:
        lines.append(f"{report.total.errors} request(s) rejected as the provider would; first ones:")
        lines += [f"  {e}" for e in report.errors]
    return "\n".join(lines)


def _row(name: str, r: RouteTotals) -> tuple[str, ...]:
    c = r.cost
    pct = f"{c.savings / c.without_cache * 100:.1f}%" if c.without_cache else "-"
    return (name, str(r.requests), str(r.errors), f"{r.usage.input_total:,}", f"{r.usage.cache_read:,}",
            f"{r.usage.cache_write:,}", f"{c.total:.4f}", f"{c.without_cache:.4f}", f"{c.savings:.4f}", pct)


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def progress_bar(total: int) -> Any:
    """A tqdm bar on stderr for interactive runs of non-trivial traces, or for very long ones in logs."""
    from tqdm import tqdm

    interactive = sys.stderr.isatty() and total >= 200
    long_trace = total >= 20_000
    return tqdm(total=total, unit="req", file=sys.stderr, disable=not (interactive or long_trace),
                mininterval=0.2 if interactive else 15.0, leave=False)
