"""The dashboard's JSON API under `/api`: what the page reads, and what scripts can read too.

Every endpoint takes a time window: `range` (`15m`, `1h`, `24h`, `7d`: the span ending at `until`,
default now), read in whole minutes. Figures come from the ledger's rollups; the misses view and the
request list read the window's latest 1000 records. A tenant's reader reads that tenant's alone: its own
rollups (a breakdown by tenant is its own row) and its latest 1000 records; alerts, forecasts and alert rules
span every tenant and stay the operator's. The schema is served at `/api/openapi.json`.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.openapi.utils import get_openapi

from prefixgate import __version__
from prefixgate.gateway.dashboard import schema
from prefixgate.gateway.dashboard.alert_rules import RULES
from prefixgate.gateway.dashboard.alerts import AlertRule, alert_cuts, alerts_now, route_alerts
from prefixgate.gateway.dashboard.auth import reader_tenant, require_reader
from prefixgate.gateway.dashboard.figures import GROUPINGS, breakdown, timeseries, totals
from prefixgate.gateway.dashboard.forecast import earliest_start, forecasts
from prefixgate.gateway.dashboard.misses import is_miss, misses_by_route
from prefixgate.gateway.dashboard.provider_reasons import why
from prefixgate.gateway.dashboard.retiring import retiring_routes
from prefixgate.gateway.dashboard.rewrites import rewrites_by_route
from prefixgate.gateway.dashboard.source import MISS_SAMPLE, UNAVAILABLE, LedgerSource
from prefixgate.ledger import LedgerRecord

_SPAN = re.compile(r"^(\d+)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SPAN_S = 31 * 86400
MAX_POINTS = 1000
MAX_UNTIL = 1e11            # unix seconds (the year 5138): bucket arithmetic stays within 64-bit integers
# Bucket sizes the page's charts use: the smallest giving at most TARGET_POINTS points.
STEPS_S = (5, 10, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86400)
TARGET_POINTS = 120
# How far back a window's first misses look for the previous request of their route.
PREVIOUS_LOOKBACK_S = 3600
BREAKDOWNS = ("route", "model", "key", "target")

router = APIRouter(prefix="/api", tags=["dashboard"], dependencies=[Depends(require_reader)])
RangeQuery = Annotated[str, Query(alias="range", pattern=_SPAN.pattern, description="window length: 15m, 1h, 24h, 7d")]
UntilQuery = Annotated[float | None, Query(ge=0, le=MAX_UNTIL, description="window end, unix seconds (default now)")]


@contextmanager
def unavailable_as_503(source: LedgerSource) -> Iterator[None]:
    """A shared store that cannot be read (Postgres or Redis down) is a 503 saying so, not a 500."""
    try:
        yield
    except UNAVAILABLE as e:
        raise HTTPException(503, f"the {source.name} ledger cannot be read right now ({type(e).__name__}); "
                                 "requests are still recorded and copied when it is back") from None


class Window:
    """A validated time window plus the ledger it reads (for a tenant's reader, that tenant's records only)."""

    def __init__(self, request: Request, span: str, until: float | None) -> None:
        self.tenant = reader_tenant(request)
        m = _SPAN.match(span)
        if m is None:
            raise HTTPException(422, f"range must be a count and a unit (s, m, h or d): 15m, 1h, 7d; got {span!r}")
        seconds = int(m.group(1)) * _UNIT_S[m.group(2)]
        if not 0 < seconds <= MAX_SPAN_S:
            raise HTTPException(422, f"range must be between 1s and {MAX_SPAN_S // 86400}d, got {span!r}")
        self.until = time.time() if until is None else until
        self.since = self.until - seconds
        self.source: LedgerSource = request.app.state.dashboard_source
        self.catalog = request.app.state.proxy.catalog     # prices with the operator's overrides

    def latest(self, lookback_s: float = 0.0, route: str | None = None) -> list[LedgerRecord]:
        """The window's latest MISS_SAMPLE records (from `lookback_s` before it: their predecessors)."""
        with unavailable_as_503(self.source):
            return self.source.records(self.since - lookback_s, self.until, latest=MISS_SAMPLE, route=route, tenant=self.tenant)

    def view(self, since: float | None = None, until: float | None = None,
             cuts: Sequence[float] = ()) -> AbstractContextManager[sqlite3.Connection]:
        """The rollups over the window (or [since, until), split at `cuts`): a tenant reader's, that tenant's own."""
        with unavailable_as_503(self.source):
            return self.source.view(self.since if since is None else since, self.until if until is None else until,
                                    tenant=self.tenant, cuts=cuts)

    def describe(self) -> schema.Window:
        return schema.Window(since=self.since, until=self.until, source=self.source.name, tenant=self.tenant)

    def step(self, asked: float | None) -> float:
        span = self.until - self.since
        if asked is not None:
            if span / asked > MAX_POINTS:
                raise HTTPException(422, f"step {asked}s gives more than {MAX_POINTS} points over {span:.0f}s")
            return asked
        return next((s for s in STEPS_S if span / s <= TARGET_POINTS), STEPS_S[-1])


def window(request: Request, span: RangeQuery = "1h", until: UntilQuery = None) -> Window:
    return Window(request, span, until)


WindowDep = Annotated[Window, Depends(window)]


@router.get("/summary", response_model=schema.Summary, summary="Totals over a window")
def summary(w: WindowDep) -> dict:
    with w.view() as view:
        return {"window": w.describe(), "totals": totals(view, w.since, w.until)}


@router.get("/timeseries", response_model=schema.Timeseries, summary="Spend, savings and hit rate per time bucket")
def series(w: WindowDep, step: Annotated[float | None, Query(ge=1, le=MAX_SPAN_S, description="bucket seconds (default: automatic)")] = None) -> dict:
    step_s = w.step(step)
    with w.view() as view:
        return {"window": w.describe(), "step_s": step_s, "points": timeseries(view, w.since, w.until, step_s)}


@router.get("/breakdown", response_model=schema.Breakdown, summary="The totals per route, model, key, target, provider or tenant")
def by_group(w: WindowDep, by: Annotated[str, Query(pattern=f"^({'|'.join(GROUPINGS)})$")] = "route") -> dict:
    with w.view() as view:
        return {"window": w.describe(), "by": by, "rows": breakdown(view, w.since, w.until, by)}


@router.get("/misses", response_model=schema.Misses, summary="Routes losing the most money to cache misses, and why")
def misses(w: WindowDep, limit: Annotated[int, Query(ge=1, le=200)] = 20) -> dict:
    return {"window": w.describe(), "routes": misses_by_route(w.latest(PREVIOUS_LOOKBACK_S), w.since, limit, w.catalog)}


@router.get("/rewrites", response_model=schema.Rewrites, summary="What the static-first rewrite moved and saved, per route")
def rewrites(w: WindowDep) -> dict:
    return {"window": w.describe(), "routes": rewrites_by_route(w.latest(), w.since)}


def _rule(window_s: float, baseline_s: float, drop: float) -> AlertRule:
    try:
        return AlertRule(window_s=window_s, baseline_s=baseline_s, drop=drop)
    except ValueError as e:
        raise HTTPException(422, str(e)) from None


@router.get("/alerts", response_model=schema.Alerts, summary="Per-route hit-rate drops against each route's own baseline")
def alerts(request: Request, window_s: Annotated[float, Query(gt=0, le=86400)] = 300,
           baseline_s: Annotated[float, Query(gt=0, le=7 * 86400)] = 3600,
           drop: Annotated[float, Query(gt=0, le=1)] = 0.5) -> dict:
    rule = _rule(window_s, baseline_s, drop)
    if reader_tenant(request) is not None:
        raise HTTPException(403, "alerts are per route across every tenant: not a tenant reader's to read")
    with unavailable_as_503(request.app.state.dashboard_source):
        now, found = alerts_now(request.app.state.dashboard_source, rule)
    return {"now": now, "rule": asdict(rule), "alerts": [a.to_dict() for a in found]}


@router.get("/overview", response_model=schema.Overview, summary="Everything the dashboard page shows, in one call")
def overview(request: Request, w: WindowDep) -> dict:
    rule = request.app.state.dashboard_alert_rule
    now = time.time()
    step_s = w.step(None)
    # A tenant's reader gets no alerts (per route across every tenant), so its view needs no baseline's hours.
    alerting = w.tenant is None
    with w.view(min(w.since, now - rule.window_s - rule.baseline_s) if alerting else None,
                max(w.until, now) if alerting else None,
                cuts=(w.since, w.until, *alert_cuts(now, rule)) if alerting else ()) as view:
        return {
            "window": w.describe(), "totals": totals(view, w.since, w.until), "step_s": step_s,
            "points": timeseries(view, w.since, w.until, step_s),
            "breakdowns": {by: breakdown(view, w.since, w.until, by) for by in BREAKDOWNS},
            "misses": misses_by_route(w.latest(PREVIOUS_LOOKBACK_S), w.since, catalog=w.catalog),
            "rewrites": rewrites_by_route(w.latest(), w.since),
            "alerts": [a.to_dict() for a in route_alerts(view, now, rule)] if alerting else [],
            "retiring": retiring_routes(w.latest(), w.catalog),
        }


@router.get("/retiring", response_model=list[schema.RetiringRoute],
            summary="Routes sending requests to models retiring within 30 days (or retired)")
def retiring(w: WindowDep) -> list[dict]:
    return retiring_routes(w.latest(), w.catalog)


@router.get("/forecast", response_model=schema.Forecasts,
            summary="Spend forecast per key and route to their budget period's end, with soft and hard budget lines")
def forecast(request: Request) -> dict:
    if reader_tenant(request) is not None:
        # Every key's and route's spend, and the gateway's total: other tenants' figures, and sums of them.
        raise HTTPException(403, "forecasts are per key and route across every tenant: not a tenant reader's to read")
    policy = request.app.state.alerter.policy
    now = time.time()
    with unavailable_as_503(request.app.state.dashboard_source), \
            request.app.state.dashboard_source.view(earliest_start(policy, now), now) as view:
        return forecasts(view, policy, now)


@router.get("/alerts/rules", response_model=schema.AlertRules, summary="The pushed alerts' rules, destinations and last firings")
def alert_rules(request: Request) -> dict:
    if reader_tenant(request) is not None:
        # The last firings name their subjects (other tenants' keys and routes), and the destinations are the operator's.
        raise HTTPException(403, "alert rules and firings span every tenant: not a tenant reader's to read")
    alerter = request.app.state.alerter
    last: dict[str, dict] = {}
    for key, ts in dict(alerter.last_sent).items():    # a copy: the alerter's thread adds firings meanwhile
        rule, subject = key.split(":", 1)
        if ts > last.get(rule, {}).get("ts", -1):
            last[rule] = {"subject": subject, "ts": ts}
    return {"destinations": [{"destination": d.shown, "format": d.format} for d in alerter.deliveries.destinations],
            "settings": asdict(alerter.settings),
            "rules": [{"rule": rule, "fires_when": what, "last_fired": last.get(rule)} for rule, what in RULES.items()]}


@router.get("/requests", response_model=schema.Requests, summary="The latest ledger records, newest first")
def requests_(w: WindowDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
              route: Annotated[str | None, Query(description="only this route")] = None,
              misses_only: Annotated[bool, Query(description="only requests that read nothing from cache")] = False) -> dict:
    rows = [r for r in reversed(w.latest(route=route)) if not misses_only or is_miss(r)]
    return {"window": w.describe(), "records": [asdict(r) for r in rows[:limit]]}


@router.get("/requests/{request_id}", response_model=schema.RequestDetail, summary="One ledger record, with its why")
def request_detail(w: WindowDep, request_id: Annotated[str, Path(max_length=64)]) -> dict:
    found = next((r for r in w.latest() if r.id == request_id), None)
    if found is None:
        raise HTTPException(404, f"no request {request_id!r} among the window's latest records")
    return {**asdict(found), "why": why(found)}


@router.get("/openapi.json", include_in_schema=False)
def openapi() -> dict:
    return get_openapi(title="prefixgate dashboard API", version=__version__,
                       description=__doc__, routes=router.routes)
