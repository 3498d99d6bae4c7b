"""Two tenants on one ledger, and a dashboard reader key of one of them: acme's few requests (and two rows of the
gateway's own) beside beta's costlier ones, with acme's figures typed from the records."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from prefixgate.ledger import Ledger, LedgerRecord
from prefixgate.policies import hash_key

READER, ADMIN = "pg-acme-reader-busy-0123", "admin-token-busy-tenants-01"
POLICY = {"routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
          "keys": [{"name": "acme-app", "key_sha256": hash_key("pg-acme-app-busy-01234"), "tenant": "acme"},
                   {"name": "beta-app", "key_sha256": hash_key("pg-beta-app-busy-01234"), "tenant": "beta"},
                   {"name": "acme-reader", "key_sha256": hash_key(READER), "tenant": "acme", "dashboard": "read"}]}
# acme's callers' requests, their errors and all it spent (the gateway's own rows included); beta's spend.
ACME_REQUESTS, ACME_ERRORS = 3, 1
ACME_SPEND = Decimal("0.0078") + Decimal("0.0004") + Decimal("0.0012") + Decimal("0.0001")
BETA_SPEND = 6 * Decimal("0.125")


def two_tenants(now: float) -> list[LedgerRecord]:
    """acme: three callers' requests (one refused 429) and two rows of the gateway's own; beta: six requests
    costing far more. Some are three hours old (read from hour rollups), the rest minutes old."""
    acme = dict(key="acme-app", tenant="acme", target="openai", provider="openai", latency_ms=800.0)
    rows = [LedgerRecord(id="acme-old", ts=now - 3 * 3600, route="chat", model="gpt-5.4", uncached_input=3000, output=20,
                         cost_usd="0.0078", **acme),
            # An attempt that timed out, retried: acme-batch is the request's record.
            LedgerRecord(id="acme-batch-1", ts=now - 630, route="batch", model="gpt-5.4-mini", uncached_input=1000,
                         cost_usd="0.0004", status=504, kind="abandoned_attempt", **{**acme, "latency_ms": 30_000.0}),
            LedgerRecord(id="acme-batch", ts=now - 600, route="batch", model="gpt-5.4-mini", uncached_input=1000,
                         cache_read=2000, output=10, cost_usd="0.0012", **acme),
            LedgerRecord(id="acme-429", ts=now - 500, route="chat", model="gpt-5.4", status=429, **acme),
            LedgerRecord(id="acme-ka", ts=now - 300, route="chat", model="gpt-5.4", cache_read=2500, output=1,
                         cost_usd="0.0001", cost_without_cache_usd="0", kind="keepalive", **acme)]
    beta = dict(key="beta-app", tenant="beta", target="openai", provider="openai", route="chat", model="gpt-5.4",
                uncached_input=50_000, cost_usd="0.125", latency_ms=5000.0)
    rows.append(LedgerRecord(id="beta-old", ts=now - 3 * 3600 + 60, **beta))
    rows += [LedgerRecord(id=f"beta-{i}", ts=now - 400 + i, **beta) for i in range(5)]
    return rows


def write_two_tenants(tmp: Path, now: float, env: dict[str, str]) -> None:
    """The records into `tmp`'s ledger file, copied to the store `env` names (PREFIXGATE_REDIS_URL or _LEDGER_URL)."""
    ledger = Ledger(str(tmp / "ledger.sqlite"), env.get("PREFIXGATE_REDIS_URL", ""), ledger_url=env.get("PREFIXGATE_LEDGER_URL", ""))
    for rec in two_tenants(now):
        ledger.append(rec)
    ledger.close()
