"""Every answer that was not a success counts as an error in the rollups the dashboard reads: a 429, a
caller's hang-up (499) and a 4xx are failures a user saw, not only the gateway's own 5xx."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace

from prefixgate.ledger import Ledger
from tests.core.test_ledger_rollups import record

# (status, counted as an error): docs/dashboard.md's "requests and errors" count every non-200 answer.
STATUSES = [(200, False), (400, True), (401, True), (413, True), (429, True), (499, True), (500, True),
            (502, True), (504, True)]


def test_client_errors_rate_limits_and_hang_ups_are_errors(tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    now = time.time()
    for i, (status, _) in enumerate(STATUSES):
        ledger.append(replace(record(i, now), status=status, route="r"))
    ledger.close()
    db = sqlite3.connect(path)
    try:
        requests, errors = db.execute(
            "SELECT sum(requests), sum(errors) FROM rollups WHERE res = 60 AND dim = 'route' AND name = 'r'").fetchone()
    finally:
        db.close()
    assert requests == len(STATUSES)
    assert errors == sum(1 for _, is_error in STATUSES if is_error) == 8
