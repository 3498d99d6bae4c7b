"""A ledger from before tenant rows (its rollups summed every tenant's records; the records themselves kept),
opened by this version: a tenant's reader sees its history from before, built once from the kept records,
over SQLite and Postgres, and nothing is counted twice when the ledger opens again. Hours whose records
retention already deleted stay in the operator's figures alone. (Redis needs none of this: a tenant's view is
rolled up from that tenant's records in the stream, test_dashboard_tenant_reader.)"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from decimal import Decimal
from pathlib import Path

import httpx
import psycopg
import pytest

from prefixgate.ledger import Ledger
from tests.gateway.dashboard import support_tenants as two
from tests.gateway.dashboard.support_tenants import ADMIN, POLICY, READER
from tests.support_services import empty_postgres_ledger, wait_until
from tests.support_stack import policy_env, running_stack

# The rollup sums that came with tenant rows (gateway_rows, gateway_row_errors) and after them: a ledger written
# before tenant rows has none of them.
LATER_SUMS = ("gateway_rows", "gateway_row_errors", "gateway_row_cache_read", "gateway_row_prompt")
DAY = {"range": "24h"}


@pytest.fixture(params=["sqlite", "postgres"])
def env(request) -> dict[str, str]:
    """The gateway's environment naming the ledger store the dashboard reads (none: its SQLite file)."""
    if request.param == "postgres":
        return {"PREFIXGATE_LEDGER_URL": empty_postgres_ledger(request.getfixturevalue("postgres_url"))}
    return {}


def as_before_tenant_rows(tmp: Path, env: dict[str, str], pruned: tuple[str, ...] = ()) -> None:
    """The ledger file (and Postgres, if `env` names it) as the version before tenant rows left it: rollups without
    tenant-scoped rows nor the later sums; records `pruned` deleted by retention, their hours' rollups kept."""
    with closing(sqlite3.connect(tmp / "ledger.sqlite")) as db, db:
        for table in ("rollups", "rollup_hist"):
            db.execute(f"DELETE FROM {table} WHERE instr(dim, char(31)) > 0")
        for column in LATER_SUMS:
            db.execute(f"ALTER TABLE rollups DROP COLUMN {column}")
        db.executemany("DELETE FROM requests WHERE id = ?", [(i,) for i in pruned])
    if url := env.get("PREFIXGATE_LEDGER_URL"):
        with psycopg.connect(url, autocommit=True) as conn:
            for table in ("prefixgate_rollups", "prefixgate_rollup_hist"):
                conn.execute(f"DELETE FROM {table} WHERE strpos(dim, chr(31)) > 0")
            for column in LATER_SUMS:
                conn.execute(f"ALTER TABLE prefixgate_rollups DROP COLUMN {column}")
            for i in pruned:
                conn.execute("DELETE FROM prefixgate_requests WHERE id = %s", (i,))


def reopen(tmp: Path, env: dict[str, str]) -> None:
    """What a restart does to the ledger: open it (and Postgres) and close it after a last tick of the ledger thread."""
    Ledger(str(tmp / "ledger.sqlite"), ledger_url=env.get("PREFIXGATE_LEDGER_URL", "")).close()


def summary(gw: str, token: str) -> dict:
    got = httpx.get(f"{gw}/api/summary", params=DAY, headers={"authorization": f"Bearer {token}"})
    assert got.status_code == 200, got.text
    return got.json()["totals"]


def assert_acme_sees(gw: str, written: float, requests: int, spend: Decimal, old_hour: tuple[int, Decimal]) -> None:
    """acme's reader: `requests` callers' requests costing `spend` over the day, and in the point holding acme-old
    (three hours before the records were `written`) `old_hour` (requests, spend); the operator's figures stay every
    record's."""
    wait_until(lambda: summary(gw, READER)["requests"] >= requests, 30, "acme's older records in its tenant rows")
    t = summary(gw, READER)
    assert (t["requests"], Decimal(t["spend_usd"])) == (requests, spend)
    points = httpx.get(f"{gw}/api/timeseries", params={**DAY, "step": 3600},
                       headers={"authorization": f"Bearer {READER}"}).json()["points"]
    assert sum(p["requests"] for p in points) == requests
    assert sum(Decimal(p["spend_usd"]) for p in points) == spend
    old = written - 3 * 3600
    hour = next(p for p in points if p["t"] <= old < p["t"] + 3600)
    assert (hour["requests"], Decimal(hour["spend_usd"])) == old_hour
    everyone = summary(gw, ADMIN)
    assert (everyone["requests"], Decimal(everyone["spend_usd"])) == (3 + 6, two.ACME_SPEND + two.BETA_SPEND)


def test_a_tenants_history_from_before_its_rows_is_built_once_from_the_kept_records(tmp_path, env):
    now = time.time()
    two.write_two_tenants(tmp_path, now, env)
    as_before_tenant_rows(tmp_path, env)
    gateway = policy_env(tmp_path, POLICY, PREFIXGATE_ADMIN_TOKEN=ADMIN, **env)
    with running_stack(tmp_path, gateway) as (gw, _):
        # acme-old (3 hours ago, $0.0078), acme-batch and acme-429; the abandoned attempt and the refresh are spend.
        assert_acme_sees(gw, now, two.ACME_REQUESTS, two.ACME_SPEND, (1, Decimal("0.0078")))
        t = summary(gw, READER)
        assert (t["errors"], t["tokens"]) == (1, {"uncached_input": 5000, "cache_read": 4500, "cache_write": 0, "output": 31})
        routes = httpx.get(f"{gw}/api/breakdown", params={**DAY, "by": "route"},
                           headers={"authorization": f"Bearer {READER}"}).json()["rows"]
        assert [(r["name"], r["requests"], Decimal(r["spend_usd"])) for r in routes] == [
            ("chat", 2, Decimal("0.0079")), ("batch", 1, Decimal("0.0016"))]
    reopen(tmp_path, env)
    reopen(tmp_path, env)
    with running_stack(tmp_path, gateway) as (gw, _):
        assert_acme_sees(gw, now, two.ACME_REQUESTS, two.ACME_SPEND, (1, Decimal("0.0078")))


def test_hours_whose_records_retention_deleted_stay_the_operators_alone(tmp_path, env):
    now = time.time()
    two.write_two_tenants(tmp_path, now, env)
    as_before_tenant_rows(tmp_path, env, pruned=("acme-old",))
    with running_stack(tmp_path, policy_env(tmp_path, POLICY, PREFIXGATE_ADMIN_TOKEN=ADMIN, **env)) as (gw, _):
        # acme-old's hour keeps its $0.0078 in the operator's figures; acme's reader has no record to build it from.
        assert_acme_sees(gw, now, two.ACME_REQUESTS - 1, two.ACME_SPEND - Decimal("0.0078"), (0, Decimal(0)))
