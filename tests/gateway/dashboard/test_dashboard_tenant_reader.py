"""A tenant's dashboard reader, through a real `prefixgate serve`, on a ledger where other tenants are busy:
the record views read that tenant's latest records, not that tenant's share of everyone's latest; the figures
(totals, time series, breakdowns, the overview) are that tenant's alone, over SQLite, Redis and Postgres."""

from __future__ import annotations

import time
from decimal import Decimal

import httpx
import pytest

from prefixgate.gateway.dashboard.source import RedisSource
from prefixgate.ledger import Ledger, LedgerRecord, read_records
from tests.gateway.dashboard import support_tenants as two
from tests.gateway.dashboard.support_tenants import ADMIN, POLICY, READER
from tests.support_services import empty_postgres_ledger
from tests.support_stack import policy_env, running_stack

BETA_REQUESTS = 1200     # more than the 1000 latest records the record views read


def test_a_tenant_reader_sees_its_records_while_another_tenant_is_busy(tmp_path):
    now = time.time()
    ledger = Ledger(str(tmp_path / "ledger.sqlite"))
    ledger.append(LedgerRecord(id="acme-0", ts=now - 600, key="acme-app", tenant="acme", route="openai", model="gpt-5.4",
                               uncached_input=3000, output=20, cost_usd="0.0078"))
    for i in range(BETA_REQUESTS):
        ledger.append(LedgerRecord(id=f"beta-{i}", ts=now - 300 + i * 0.1, key="beta-app", tenant="beta",
                                   route="openai", model="gpt-5.4-mini"))
    ledger.close()
    assert len(read_records(str(tmp_path / "ledger.sqlite"))) == BETA_REQUESTS + 1
    with running_stack(tmp_path, policy_env(tmp_path, POLICY, PREFIXGATE_ADMIN_TOKEN=ADMIN)) as (gw, _):
        auth = {"authorization": f"Bearer {READER}"}
        mine = httpx.get(f"{gw}/api/requests", headers=auth)
        assert mine.status_code == 200, mine.text
        assert [r["id"] for r in mine.json()["records"]] == ["acme-0"]
        assert httpx.get(f"{gw}/api/requests/acme-0", headers=auth).status_code == 200
        misses = httpx.get(f"{gw}/api/misses", headers=auth).json()["routes"]
        assert [(m["route"], m["requests"]) for m in misses] == [("openai", 1)]
        # Another tenant's record stays unknown to this reader.
        assert httpx.get(f"{gw}/api/requests/beta-5", headers=auth).status_code == 404


def test_the_redis_source_reads_one_tenants_latest_records(tmp_path, redis_url):
    # Stream ids are Redis's clock at the copy: records of now.
    now = time.time()
    ledger = Ledger(str(tmp_path / "ledger.sqlite"), redis_url)
    for i, tenant in enumerate(["acme", "beta", "acme", "beta", "beta"]):
        ledger.append(LedgerRecord(id=f"r{i}", ts=now - 10 + i, tenant=tenant, route="openai", model="gpt-5.4"))
    ledger.close()
    source = RedisSource(redis_url)
    try:
        assert [r.id for r in source.records(now - 60, now + 1, tenant="acme")] == ["r0", "r2"]
        assert [r.id for r in source.records(now - 60, now + 1, tenant="acme", latest=1)] == ["r2"]
        assert [r.id for r in source.records(now - 60, now + 1, tenant="beta", route="other")] == []
    finally:
        source.close()


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def store(request) -> tuple[str, dict[str, str]]:
    """(the ledger store the dashboard reads, the gateway's environment naming it: none for the SQLite file)."""
    if request.param == "redis":
        return "redis", {"PREFIXGATE_REDIS_URL": request.getfixturevalue("redis_url")}
    if request.param == "postgres":
        return "postgres", {"PREFIXGATE_LEDGER_URL": empty_postgres_ledger(request.getfixturevalue("postgres_url"))}
    return "sqlite", {}


def test_a_tenant_readers_figures_are_its_own_records_alone(tmp_path, store):
    source, env = store
    two.write_two_tenants(tmp_path, time.time(), env)
    with running_stack(tmp_path, policy_env(tmp_path, POLICY, PREFIXGATE_ADMIN_TOKEN=ADMIN, **env)) as (gw, _):
        with httpx.Client(base_url=gw, headers={"authorization": f"Bearer {READER}"}) as acme:
            day = {"range": "24h"}
            summary = acme.get("/api/summary", params=day)
            assert summary.status_code == 200, summary.text
            assert summary.json()["window"]["source"] == source
            t = summary.json()["totals"]
            # Callers' requests: acme-old, acme-batch, acme-429; the abandoned attempt and the refresh are spend only.
            assert (t["requests"], t["errors"]) == (two.ACME_REQUESTS, two.ACME_ERRORS) == (3, 1)
            assert Decimal(t["spend_usd"]) == two.ACME_SPEND == Decimal("0.0095")
            assert t["tokens"] == {"uncached_input": 5000, "cache_read": 4500, "cache_write": 0, "output": 31}
            assert t["keepalive"]["refreshes"] == 1 and Decimal(t["keepalive"]["bought_usd"]) == Decimal("0.0001")
            # The callers' requests took 800 ms; the abandoned attempt's 30 s is not a caller's wait.
            assert t["latency_p95_ms"] == pytest.approx(800, rel=0.05)

            points = acme.get("/api/timeseries", params={**day, "step": 3600}).json()["points"]
            assert sum(p["requests"] for p in points) == 3
            assert sum(Decimal(p["spend_usd"]) for p in points) == Decimal("0.0095")

            def rows(by: str) -> list[tuple]:
                got = acme.get("/api/breakdown", params={**day, "by": by})
                assert got.status_code == 200, got.text
                return [(r["name"], r["requests"], r["errors"], Decimal(r["spend_usd"])) for r in got.json()["rows"]]
            assert rows("route") == [("chat", 2, 1, Decimal("0.0079")), ("batch", 1, 0, Decimal("0.0016"))]
            assert rows("key") == [("acme-app", 3, 1, Decimal("0.0095"))]
            assert rows("tenant") == [("acme", 3, 1, Decimal("0.0095"))]
            assert rows("model") == [("gpt-5.4", 2, 1, Decimal("0.0079")), ("gpt-5.4-mini", 1, 0, Decimal("0.0016"))]

            overview = acme.get("/api/overview", params=day)
            assert overview.status_code == 200, overview.text
            assert overview.json()["totals"] == t and overview.json()["alerts"] == []
            assert [r["name"] for r in overview.json()["breakdowns"]["target"]] == ["openai"]
            # What spans every tenant stays the operator's.
            for path in ("/api/forecast", "/api/alerts", "/api/alerts/rules"):
                assert acme.get(path).status_code == 403, path
        everyone = httpx.get(f"{gw}/api/summary", params={"range": "24h"}, headers={"authorization": f"Bearer {ADMIN}"}).json()
        assert everyone["totals"]["requests"] == 3 + 6
        assert Decimal(everyone["totals"]["spend_usd"]) == two.ACME_SPEND + two.BETA_SPEND
