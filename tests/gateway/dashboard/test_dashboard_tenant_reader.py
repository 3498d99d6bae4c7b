"""A tenant's dashboard reader, through a real `prefixgate serve`, on a ledger where other tenants are busy:
the record views read that tenant's latest records, not that tenant's share of everyone's latest."""

from __future__ import annotations

import time

import httpx

from prefixgate.gateway.dashboard.source import RedisSource
from prefixgate.ledger import Ledger, LedgerRecord, read_records
from prefixgate.policies import hash_key
from tests.support_stack import policy_env, running_stack

READER, ADMIN = "pg-acme-reader-busy-0123", "admin-token-busy-tenants-01"
POLICY = {"routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
          "keys": [{"name": "acme-app", "key_sha256": hash_key("pg-acme-app-busy-01234"), "tenant": "acme"},
                   {"name": "beta-app", "key_sha256": hash_key("pg-beta-app-busy-01234"), "tenant": "beta"},
                   {"name": "acme-reader", "key_sha256": hash_key(READER), "tenant": "acme", "dashboard": "read"}]}
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
