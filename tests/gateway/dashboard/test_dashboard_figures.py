"""Totals, time series, breakdowns and hit-rate drop alerts over ledger records."""

from __future__ import annotations

from decimal import Decimal

import pytest

from prefixgate.gateway.dashboard.alerts import AlertRule, route_alerts
from prefixgate.gateway.dashboard.figures import breakdown, percentile, timeseries, totals
from prefixgate.ledger import LedgerRecord


def rec(i: int, ts: float, *, route: str = "a", model: str = "m", read: int = 0, uncached: int = 100, cost: str | None = "0.1",
        without: str | None = "0.3", status: int = 200, ttft: float | None = None) -> LedgerRecord:
    saved = None if cost is None else str(Decimal(without) - Decimal(cost))
    return LedgerRecord(id=f"r{i}", ts=ts, route=route, model=model, target="t", key="k", uncached_input=uncached,
                        cache_read=read, cache_writes={"5m": 10}, output=5, cost_usd=cost, cost_without_cache_usd=without,
                        savings_usd=saved, status=status, latency_ms=10.0 * (i + 1), ttft_ms=ttft)


def test_totals_add_exact_decimals_and_hit_rate_by_tokens():
    rows = [rec(i, 100.0 + i, read=90) for i in range(10)] + [rec(10, 111, cost=None, without=None)]
    rows.append(rec(11, 112, status=502, uncached=0, cost=None, without=None))
    fig = totals(rows).to_dict()
    assert fig["spend_usd"] == "1.0" and fig["spend_without_cache_usd"] == "3.0" and fig["savings_usd"] == "2.0"
    assert fig["requests"] == 12 and fig["errors"] == 1 and fig["unpriced"] == 1
    assert fig["hit_rate"] == pytest.approx(900 / (900 + 1100 + 120))
    assert fig["tokens"] == {"uncached_input": 1100, "cache_read": 900, "cache_write": 120, "output": 60}
    assert fig["latency_p95_ms"] == 120.0 and fig["ttft_p95_ms"] is None
    assert totals([]).to_dict()["hit_rate"] is None


def test_percentile_is_nearest_rank():
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile(list(map(float, range(1, 101))), 95) == 95.0
    assert percentile([], 95) is None


def test_timeseries_buckets_cover_the_window_and_sum_to_the_totals():
    rows = [rec(i, 1000.0 + 7 * i, read=50 * (i % 2)) for i in range(20)]
    points = timeseries(rows, 1000.0, 1140.0, 30.0)
    assert [p["t"] for p in points] == [1000.0, 1030.0, 1060.0, 1090.0, 1120.0]
    assert sum(p["requests"] for p in points) == 20
    assert sum(Decimal(p["spend_usd"]) for p in points) == Decimal("2.0")
    assert timeseries([], 0.0, 10.0, 30.0)[0]["hit_rate"] is None


def test_breakdown_groups_and_orders_by_spend():
    rows = [rec(0, 1, route="x", cost="0.5", without="0.5"), rec(1, 2, route="y"), rec(2, 3, route="y")]
    out = breakdown(rows, "route")
    assert [(r["name"], r["requests"], r["spend_usd"]) for r in out] == [("x", 1, "0.5"), ("y", 2, "0.2")]
    assert breakdown(rows, "model")[0]["requests"] == 3
    with pytest.raises(ValueError, match="breakdown by"):
        breakdown(rows, "colour")


def window(route: str, start: float, n: int, read: int, uncached: int) -> list[LedgerRecord]:
    return [rec(i, start + i, route=route, read=read, uncached=uncached) for i in range(n)]


def test_a_route_whose_hit_rate_halves_against_its_own_baseline_fires():
    now = 10_000.0
    rows = (window("broken", now - 3000, 20, read=900, uncached=90)      # ~90% for the last hour
            + window("broken", now - 200, 10, read=100, uncached=890)     # ~10% after the deploy
            + window("steady", now - 3000, 20, read=900, uncached=90)
            + window("steady", now - 200, 10, read=880, uncached=110)
            + window("never", now - 3000, 20, read=0, uncached=990)       # never cached: nothing to drop from
            + window("never", now - 200, 10, read=0, uncached=990))
    alerts = {a.route: a for a in route_alerts(rows, now)}
    broken = alerts["broken"]
    assert broken.firing and broken.drop > 0.8 and broken.requests == 10 and broken.baseline_requests == 20
    assert not alerts["steady"].firing and alerts["steady"].drop < 0.1
    assert not alerts["never"].firing and alerts["never"].drop is None
    assert route_alerts(rows, now)[0].route == "broken"    # firing first


def test_alerts_need_enough_requests_in_both_windows():
    now = 10_000.0
    rows = window("thin", now - 3000, 20, read=900, uncached=90) + window("thin", now - 200, 2, read=0, uncached=990)
    assert not route_alerts(rows, now)[0].firing
    assert route_alerts(rows, now, AlertRule(min_requests=2))[0].firing


@pytest.mark.parametrize("bad", [dict(window_s=0), dict(drop=1.5), dict(min_baseline=-1), dict(min_requests=0)])
def test_alert_rule_is_validated(bad):
    with pytest.raises(ValueError):
        AlertRule(**bad)
