"""The ledger's rollups equal a scan of its raw records exactly (requests, tokens, picodollars), after
restarts and after kill -9 mid-write; retention prunes in the background and bounds the file."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from decimal import Decimal

from prefixgate.ledger import Ledger, LedgerRecord, Retention, read_records
from tests.support_services import wait_until

NOW = time.time()


def record(i: int, ts: float, body: str = "") -> LedgerRecord:
    # Prices with 1e-12 dollar digits: float sums would drift; the rollups must not.
    cost = Decimal(i % 97 + 1) * Decimal("0.000001234567")
    return LedgerRecord(id=f"r{i}", ts=ts, route=f"route{i % 3}", model=f"m{i % 2}", key=f"k{i % 5}", target="t",
                        provider="anthropic", status=200 if i % 11 else 502, uncached_input=i % 50, cache_read=i % 7,
                        cache_writes={"5m": i % 4}, output=i % 13, cost_usd=str(cost), cost_without_cache_usd=str(cost * 2),
                        savings_usd=str(cost), latency_ms=float(i % 300), ttft_ms=float(i % 40) if i % 2 else None, body=body)


def raw_scan(path: str) -> dict[tuple, list[int]]:
    """(route, hour) -> [requests, errors, cache_read, cache_write, spend in picodollars], from the raw rows."""
    out: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for r in read_records(path):
        s = out[(r["route"], int(r["ts"] // 3600) * 3600)]
        s[0] += 1
        s[1] += r["status"] != 200
        s[2] += r["cache_read"]
        s[3] += sum(r["cache_writes"].values())
        s[4] += int(Decimal(r["cost_usd"]) * 10**12)
    return dict(out)


def rolled_up(path: str, res: int, dim: str = "route") -> dict[tuple, list[int]]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT name, bucket / 3600 * 3600, sum(requests), sum(errors), sum(cache_read), "
                          "sum(cache_write), sum(spend_pico) FROM rollups WHERE res = ? AND dim = ? GROUP BY 1, 2",
                          (res, dim)).fetchall()
    finally:
        db.close()
    return {(route, hour): list(sums) for route, hour, *sums in rows}


def assert_rollups_match(path: str) -> None:
    raw = raw_scan(path)
    assert raw
    for res in (60, 3600):
        assert rolled_up(path, res) == raw
        # The rows of every other dimension, and those summing all records, add up to the same totals.
        totals = [sum(v[i] for v in raw.values()) for i in range(5)]
        for dim in ("", "model", "key", "target", "provider", "tenant"):
            assert [sum(v[i] for v in rolled_up(path, res, dim).values()) for i in range(5)] == totals


def test_rollups_equal_a_raw_scan_after_restarts(tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    for start in (0, 3000, 6000):
        ledger = Ledger(path)
        for i in range(start, start + 3000):
            ledger.append(record(i, NOW - 7200 + i))
        ledger.close()
        assert_rollups_match(path)
    # A repeated id (an SDK export run twice) is neither stored nor rolled up twice.
    ledger = Ledger(path)
    ledger.append(record(5, NOW))
    ledger.close()
    assert len(read_records(path)) == 9000
    assert_rollups_match(path)


WRITER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.core.test_ledger_rollups import record
from prefixgate.ledger import Ledger
ledger = Ledger({path!r})
i = {start}
while True:
    ledger.append(record(i, time.time() - 600 + (i % 1200)))
    i += 1
    if i % 500 == 0:
        print(i, flush=True)
"""


def test_rollups_equal_a_raw_scan_after_kill_9_mid_write(tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for kill in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER.format(root=root, path=path, start=kill * 1_000_000)],
                                stdout=subprocess.PIPE, text=True)
        # Killed while appending and while its ledger thread rolls up (every 50 ms), at a different point each time.
        for _ in range(2 + kill):
            assert proc.stdout.readline(), "the writer died"
        time.sleep(0.013 * kill)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    # Opening the ledger rolls up what the killed writers committed but had not rolled up yet.
    Ledger(path).close()
    assert len(read_records(path)) >= 4 * 1000
    assert_rollups_match(path)


def test_retention_prunes_in_the_background_and_bounds_the_file(tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    clock = [NOW]
    ledger = Ledger(path, retention=Retention(records_s=3600, rollups_s=4 * 3600, every_s=0.05), clock=lambda: clock[0])
    sizes, i = [], 0
    for _hour in range(12):           # twelve simulated hours of traffic, the clock moving with it
        for _ in range(1500):
            ledger.append(record(i, clock[0], body="x" * 400))
            clock[0] += 2.4
            i += 1
        wait_until(lambda: _oldest(path) >= clock[0] - 3600 - 60, 20, "the background prune")
        sizes.append(os.path.getsize(path))
    ledger.close()
    # About an hour of raw records stays; the file (checkpointed pages) stops growing once retention applies.
    assert 1400 <= len(read_records(path)) <= 1600
    assert max(sizes[5:]) <= 1.3 * sizes[3], sizes
    db = sqlite3.connect(path)
    # The minutes of keys and routes (what budgets and keep-alive's caps restart from) are kept a month, as long as the
    # hours here; the rest as long as records.
    oldest_minute, oldest_hour = (db.execute(f"SELECT min(bucket) FROM rollups WHERE res = {r} AND dim NOT IN ('key', 'route')"
                                             ).fetchone()[0] for r in (60, 3600))
    kept_minute = db.execute("SELECT min(bucket) FROM rollups WHERE res = 60 AND dim = 'key'").fetchone()[0]
    db.close()
    assert oldest_minute >= clock[0] - 3600 - 60
    assert clock[0] - 4 * 3600 - 60 <= kept_minute < clock[0] - 3 * 3600
    assert clock[0] - 4 * 3600 - 3600 <= oldest_hour < clock[0] - 3 * 3600


def _oldest(path: str) -> float:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT min(ts) FROM requests").fetchone()[0] or 0.0
    finally:
        db.close()


def test_spend_that_exists_only_because_of_caching_has_no_counterfactual_spend(tmp_path):
    """A keep-alive refresh or an explicit cache's storage would not be sent without caching: its row's
    counterfactual is an explicit $0 and its saving minus its cost, and the rollups keep them so; a row priced from
    the provider's report alone has no counterfactual (None) and counts as costing the same without caching."""
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    ledger.append(LedgerRecord(id="refresh", ts=NOW, route="kept", status=200, cache_read=7900, cost_usd="0.00079",
                               cost_without_cache_usd="0", savings_usd="-0.00079", kind="keepalive"))
    ledger.append(LedgerRecord(id="reported", ts=NOW, route="reported", status=200, uncached_input=100,
                               cost_usd="0.0002", provider_cost_usd="0.0002"))
    ledger.close()
    db = sqlite3.connect(path)
    try:
        rows = dict((name, (spend, without, saved)) for name, spend, without, saved in db.execute(
            "SELECT name, sum(spend_pico), sum(without_cache_pico), sum(savings_pico) FROM rollups "
            "WHERE res = 3600 AND dim = 'route' GROUP BY 1"))
    finally:
        db.close()
    assert rows["kept"] == (790_000_000, 0, -790_000_000)
    assert rows["reported"] == (200_000_000, 200_000_000, 0)
