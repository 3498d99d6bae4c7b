"""Totals, time series, breakdowns and hit-rate drop alerts, read from the rollups of a real ledger file."""

from __future__ import annotations

from decimal import Decimal

import pytest

from prefixgate.gateway.dashboard.alerts import AlertRule, route_alerts
from prefixgate.gateway.dashboard.figures import breakdown, percentile, spans, timeseries, totals
from prefixgate.gateway.dashboard.source import SqliteSource
from prefixgate.ledger import Ledger, LedgerRecord
from prefixgate.ledger_rollup import bin_ms, latency_bin


def rec(i: int, ts: float, *, route: str = "a", model: str = "m", read: int = 0, uncached: int = 100, cost: str | None = "0.1",
        without: str | None = "0.3", status: int = 200, ttft: float | None = None) -> LedgerRecord:
    saved = None if cost is None else str(Decimal(without) - Decimal(cost))
    return LedgerRecord(id=f"r{i}-{route}-{ts}", ts=ts, route=route, model=model, target="t", key="k", uncached_input=uncached,
                        cache_read=read, cache_writes={"5m": 10}, output=5, cost_usd=cost, cost_without_cache_usd=without,
                        savings_usd=saved, status=status, latency_ms=10.0 * (i + 1), ttft_ms=ttft)


@pytest.fixture
def source(tmp_path):
    """Write records through the ledger (rolled up by its thread), then read them back as the dashboard does.
    The ledger's clock stands just after the records (they are not past retention)."""
    def write(rows: list[LedgerRecord]) -> SqliteSource:
        path = str(tmp_path / "ledger.sqlite")
        ledger = Ledger(path, clock=lambda: 20_000.0)
        for r in rows:
            ledger.append(r)
        ledger.close()
        return SqliteSource(path)
    return write


def test_totals_add_exact_decimals_and_hit_rate_by_tokens(source):
    rows = [rec(i, 100.0 + i, read=90) for i in range(10)] + [rec(10, 111, cost=None, without=None)]
    rows.append(rec(11, 112, status=502, uncached=0, cost=None, without=None))
    with source(rows).view(0, 200) as view:
        fig = totals(view, 60, 200)
        empty = totals(view, 1000, 2000)
    assert fig["spend_usd"] == "1" and fig["spend_without_cache_usd"] == "3" and fig["savings_usd"] == "2"
    assert fig["requests"] == 12 and fig["errors"] == 1 and fig["unpriced"] == 1
    assert fig["hit_rate"] == pytest.approx(900 / (900 + 1100 + 120))
    assert fig["tokens"] == {"uncached_input": 1100, "cache_read": 900, "cache_write": 120, "output": 60}
    assert fig["latency_p95_ms"] == pytest.approx(120.0, rel=0.05) and fig["ttft_p95_ms"] is None
    assert empty["hit_rate"] is None and empty["requests"] == 0 and empty["spend_usd"] == "0"


def test_percentile_is_nearest_rank_over_10_percent_bins():
    hist = {latency_bin(v): 1 for v in (1.0, 2.0, 3.0, 4.0, 5.0)}
    assert percentile(hist, 50) == pytest.approx(3.0, rel=0.05)
    assert percentile({latency_bin(float(v)): 1 for v in range(1, 101)}, 95) == pytest.approx(95.0, rel=0.05)
    assert percentile({}, 95) is None
    for ms in (0.2, 1.0, 7.3, 250.0, 61_000.0):
        assert bin_ms(latency_bin(ms)) == pytest.approx(ms, rel=0.05, abs=0.5)


def test_windows_use_hour_rollups_inside_and_minutes_at_the_edges():
    assert spans(3590.0, 3600 * 3 + 125.0) == [(60, 3540, 3600), (3600, 3600, 10800), (60, 10800, 10925.0)]
    assert spans(100.0, 900.0) == [(60, 60, 900.0)]


def test_timeseries_buckets_cover_the_window_and_sum_to_the_totals(source):
    rows = [rec(i, 1020.0 + 7 * i, read=50 * (i % 2)) for i in range(20)]
    with source(rows).view(0, 2000) as view:
        points = timeseries(view, 1020.0, 1200.0, 60.0)
        hourly = timeseries(view, 0.0, 7200.0, 3600.0)
    assert [p["t"] for p in points] == [1020.0, 1080.0, 1140.0]
    assert [p["requests"] for p in points] == [9, 9, 2]
    assert sum(Decimal(p["spend_usd"]) for p in points) == Decimal("2.0")
    assert [p["requests"] for p in hourly] == [20, 0] and hourly[1]["hit_rate"] is None


def test_breakdown_groups_and_orders_by_spend(source):
    rows = [rec(0, 1, route="x", cost="0.5", without="0.5"), rec(1, 2, route="y"), rec(2, 3, route="y")]
    with source(rows).view(0, 60) as view:
        out = breakdown(view, 0, 60, "route")
        assert [(r["name"], r["requests"], r["spend_usd"]) for r in out] == [("x", 1, "0.5"), ("y", 2, "0.2")]
        assert breakdown(view, 0, 60, "model")[0]["requests"] == 3
        with pytest.raises(ValueError, match="breakdown by"):
            breakdown(view, 0, 60, "colour")


def window(route: str, start: float, n: int, read: int, uncached: int) -> list[LedgerRecord]:
    return [rec(i, start + i, route=route, read=read, uncached=uncached) for i in range(n)]


def test_a_route_whose_hit_rate_halves_against_its_own_baseline_fires(source):
    now = 10_020.0
    rows = (window("broken", now - 3000, 20, read=900, uncached=90)      # ~90% for the last hour
            + window("broken", now - 200, 10, read=100, uncached=890)     # ~10% after the deploy
            + window("steady", now - 3000, 20, read=900, uncached=90)
            + window("steady", now - 200, 10, read=880, uncached=110)
            + window("never", now - 3000, 20, read=0, uncached=990)       # never cached: nothing to drop from
            + window("never", now - 200, 10, read=0, uncached=990))
    with source(rows).view(0, now) as view:
        found = route_alerts(view, now)
    alerts = {a.route: a for a in found}
    broken = alerts["broken"]
    assert broken.firing and broken.drop > 0.8 and broken.requests == 10 and broken.baseline_requests == 20
    assert not alerts["steady"].firing and alerts["steady"].drop < 0.1
    assert not alerts["never"].firing and alerts["never"].drop is None
    assert found[0].route == "broken"    # firing first


def test_alerts_need_enough_requests_in_both_windows(source):
    now = 10_020.0
    rows = window("thin", now - 3000, 20, read=900, uncached=90) + window("thin", now - 200, 2, read=0, uncached=990)
    with source(rows).view(0, now) as view:
        assert not route_alerts(view, now)[0].firing
        assert route_alerts(view, now, AlertRule(min_requests=2))[0].firing


@pytest.mark.parametrize("bad", [dict(window_s=0), dict(drop=1.5), dict(min_baseline=-1), dict(min_requests=0)])
def test_alert_rule_is_validated(bad):
    with pytest.raises(ValueError):
        AlertRule(**bad)


def test_alerts_need_a_baseline_of_at_least_20_percent(source):
    # docs/dashboard.md: a route whose baseline hit rate is under 20% never cached much and cannot "drop".
    now = 10_020.0
    rows = (window("low", now - 3000, 20, read=150, uncached=850)          # 15% baseline
            + window("low", now - 200, 10, read=0, uncached=1000)          # to 0%: a 100% relative drop
            + window("enough", now - 3000, 20, read=250, uncached=750)     # 25% baseline
            + window("enough", now - 200, 10, read=0, uncached=1000))
    with source(rows).view(0, now) as view:
        alerts = {a.route: a for a in route_alerts(view, now)}
    assert alerts["low"].drop == 1.0 and not alerts["low"].firing
    assert alerts["enough"].drop == 1.0 and alerts["enough"].firing
