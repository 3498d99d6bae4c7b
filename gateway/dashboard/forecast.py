"""Spend forecasts per key and per route, against their budgets.

Method (stated on the page): a straight-line run rate. Spend so far in the budget's current period, divided by
the time elapsed in it, times the period's length: what the period ends at if spending goes on as it has.
Periods are the windows the budget limiter counts in (policies/periods.py: a "month" is the calendar month, a
"day" the calendar day, in the key's time zone, else the policy's `timezone`). A key is forecast over its own
budget's period, routes over the gateway budget's (`budget:` in the policy; a month without one). The hard line is the budget's `usd` (a key's
is enforced: requests are refused with 429 past it), the soft line `usd x warn_at` (an alert only).
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal

from prefixgate.gateway.dashboard.figures import breakdown
from prefixgate.policies import Policy
from prefixgate.policies.periods import window

METHOD = ("straight-line run rate: spend so far in the budget period / time elapsed in it x the period's length "
          "(periods are the budget limiter's windows: a day and a month are the calendar's)")


def period_window(period: str, now: float, zone: str = "UTC") -> tuple[float, float]:
    """[start, end) of the window `now` falls in (as the limiter counts); "total": [0, inf)."""
    current = window(period, now, zone)
    return current.start, current.end


def run_rate(spent: Decimal, start: float, end: float, now: float) -> Decimal | None:
    """Spend at the period's end at the rate so far; None for a period with no end or nothing elapsed."""
    elapsed = now - start
    if end == float("inf") or elapsed <= 0:
        return None
    return spent * Decimal(end - start) / Decimal(elapsed)


def _row(name: str, period: str, spent: Decimal, now: float, usd: float | None, warn_at: float | None,
         zone: str) -> dict:
    start, end = period_window(period, now, zone)
    forecast = run_rate(spent, start, end, now)
    return {"name": name, "period": period, "period_start": start, "period_end": None if end == float("inf") else end,
            "spent_usd": str(spent), "forecast_usd": None if forecast is None else str(forecast.quantize(Decimal("1e-6"))),
            "hard_usd": usd, "soft_usd": usd * warn_at if usd is not None and warn_at is not None else None,
            "over_soft": usd is not None and warn_at is not None and spent >= Decimal(str(usd * warn_at)),
            "forecast_over": forecast is not None and usd is not None and forecast > Decimal(str(usd))}


def _spend(view: sqlite3.Connection, since: float, until: float, by: str) -> dict[str, Decimal]:
    return {r["name"]: Decimal(r["spend_usd"]) for r in breakdown(view, since, until, by)}


def forecasts(view: sqlite3.Connection, policy: Policy, now: float) -> dict:
    """{method, gateway, keys, routes}: each row spent, forecast, soft and hard lines (`view` must cover each
    budget period's start up to `now`)."""
    gateway_budget = policy.alerting.budget
    period = gateway_budget.period if gateway_budget else "month"
    start, _ = period_window(period, now, policy.timezone)
    by_route = _spend(view, start, now, "route")
    total = sum(by_route.values(), Decimal(0))
    gateway = _row("gateway", period, total, now, gateway_budget.usd if gateway_budget else None,
                   gateway_budget.warn_at if gateway_budget else None, policy.timezone)
    routes = [_row(name, period, spent, now, None, None, policy.timezone) for name, spent in sorted(by_route.items())]
    keys = []
    spend_by_period: dict[tuple[str, str], dict[str, Decimal]] = {}
    for key in policy.keys:
        kp = (key.budget.period, key.budget.timezone) if key.budget else ("month", policy.timezone)
        if kp not in spend_by_period:
            spend_by_period[kp] = _spend(view, period_window(kp[0], now, kp[1])[0], now, "key")
        spent = spend_by_period[kp].get(key.name, Decimal(0))
        keys.append(_row(key.name, kp[0], spent, now, key.budget.usd if key.budget else None,
                         key.budget.warn_at if key.budget else None, kp[1]))
    return {"method": METHOD, "now": now, "gateway": gateway, "keys": keys, "routes": routes}


def earliest_start(policy: Policy, now: float) -> float:
    """How far back a view must reach for `forecasts`."""
    periods = {(k.budget.period, k.budget.timezone) for k in policy.keys if k.budget} | {
        (policy.alerting.budget.period if policy.alerting.budget else "month", policy.timezone), ("month", policy.timezone)}
    return min(period_window(p, now, zone)[0] for p, zone in periods)
