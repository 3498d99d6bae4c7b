"""The ledger's background thread rolls records up, copies them to the shared stores and prunes them; nothing
restarts it. A chore that fails once (here a roll-up that raises, as one no rollup could hold would) is logged and
tried again at the next tick: it must not end the thread, or every later record would never be rolled up, copied
or pruned."""

from __future__ import annotations

import sqlite3
import time

from prefixgate import ledger as ledger_module
from prefixgate import ledger_rollup
from prefixgate.ledger import Ledger, LedgerRecord
from tests.support_services import wait_until


def test_a_roll_up_that_fails_once_is_tried_again_and_the_thread_goes_on(tmp_path, monkeypatch, caplog):
    real, failed = ledger_rollup.roll_up, []

    def fails_once(*args, **kwargs):  # noqa: ANN002, ANN003 - roll_up's own arguments
        if not failed:
            failed.append(True)
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        return real(*args, **kwargs)

    monkeypatch.setattr(ledger_module.rollup, "roll_up", fails_once)
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    try:
        ledger.append(LedgerRecord(id="a", ts=time.time(), route="r", uncached_input=3, cost_usd="0.000003"))
        wait_until(lambda: bool(failed), 10, "the roll-up to fail once")
        ledger.append(LedgerRecord(id="b", ts=time.time(), route="r", uncached_input=4, cost_usd="0.000004"))

        def rolled_up() -> int:
            db = sqlite3.connect(path)
            try:
                return ledger_rollup.cursor(db)
            finally:
                db.close()

        wait_until(lambda: rolled_up() == 2, 10, "both records rolled up after the failure")
        assert ledger._thread.is_alive()
        assert "ledger: rolling up failed" in caplog.text
    finally:
        ledger.close()
