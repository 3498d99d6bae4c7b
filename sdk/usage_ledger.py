"""The SDK's in-process ledger: per-request records (the gateway ledger's fields), exact per-route
totals, a summary, the replay trace of what the application sent, and export to the gateway's ledger.

Records are kept in a bounded window (oldest dropped first); totals are never dropped. Every method
is safe to call from any thread while wrapped clients are recording.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from prefixgate.compact_json import compact
from prefixgate.cost import ZERO
from prefixgate.ledger import Ledger as SharedLedger
from prefixgate.ledger import LedgerRecord, failed
from prefixgate.usage import Usage


@dataclass
class Totals:
    requests: int = 0
    errors: int = 0
    unpriced: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: Decimal = ZERO
    without_cache: Decimal = ZERO

    def add(self, rec: LedgerRecord) -> None:
        self.requests += 1
        if failed(rec.status):
            self.errors += 1
            return
        self.usage = self.usage + rec.usage
        if rec.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost += Decimal(rec.cost_usd)
            self.without_cache += Decimal(rec.cost_without_cache_usd or "0")

    def to_dict(self) -> dict[str, Any]:
        u = self.usage
        return {
            "requests": self.requests,
            "errors": self.errors,
            **u.token_counts(),
            # Share of prompt tokens served from a provider cache.
            "hit_rate": u.cache_read / u.input_total if u.input_total else 0.0,
            "cost_usd": self.cost,
            "cost_without_cache_usd": self.without_cache,
            "savings_usd": self.without_cache - self.cost,
            "unpriced_requests": self.unpriced,
        }


@dataclass
class _Entry:
    record: LedgerRecord | None     # None: a trace-only event (a cachedContents call the application made)
    trace: dict | None              # the trace line, with `body` still as the bytes that were sent


class Ledger:
    def __init__(self, max_records: int = 100_000) -> None:
        if not isinstance(max_records, int) or max_records < 1:
            raise ValueError(f"Ledger(max_records=...) must be an integer >= 1, got {max_records!r}")
        self._entries: deque[_Entry] = deque(maxlen=max_records)
        self._totals: dict[str, Totals] = {}
        self._exported: set[str] = set()
        self._lock = threading.Lock()

    # ---- recording (called by wrapped clients) ----------------------------------------------------

    def add(self, record: LedgerRecord | None, trace: dict | None = None) -> None:
        with self._lock:
            self._entries.append(_Entry(record, trace))
            if record is not None:
                self._totals.setdefault(record.route, Totals()).add(record)

    # ---- reading ----------------------------------------------------------------------------------

    @property
    def records(self) -> list[LedgerRecord]:
        """Copies of the records in the window, oldest first."""
        with self._lock:
            return [replace(e.record) for e in self._entries if e.record is not None]

    def summary(self) -> dict[str, Any]:
        """Totals over everything recorded: requests, tokens by class, hit rate, cost, the cost without
        caching and the savings (money as Decimal), overall and per route."""
        with self._lock:
            routes = {name: t.to_dict() for name, t in sorted(self._totals.items())}
            overall = Totals()
            for t in self._totals.values():
                overall.requests += t.requests
                overall.errors += t.errors
                overall.unpriced += t.unpriced
                overall.usage = overall.usage + t.usage
                overall.cost += t.cost
                overall.without_cache += t.without_cache
        return {**overall.to_dict(), "routes": routes}

    def to_trace(self, path: str | Path) -> int:
        """Write what the application sent (before planning) as a replay trace; returns the line count.

        `prefixgate replay PATH` then prices the same traffic under any strategy."""
        with self._lock:
            lines = [e.trace for e in self._entries if e.trace is not None]
        with open(path, "w", encoding="utf-8") as out:
            for line in lines:
                body = json.loads(line["body"]) if line["body"] else {}
                out.write(compact({**line, "body": body}) + "\n")
        return len(lines)

    def export(self, path: str, *, redis_url: str = "") -> int:
        """Append the records not exported yet to the gateway's ledger (its SQLite file, and its Redis
        stream and totals when `redis_url` is set), so the dashboard shows SDK traffic too."""
        with self._lock:
            todo = [e.record for e in self._entries if e.record is not None and e.record.id not in self._exported]
        sink = SharedLedger(str(path), redis_url)
        try:
            for rec in todo:
                sink.append(rec)
        finally:
            sink.close()
        with self._lock:
            self._exported.update(rec.id for rec in todo)
        return len(todo)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._totals.clear()
            self._exported.clear()


# The process's default ledger (`prefixgate.sdk.ledger`): the one piece of global state the SDK keeps.
DEFAULT_LEDGER = Ledger()
