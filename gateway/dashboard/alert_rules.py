"""The pushed alerts' rules: each reads the ledger (rollups, or the window's latest records for the misses) at
`now` and returns the alerts that hold then. Whether one is sent is the alerter's business (cooldowns).

    hit_rate_drop        a route's hit rate fell against its own baseline (alerts.py, the dashboard's rule)
    caching_costs_more   a route's cache writes cost more than its reads saved over the window: caching that
                         loses money (writes without reads)
    ttl_expiry_share     TTL expiries are at least `ttl_expiry_share` of a route's misses
    soft_budget          a key's (or the gateway's) spend in its budget period reached usd x warn_at
    forecast_over_budget the period's spend, forecast by run rate (forecast.py), ends above the budget
    error_burst          a route's upstream errors in the last `error_window_s`: at least `error_count`, and at
                         least `error_share` of its requests
    model_retiring       a model used in the window retires within `retiring_within_days` (the catalogue's
                         `retires` date, where the rows have one)
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

from prefixgate.gateway.dashboard.alerts import AlertRule, alert_cuts, route_alerts
from prefixgate.gateway.dashboard.figures import breakdown
from prefixgate.gateway.dashboard.forecast import earliest_start, forecasts
from prefixgate.gateway.dashboard.misses import misses_by_route
from prefixgate.gateway.dashboard.source import MISS_SAMPLE, LedgerSource
from prefixgate.gateway.webhooks import Alert
from prefixgate.ledger import LedgerRecord
from prefixgate.policies import Policy
from prefixgate.policies.alerting import AlertSettings
from prefixgate.policies.kinds import catalogue_provider
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog

RULES = {
    "hit_rate_drop": "a route's cache hit rate fell to half (or less) of its trailing hour's",
    "caching_costs_more": "a route's cache writes cost more than its cache reads saved over the window",
    "ttl_expiry_share": "TTL expiries are at least ttl_expiry_share of a route's misses",
    "soft_budget": "a key's or the gateway's spend reached usd x warn_at of its budget",
    "forecast_over_budget": "the budget period's spend, forecast by run rate, ends above the budget",
    "error_burst": "a route's upstream errors reached error_count and error_share in error_window_s",
    "model_retiring": "a model in use retires within retiring_within_days (catalogue `retires` dates)",
}


def retires_on(catalog: Catalog, provider: str, model: str) -> date | None:
    """The catalogue's retirement date for a model, where its rows carry one (else None: the rule skips it)."""
    try:
        row = resolve_model(catalogue_provider(provider), model, catalog)
    except UnknownModel:    # no row, so no date
        return None
    value = getattr(row, "retires", None)
    if isinstance(value, str) and value:
        return date.fromisoformat(value)
    return value if isinstance(value, date) else None


def evaluate(source: LedgerSource, policy: Policy, catalog: Catalog, now: float) -> list[Alert]:
    s = policy.alerting.settings
    drop = AlertRule()
    since = min(now - s.window_s, now - drop.window_s - drop.baseline_s, now - s.error_window_s, earliest_start(policy, now))
    with source.view(since, now, cuts=(*alert_cuts(now, drop), now - s.window_s, now - s.error_window_s)) as view:
        out = [Alert("hit_rate_drop", a.route, f"cache hit rate on route {a.route} fell to {a.hit_rate:.0%} from "
                     f"{a.baseline_hit_rate:.0%} over its trailing baseline", now, a.to_dict())
               for a in route_alerts(view, now, drop) if a.firing]
        routes = breakdown(view, now - s.window_s, now, "route")
        out += _costs_more(routes, s, now)
        out += _errors(breakdown(view, now - s.error_window_s, now, "route"), s, now)
        out += _budgets(forecasts(view, policy, now), now)
    # The window's latest records (and the hour before: the previous request of its first misses).
    records = source.records(now - s.window_s - 3600, now, latest=MISS_SAMPLE)
    out += _ttl_expiry(records, s, catalog, now)
    out += _retiring({(r.provider, r.model) for r in records if r.ts >= now - s.window_s}, catalog, s, now)
    return out


def _costs_more(routes: list[dict], s: AlertSettings, now: float) -> list[Alert]:
    out = []
    for r in routes:
        lost = Decimal(r["savings_usd"])
        if lost < 0 and r["tokens"]["cache_write"] and r["requests"] >= s.min_requests:
            out.append(Alert("caching_costs_more", r["name"], f"caching cost ${-lost:.4f} more than no caching on route "
                             f"{r['name']} over the last {s.window_s / 60:g} min ({r['tokens']['cache_write']} tokens "
                             f"written, {r['tokens']['cache_read']} read)", now,
                             {"savings_usd": r["savings_usd"], "tokens": r["tokens"], "requests": r["requests"]}))
    return out


def _errors(routes: list[dict], s: AlertSettings, now: float) -> list[Alert]:
    out = []
    for r in routes:
        if r["errors"] >= s.error_count and r["requests"] and r["errors"] / r["requests"] >= s.error_share:
            out.append(Alert("error_burst", r["name"], f"{r['errors']} of {r['requests']} requests on route {r['name']} "
                             f"failed in the last {s.error_window_s / 60:g} min", now,
                             {"errors": r["errors"], "requests": r["requests"]}))
    return out


def _budgets(f: dict, now: float) -> list[Alert]:
    out = []
    for kind, row in [("gateway", f["gateway"])] + [("key", k) for k in f["keys"]]:
        who = "the gateway" if kind == "gateway" else f"key {row['name']}"
        details = {k: row[k] for k in ("period", "spent_usd", "forecast_usd", "soft_usd", "hard_usd")}
        if row["over_soft"]:
            out.append(Alert("soft_budget", row["name"], f"{who} has spent ${Decimal(row['spent_usd']):.2f} this "
                             f"{row['period']}, past its soft budget of ${row['soft_usd']:.2f} (hard ${row['hard_usd']:.2f})",
                             now, details))
        if row["forecast_over"]:
            out.append(Alert("forecast_over_budget", row["name"], f"{who} is on course to spend "
                             f"${Decimal(row['forecast_usd']):.2f} this {row['period']}, over its budget of "
                             f"${row['hard_usd']:.2f} (run rate so far)", now, details))
    return out


def _ttl_expiry(records: list[LedgerRecord], s: AlertSettings, catalog: Catalog, now: float) -> list[Alert]:
    out = []
    for route in misses_by_route(records, now - s.window_s, limit=1000, catalog=catalog):
        expired = sum(e["count"] for e in route["reasons"] if e["reason"] == "ttl_expired")
        if route["misses"] >= s.min_misses and expired / route["misses"] >= s.ttl_expiry_share:
            out.append(Alert("ttl_expiry_share", route["route"], f"{expired} of {route['misses']} misses on route "
                             f"{route['route']} are TTL expiries: requests arrive further apart than the cache lives",
                             now, {"expired": expired, "misses": route["misses"]}))
    return out


def _retiring(in_use: set[tuple[str, str]], catalog: Catalog, s: AlertSettings, now: float) -> list[Alert]:
    today = datetime.fromtimestamp(now, UTC).date()
    out = []
    for provider, model in sorted(in_use):
        when = retires_on(catalog, provider, model)
        if when is not None and (when - today).days <= s.retiring_within_days:
            out.append(Alert("model_retiring", model, f"model {model} ({provider}), in use on this gateway, retires on "
                             f"{when.isoformat()} ({(when - today).days} days)", now,
                             {"provider": provider, "retires": when.isoformat()}))
    return out
