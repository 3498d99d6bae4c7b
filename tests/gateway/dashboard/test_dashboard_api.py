"""The dashboard's HTTP surface on a real gateway: admin-token protection, the JSON API and its
OpenAPI schema, bad input, the Redis-backed ledger, alert gauges on /metrics, and old ledger files."""

from __future__ import annotations

import sqlite3
import time
from decimal import Decimal

import httpx
import pytest
import redis

from prefixgate.ledger import STREAM, Ledger, LedgerRecord, read_records
from tests.gateway.dashboard.support_scenario import burst, dashboard_gateway, wait_for_ledger

TOKEN = "admin-secret-0001"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with dashboard_gateway(tmp_path_factory.mktemp("api"), admin_token=TOKEN) as running:
        burst(running.url, rounds=3)
        wait_for_ledger(running.url, 6, AUTH)
        yield running


def test_the_admin_token_guards_page_and_api(gw):
    assert httpx.get(gw.url + "/api/summary").status_code == 401
    assert httpx.get(gw.url + "/api/summary", headers={"authorization": "Bearer wrong"}).status_code == 401
    page = httpx.get(gw.url + "/dashboard")
    assert page.status_code == 401 and "admin token" in page.text and "<form" in page.text
    assert 'method="post" action="/dashboard/login"' in page.text
    # Never from the address (access logs keep URLs): refused, and no cookie set.
    in_url = httpx.get(gw.url + "/dashboard", params={"token": TOKEN})
    assert in_url.status_code == 400 and "set-cookie" not in in_url.headers
    assert httpx.post(gw.url + "/dashboard/login", data={"token": "wrong"}).status_code == 401
    login = httpx.post(gw.url + "/dashboard/login", data={"token": TOKEN})
    assert login.status_code == 303 and login.headers["location"] == "/dashboard"
    cookie = login.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    with httpx.Client(base_url=gw.url, cookies=login.cookies) as browser:
        page = browser.get("/dashboard")
        assert page.status_code == 200 and "dashboard.js" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert browser.get("/api/overview").status_code == 200
    # Assets are the package's public code; only listed names are served.
    assert httpx.get(gw.url + "/dashboard/static/dashboard.js").status_code == 200
    assert httpx.get(gw.url + "/dashboard/static/..%2Fapp.py").status_code == 404
    assert httpx.get(gw.url + "/dashboard/static/dashboard.html").status_code == 404


def test_api_figures_match_the_ledger(gw):
    rows = read_records(gw.settings.ledger_path)
    summary = httpx.get(gw.url + "/api/summary", params={"range": "15m"}, headers=AUTH).json()
    t = summary["totals"]
    assert summary["window"]["source"] == "sqlite"
    assert t["requests"] == len(rows) == 6
    assert Decimal(t["spend_usd"]) == sum(Decimal(r["cost_usd"]) for r in rows)
    assert Decimal(t["savings_usd"]) == sum(Decimal(r["savings_usd"]) for r in rows)
    by_route = httpx.get(gw.url + "/api/breakdown", params={"by": "route"}, headers=AUTH).json()["rows"]
    assert {r["name"]: r["requests"] for r in by_route} == {"support-bot": 3, "docs-qa": 3}
    series = httpx.get(gw.url + "/api/timeseries", params={"range": "10m", "step": 60}, headers=AUTH).json()
    assert series["step_s"] == 60 and len(series["points"]) == 10
    assert sum(p["requests"] for p in series["points"]) == 6
    misses = httpx.get(gw.url + "/api/misses", headers=AUTH).json()["routes"]
    assert misses[0]["route"] == "support-bot" and misses[0]["top_reason"]["reason"] == "volatile_span"
    assert misses[0]["first_difference"]["segment"]["volatile_kinds"] == ["timestamp"]
    latest = httpx.get(gw.url + "/api/requests", params={"route": "support-bot", "misses_only": True, "limit": 2},
                       headers=AUTH).json()["records"]
    assert len(latest) == 2 and latest[0]["ts"] >= latest[1]["ts"] and latest[0]["cache_read"] == 0
    overview = httpx.get(gw.url + "/api/overview", headers=AUTH).json()
    assert overview["totals"]["requests"] == 6 and overview["totals"]["spend_usd"] == t["spend_usd"]
    assert [m["route"] for m in overview["misses"]] == [m["route"] for m in misses]
    assert set(overview["breakdowns"]) == {"route", "model", "key", "target"}


@pytest.mark.parametrize("path, params", [
    ("/api/summary", {"range": "yesterday"}), ("/api/summary", {"range": "90d"}), ("/api/summary", {"range": "0m"}),
    ("/api/breakdown", {"by": "colour"}), ("/api/timeseries", {"range": "7d", "step": 1}),
    ("/api/misses", {"limit": 0}), ("/api/alerts", {"drop": 2}),
    # A bucket wider than any window: `inf` was a 200 with null bucket times.
    ("/api/timeseries", {"step": "inf"}), ("/api/timeseries", {"step": "1e308"}), ("/api/timeseries", {"step": "nan"}),
])
def test_bad_parameters_are_a_422_naming_the_problem(gw, path, params):
    r = httpx.get(gw.url + path, params=params, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"]


def test_the_api_is_in_its_openapi_schema(gw):
    doc = httpx.get(gw.url + "/api/openapi.json", headers=AUTH).json()
    assert {"/api/summary", "/api/timeseries", "/api/breakdown", "/api/misses", "/api/alerts", "/api/overview",
            "/api/requests"} <= set(doc["paths"])
    props = doc["components"]["schemas"]["Totals"]["properties"]
    assert {"spend_usd", "spend_without_cache_usd", "savings_usd", "hit_rate"} <= set(props)
    assert doc["paths"]["/api/summary"]["get"]["parameters"][0]["name"] == "range"


def test_with_redis_the_dashboard_reads_every_replicas_records(tmp_path, redis_url):
    with dashboard_gateway(tmp_path, redis_url=redis_url) as running:
        burst(running.url, rounds=2)
        summary = wait_for_ledger(running.url, 4)
        # A record another replica wrote reaches this one only through Redis.
        other = LedgerRecord(id="elsewhere", ts=time.time(), route="docs-qa", model="claude-sonnet-5", uncached_input=10,
                             cost_usd="0.5", cost_without_cache_usd="0.5", savings_usd="0")
        elsewhere = Ledger(str(tmp_path / "other.sqlite"), redis_url)
        elsewhere.append(other)
        elsewhere.close()
        after = httpx.get(running.url + "/api/summary").json()
    assert summary["window"]["source"] == "redis"
    assert after["totals"]["requests"] == 5
    local = read_records(running.settings.ledger_path)
    assert Decimal(after["totals"]["spend_usd"]) == sum(Decimal(r["cost_usd"]) for r in local) + Decimal("0.5")
    assert len(redis.Redis.from_url(redis_url).xrange(STREAM)) == 5


def test_a_hit_rate_drop_fires_on_the_page_api_and_metrics(tmp_path):
    now = time.time()
    ledger = Ledger(str(tmp_path / "ledger.sqlite"))
    for i in range(20):   # an hour of ~90% hits, then a deploy: ~5%
        ledger.append(LedgerRecord(id=f"b{i}", ts=now - 3000 + i * 100, route="docs-qa", uncached_input=100, cache_read=900))
    for i in range(8):
        ledger.append(LedgerRecord(id=f"c{i}", ts=now - 120 + i * 10, route="docs-qa", uncached_input=950, cache_read=50))
    ledger.close()
    with dashboard_gateway(tmp_path) as running:
        alerts = httpx.get(running.url + "/api/alerts").json()
        metrics = httpx.get(running.url + "/metrics").text
        overview = httpx.get(running.url + "/api/overview").json()
    firing = [a for a in alerts["alerts"] if a["firing"]]
    assert [a["route"] for a in firing] == ["docs-qa"] and firing[0]["drop"] > 0.9
    assert alerts["rule"]["window_s"] == 300 and alerts["rule"]["drop"] == 0.5
    assert 'prefixgate_route_hit_rate_drop_alert{route="docs-qa"} 1.0' in metrics
    assert 'prefixgate_route_hit_rate_baseline{route="docs-qa"} 0.9' in metrics
    assert [a["route"] for a in overview["alerts"] if a["firing"]] == ["docs-qa"]


def test_a_ledger_file_from_before_segments_is_migrated(tmp_path):
    path = str(tmp_path / "old.sqlite")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE requests (id TEXT PRIMARY KEY, ts REAL, route TEXT, cache_writes TEXT, explanation TEXT, "
               "stream INTEGER)")
    db.execute("INSERT INTO requests VALUES ('old', 1.0, 'r', '{}', '[]', 0)")
    db.commit()
    db.close()
    ledger = Ledger(path, clock=lambda: 3.0)     # the records are not past retention
    ledger.append(LedgerRecord(id="new", ts=2.0, route="r", segments=["system:a:b:10:"]))
    ledger.close()
    rows = read_records(path)
    assert [(r["id"], r["segments"]) for r in rows] == [("old", []), ("new", ["system:a:b:10:"])]


def test_the_login_cookie_is_secure_behind_a_tls_proxy(gw):
    # docs/deploying-safely.md: a TLS proxy on the same machine says X-Forwarded-Proto: https (uvicorn trusts it
    # from 127.0.0.1), and the login cookie is then marked Secure; over plain HTTP it cannot be.
    def attributes(response: httpx.Response) -> set[str]:
        return {part.strip().lower() for part in response.headers["set-cookie"].split(";")}

    plain = httpx.post(gw.url + "/dashboard/login", data={"token": TOKEN})
    behind = httpx.post(gw.url + "/dashboard/login", data={"token": TOKEN}, headers={"x-forwarded-proto": "https"})
    assert plain.status_code == behind.status_code == 303
    assert "secure" not in attributes(plain) and "secure" in attributes(behind)
