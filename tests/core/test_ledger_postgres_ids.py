"""A record id that reaches the fleet's Postgres from two replicas' files (SDK records exported into both)
is one request: stored once and rolled up once, so fleet spend is not counted twice."""

from __future__ import annotations

import psycopg

from prefixgate.ledger import Ledger, LedgerRecord
from tests.support_services import empty_postgres_ledger

PICO = 10**12


def test_an_id_in_two_replicas_files_counts_once_in_fleet_spend(tmp_path, postgres_url):
    shared = empty_postgres_ledger(postgres_url)
    for replica in ("a", "b"):
        ledger = Ledger(str(tmp_path / f"{replica}.sqlite"), ledger_url=shared, clock=lambda: 1e9 + 60)
        # The same SDK export in both files, and one request of the replica's own.
        for i in range(5):
            ledger.append(LedgerRecord(id=f"sdk-{i}", ts=1e9 + i, route="r", cost_usd="0.000100000000", uncached_input=10))
        ledger.append(LedgerRecord(id=f"own-{replica}", ts=1e9 + 9, route="r", cost_usd="0.000000000007", uncached_input=1))
        ledger.close()
    with psycopg.connect(shared) as conn:
        records = conn.execute("SELECT count(*) FROM prefixgate_requests").fetchone()[0]
        requests, spend = conn.execute("SELECT sum(requests), sum(spend_pico) FROM prefixgate_rollups "
                                       "WHERE res = 3600 AND dim = ''").fetchone()
    assert records == requests == 7
    assert spend == 5 * 100_000_000 + 2 * 7     # picodollars: five shared records once, two own records


def test_a_record_without_an_id_is_copied_and_holds_up_nothing(tmp_path, postgres_url):
    """The file's id column allows NULL (a record an SDK caller built without one); Postgres's does not, so the batch
    holding it failed at every try and no later record reached the fleet's ledger."""
    shared = empty_postgres_ledger(postgres_url)
    ledger = Ledger(str(tmp_path / "a.sqlite"), ledger_url=shared, clock=lambda: 1e9 + 60)
    ledger.append(LedgerRecord(id=None, ts=1e9, route="r", cost_usd="0.000000000003", uncached_input=1))  # type: ignore[arg-type]
    ledger.append(LedgerRecord(id="after", ts=1e9 + 1, route="r", cost_usd="0.000000000004", uncached_input=1))
    ledger.close()
    with psycopg.connect(shared) as conn:
        records = conn.execute("SELECT count(*) FROM prefixgate_requests").fetchone()[0]
        requests, spend = conn.execute("SELECT sum(requests), sum(spend_pico) FROM prefixgate_rollups "
                                       "WHERE res = 3600 AND dim = ''").fetchone()
    assert records == requests == 2
    assert spend == 3 + 4
