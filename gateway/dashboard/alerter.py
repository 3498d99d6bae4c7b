"""The alerter: a background thread that evaluates the alert rules (alert_rules.py) every `interval_s` and
hands each alert that holds to the webhook deliveries (webhooks.py), at most once per `cooldown_s` per rule and
subject. It reads the ledger the dashboard reads and never touches the request path: a rule that cannot be
evaluated (a shared ledger that is down) is logged and tried at the next interval.

Firings are kept in the ledger file's `alert_firings` table (one row per rule and subject: the last time it
was sent), so a restarted gateway keeps its cooldowns and `prefixgate alerts list` shows the last firings.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable

from prefixgate.gateway.dashboard.alert_rules import evaluate
from prefixgate.gateway.dashboard.source import LedgerSource
from prefixgate.gateway.webhooks import Alert, Deliveries
from prefixgate.policies import Policy
from prefixgate.providers.rules import Catalog

log = logging.getLogger("prefixgate.alerts")
FIRINGS = ("CREATE TABLE IF NOT EXISTS alert_firings (rule TEXT, subject TEXT, ts REAL, text TEXT, "
           "PRIMARY KEY (rule, subject))")


def last_firings(path: str) -> list[tuple[str, str, float, str]]:
    """(rule, subject, when last sent, what it said) from a ledger file, newest first."""
    db = sqlite3.connect(path, timeout=5)
    try:
        db.execute(FIRINGS)
        return db.execute("SELECT rule, subject, ts, text FROM alert_firings ORDER BY ts DESC").fetchall()
    finally:
        db.close()


class Alerter:
    def __init__(self, source: LedgerSource, policy: Policy, catalog: Catalog, deliveries: Deliveries,
                 firings_path: str = "", clock: Callable[[], float] = time.time) -> None:
        self.source, self.policy, self.catalog, self.deliveries = source, policy, catalog, deliveries
        self.clock = clock
        self.settings = policy.alerting.settings
        self._db = sqlite3.connect(firings_path, timeout=5, check_same_thread=False) if firings_path else None
        self.last_sent: dict[str, float] = {}
        if self._db is not None:
            self._db.execute(FIRINGS)
            self.last_sent = {f"{r}:{s}": ts for r, s, ts in self._db.execute("SELECT rule, subject, ts FROM alert_firings")}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0         # evaluations the thread has finished

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="prefixgate-alerter", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.deliveries.close()
        if self._db is not None:
            self._db.close()

    def _run(self) -> None:
        while not self._stop.wait(self.settings.interval_s):
            try:
                self.evaluate()
            except Exception as e:  # a ledger that cannot be read now is read at the next interval
                log.warning("alert rules not evaluated: %s", type(e).__name__)
            self.passes += 1

    def evaluate(self, now: float | None = None) -> list[Alert]:
        """One pass: the alerts that hold at `now` (default the clock's) and are out of their cooldown, sent."""
        now = self.clock() if now is None else now
        sent = []
        with self._lock:
            for alert in evaluate(self.source, self.policy, self.catalog, now):
                last = self.last_sent.get(alert.key)
                if last is not None and now - last < self.settings.cooldown_s:
                    continue
                self.last_sent[alert.key] = now
                if self._db is not None:
                    self._db.execute("INSERT OR REPLACE INTO alert_firings VALUES (?, ?, ?, ?)",
                                     (alert.rule, alert.subject, now, alert.text))
                    self._db.commit()
                self.deliveries.send(alert)
                sent.append(alert)
        return sent
