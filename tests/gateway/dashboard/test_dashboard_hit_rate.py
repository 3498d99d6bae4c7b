"""The hit rate is the callers': a route with keep-alive, whose refreshes each read the whole prefix from cache,
shows the share of its callers' prompt tokens read from cache, not one lifted by the refreshes' reads, on the
totals, time series, breakdowns, the hit-rate drop alert and /metrics, over SQLite, Redis and Postgres; an older
ledger's rollups gain the refreshes' token sums filled in from its kept records."""

from __future__ import annotations

import sqlite3
import time

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg_pool import ConnectionPool

from prefixgate.gateway.dashboard.figures import totals
from prefixgate.gateway.dashboard.source import PostgresSource, SqliteSource
from prefixgate.gateway.metrics import Metrics
from prefixgate.ledger import Ledger, LedgerRecord
from prefixgate.ledger_postgres import PostgresSync, create_tables
from tests.support_services import empty_postgres_ledger, wait_until
from tests.support_stack import policy_env, running_stack

ADMIN = "admin-token-hit-rate-0123"
POLICY = {"routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}]}
CALLER = dict(route="chat", model="gpt-5.4", key="app", target="openai", provider="openai", latency_ms=900.0)


def chat(now: float) -> list[LedgerRecord]:
    """Route chat half an hour ago: 5 callers' requests reading 800 of 1000 prompt tokens from cache (80%), and a
    refresh reading the 2000-token prefix; in the last 5 minutes: 5 reading 200 of 1000 (20%) and three refreshes
    of 2000 each. The callers: 5000 of 10000 tokens read, 50%; with the refreshes it would be 13000 of 18000 (72%),
    and the last 5 minutes 7000 of 11000 (64%) against 6000 of 7000 (86%): a 26% drop, not the callers' 75%."""
    rows = [LedgerRecord(id=f"early-{i}", ts=now - 1800 + 10 * i, uncached_input=200, cache_read=800, output=10,
                         cost_usd="0.001", **CALLER) for i in range(5)]
    rows += [LedgerRecord(id=f"late-{i}", ts=now - 200 + 5 * i, uncached_input=800, cache_read=200, output=10,
                          cost_usd="0.002", **CALLER) for i in range(5)]
    refreshes = [now - 1500, now - 150, now - 140, now - 130]
    rows += [LedgerRecord(id=f"ka-{i}", ts=ts, cache_read=2000, output=1, cost_usd="0.0005", cost_without_cache_usd="0",
                          kind="keepalive", **CALLER) for i, ts in enumerate(refreshes)]
    return rows


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def ledger_env(request) -> dict[str, str]:
    """The gateway's environment naming the ledger store the dashboard reads (none: its SQLite file)."""
    if request.param == "redis":
        return {"PREFIXGATE_REDIS_URL": request.getfixturevalue("redis_url")}
    if request.param == "postgres":
        return {"PREFIXGATE_LEDGER_URL": empty_postgres_ledger(request.getfixturevalue("postgres_url"))}
    return {}


def test_a_kept_alive_routes_hit_rate_is_its_callers(tmp_path, ledger_env):
    ledger = Ledger(str(tmp_path / "ledger.sqlite"), ledger_env.get("PREFIXGATE_REDIS_URL", ""),
                    ledger_url=ledger_env.get("PREFIXGATE_LEDGER_URL", ""))
    for rec in chat(time.time()):
        ledger.append(rec)
    ledger.close()
    with running_stack(tmp_path, policy_env(tmp_path, POLICY, PREFIXGATE_ADMIN_TOKEN=ADMIN, **ledger_env)) as (gw, _):
        with httpx.Client(base_url=gw, headers={"authorization": f"Bearer {ADMIN}"}) as admin:
            hour = {"range": "1h"}
            t = admin.get("/api/summary", params=hour).json()["totals"]
            assert t["hit_rate"] == pytest.approx(0.5)
            # The refreshes stay in tokens, spend and bought vs saved.
            assert t["requests"] == 10 and t["tokens"]["cache_read"] == 13_000 and t["keepalive"]["refreshes"] == 4
            for by in ("route", "model", "key"):
                rows = admin.get("/api/breakdown", params={**hour, "by": by}).json()["rows"]
                assert [(r["requests"], r["hit_rate"]) for r in rows] == [(10, pytest.approx(0.5))], by
            # Minutes holding the callers' requests read 80% or 20% (a refresh in the same minute changes neither);
            # the minute of the early refresh alone has no caller's prompt tokens: no rate.
            points = admin.get("/api/timeseries", params={**hour, "step": 60}).json()["points"]
            rates = sorted({round(p["hit_rate"], 6) for p in points if p["hit_rate"] is not None})
            assert rates == [0.2, 0.8]
            assert sum(p["requests"] for p in points) == 10

            alerts = admin.get("/api/alerts").json()["alerts"]
            assert [(a["route"], a["firing"], a["requests"], a["baseline_requests"]) for a in alerts] == [("chat", True, 5, 5)]
            assert (alerts[0]["hit_rate"], alerts[0]["baseline_hit_rate"]) == (pytest.approx(0.2), pytest.approx(0.8))
            assert admin.get("/api/overview", params=hour).json()["totals"]["hit_rate"] == pytest.approx(0.5)
            gauges = {s.name: s.value for f in text_string_to_metric_families(admin.get("/metrics").text)
                      for s in f.samples if s.labels.get("route") == "chat"}
            assert gauges["prefixgate_route_hit_rate"] == pytest.approx(0.2)
            assert gauges["prefixgate_route_hit_rate_baseline"] == pytest.approx(0.8)
            assert gauges["prefixgate_route_hit_rate_drop_alert"] == 1


def test_the_hit_rate_metrics_count_callers_prompt_tokens():
    # What the gauge and the shipped Prometheus rules and Grafana panels divide (deploy/): 400 of 1000, not 4400 of 5000.
    metrics = Metrics()
    metrics.observe(LedgerRecord(id="q", ts=0, uncached_input=600, cache_read=400, cost_usd="0.001", **CALLER))
    metrics.observe(LedgerRecord(id="ka", ts=1, cache_read=4000, cost_usd="0.0005", kind="keepalive", **CALLER))
    samples = {(s.name, s.labels.get("kind")): s.value for f in text_string_to_metric_families(metrics.render().decode())
               for s in f.samples}
    assert samples[("prefixgate_cache_hit_ratio", None)] == pytest.approx(0.4)
    assert samples[("prefixgate_caller_prompt_tokens_total", "cache_read")] == 400
    assert samples[("prefixgate_caller_prompt_tokens_total", "uncached_input")] == 600
    assert samples[("prefixgate_tokens_total", "cache_read")] == 4400         # tokens are tokens, refreshes' too


ADDED = ("gateway_row_cache_read", "gateway_row_prompt")


def test_an_older_sqlite_ledgers_rollups_gain_the_refreshes_tokens(tmp_path):
    path, now = str(tmp_path / "ledger.sqlite"), time.time()
    ledger = Ledger(path)
    for rec in chat(now):
        ledger.append(rec)
    ledger.close()
    # The file as the version before left it: rollups without the gateway rows' token sums.
    with sqlite3.connect(path) as db:
        for column in ADDED:
            db.execute(f"ALTER TABLE rollups DROP COLUMN {column}")
    Ledger(path).close()
    with SqliteSource(path).view(now - 3600, now + 60) as view:
        assert totals(view, now - 3600, now + 60)["hit_rate"] == pytest.approx(0.5)


def test_an_older_postgres_ledgers_rollups_gain_the_refreshes_tokens(tmp_path, postgres_url):
    now, url = time.time(), empty_postgres_ledger(postgres_url)
    ledger = Ledger(str(tmp_path / "ledger.sqlite"), ledger_url=url)
    for rec in chat(now):
        ledger.append(rec)
    copy = next(c for c in ledger.copies if isinstance(c, PostgresSync))
    wait_until(lambda: copy.position >= 14, 20, "the records copied to Postgres")
    ledger.close()
    with psycopg.connect(url, autocommit=True) as conn:
        for column in ADDED:
            conn.execute(f"ALTER TABLE prefixgate_rollups DROP COLUMN {column}")
    with ConnectionPool(url, min_size=1, max_size=1) as pool:
        create_tables(pool)             # what a newer replica does on start
    source = PostgresSource(url)
    try:
        with source.view(now - 3600, now + 60) as view:
            assert totals(view, now - 3600, now + 60)["hit_rate"] == pytest.approx(0.5)
    finally:
        source.close()
