"""Hit-rate drop alerts: a deploy that breaks prompt structure shows up as a route whose hit rate falls
well below its own recent past, whatever that past was (a fixed threshold misses a route that went from
90% to 40%, and nags about one that never cached). Each route's hit rate over the last `window_s` is
compared with its trailing baseline, the `baseline_s` before that (both read from rollups, in whole
minutes); a relative drop of at least `drop` fires. Exposed on the page, in the API and as Prometheus gauges computed at scrape time.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from prefixgate.gateway.dashboard.figures import route_hit_rates
from prefixgate.gateway.dashboard.source import LedgerSource

log = logging.getLogger("prefixgate.dashboard")


@dataclass(frozen=True)
class AlertRule:
    window_s: float = 300.0
    baseline_s: float = 3600.0
    drop: float = 0.5              # relative: 0.5 fires when the hit rate halves
    min_baseline: float = 0.2      # a route that never cached much cannot drop
    min_requests: int = 5          # in each of the two windows

    def __post_init__(self) -> None:
        if self.window_s <= 0 or self.baseline_s <= 0:
            raise ValueError("alert windows must be positive")
        if not 0 < self.drop <= 1 or not 0 <= self.min_baseline <= 1:
            raise ValueError("alert drop must be in (0, 1] and min_baseline in [0, 1]")
        if self.min_requests < 1:
            raise ValueError("alert min_requests must be >= 1")


@dataclass
class RouteAlert:
    route: str
    hit_rate: float | None
    baseline_hit_rate: float | None
    drop: float | None             # relative change from the baseline; positive is a drop
    requests: int
    baseline_requests: int
    firing: bool

    def to_dict(self) -> dict:
        return self.__dict__.copy()


def route_alerts(view: sqlite3.Connection, now: float, rule: AlertRule = AlertRule()) -> list[RouteAlert]:
    """Every route seen in the two windows ending at `now` (answered requests only), firing ones first."""
    start = now - rule.window_s
    current = route_hit_rates(view, start, now)
    baseline = route_hit_rates(view, start - rule.baseline_s, start)
    out = []
    for route in sorted(set(current) | set(baseline)):
        (n, rate), (base_n, base_rate) = current.get(route, (0, None)), baseline.get(route, (0, None))
        drop = (base_rate - rate) / base_rate if rate is not None and base_rate else None
        firing = (drop is not None and drop >= rule.drop and base_rate >= rule.min_baseline
                  and n >= rule.min_requests and base_n >= rule.min_requests)
        out.append(RouteAlert(route, rate, base_rate, drop, n, base_n, firing))
    out.sort(key=lambda a: (not a.firing, a.route))
    return out


def alert_cuts(now: float, rule: AlertRule) -> tuple[float, ...]:
    """Where `route_alerts` splits a view ending at `now`: its window from its baseline (`LedgerSource.view`)."""
    return (now - rule.window_s,)


def alerts_now(source: LedgerSource, rule: AlertRule) -> tuple[float, list[RouteAlert]]:
    now = time.time()
    since = now - rule.window_s - rule.baseline_s
    with source.view(since, now, cuts=alert_cuts(now, rule)) as view:
        return now, route_alerts(view, now, rule)


class AlertCollector(Collector):
    """Prometheus gauges for `route_alerts`, computed from the ledger when /metrics is scraped."""

    def __init__(self, source: LedgerSource, rule: AlertRule = AlertRule()) -> None:
        self.source = source
        self.rule = rule

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            _, alerts = alerts_now(self.source, self.rule)
        except Exception as e:  # a ledger that cannot be read must not take /metrics down with it
            log.warning("hit-rate alerts unavailable: %s", e)
            return
        rate = GaugeMetricFamily("prefixgate_route_hit_rate", "Route cache hit rate by tokens, last alert window",
                                 labels=["route"])
        base = GaugeMetricFamily("prefixgate_route_hit_rate_baseline",
                                 "Route cache hit rate over the trailing baseline before the alert window", labels=["route"])
        drop = GaugeMetricFamily("prefixgate_route_hit_rate_drop",
                                 "Relative hit-rate drop against the route's baseline (positive is worse)", labels=["route"])
        alert = GaugeMetricFamily("prefixgate_route_hit_rate_drop_alert",
                                  "1 when the route's hit rate dropped against its own baseline", labels=["route"])
        for a in alerts:
            if a.hit_rate is not None:
                rate.add_metric([a.route], a.hit_rate)
            if a.baseline_hit_rate is not None:
                base.add_metric([a.route], a.baseline_hit_rate)
            if a.drop is not None:
                drop.add_metric([a.route], a.drop)
            alert.add_metric([a.route], 1.0 if a.firing else 0.0)
        yield from (rate, base, drop, alert)
