"""Records with odd content reach the fleet's Postgres and do not stop the copy: Postgres text cannot hold NUL
(a DataError on every retry, so every later record of the replica waited behind it for good); NUL is stored as
U+FFFD, and long, non-BMP and JSON-escaped text arrives intact."""

from __future__ import annotations

import json
import time

import psycopg

from prefixgate.ledger import Ledger, LedgerRecord, read_records
from prefixgate.ledger_postgres import PostgresSync
from tests.support_services import empty_postgres_ledger


def test_nul_and_odd_text_copy_and_do_not_block_later_records(tmp_path, postgres_url):
    shared = empty_postgres_ledger(postgres_url)
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    now = time.time()
    records = [
        LedgerRecord(id="nul", ts=now, route="r\x00oute", model="gpt-5.4\x00", error="bad\x00", explanation=["a\x00b"],
                     cost_usd="0.000002"),
        LedgerRecord(id="long", ts=now, route="r", explanation=["x" * 1_000_000], cost_usd="0.000003"),
        LedgerRecord(id="astral", ts=now, route="r\U0001F600", model="\U0001D52A", explanation=["\U0001F600"],
                     cost_usd="0.000005"),
        LedgerRecord(id="after", ts=now, route="r", cost_usd="0.000007"),
    ]
    for r in records:
        ledger.append(r)
    ledger.close()
    sync = PostgresSync(shared, path)
    try:
        for _ in range(3):
            sync.push(final=True)
    finally:
        sync.close()
    assert sync.failures == 0
    local = {r["id"]: r for r in read_records(path)}
    with psycopg.connect(shared) as conn:
        rows = {r[0]: r[1:] for r in conn.execute("SELECT id, route, model, error, explanation FROM prefixgate_requests")}
        requests, spend = conn.execute("SELECT sum(requests), sum(spend_pico) FROM prefixgate_rollups "
                                       "WHERE res = 3600 AND dim = ''").fetchone()
    assert sorted(rows) == sorted(local)
    assert rows["nul"][:3] == ("r\ufffdoute", "gpt-5.4\ufffd", "bad\ufffd")
    assert '"a\\u0000b"' in rows["nul"][3]                      # JSON columns keep it, escaped
    assert len(rows["long"][3]) > 1_000_000
    assert rows["astral"][:2] == ("r\U0001F600", "\U0001D52A") and json.loads(rows["astral"][3]) == ["\U0001F600"]
    assert requests == 4 and spend == (2 + 3 + 5 + 7) * 10**6
