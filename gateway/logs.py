"""Structured logs: one JSON line per request, built from the ledger record (which holds no secrets:
no headers, no keys, no prompt text), plus a JSON formatter for the gateway's other messages."""

from __future__ import annotations

import json
import logging

from prefixgate.ledger import LedgerRecord

REQUESTS = logging.getLogger("prefixgate.requests")
FIELDS = ("id", "key", "tenant", "route", "target", "model", "dialect", "stream", "status", "uncached_input",
          "cache_read", "cache_writes", "output", "cost_usd", "savings_usd", "latency_ms", "ttft_ms", "overhead_ms", "attempts",
          "plan_summary", "miss_reason", "error", "response_cache")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                "msg": record.getMessage()}
        line.update(getattr(record, "fields", {}))
        return json.dumps(line, separators=(",", ":"), default=str)


def configure(level: str) -> None:
    """Send prefixgate's logs to stderr as JSON lines (idempotent)."""
    root = logging.getLogger("prefixgate")
    root.setLevel(level.upper())
    if not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        root.addHandler(handler)
        root.propagate = False


def log_request(rec: LedgerRecord) -> None:
    if not REQUESTS.isEnabledFor(logging.INFO):
        return
    fields = {k: getattr(rec, k) for k in FIELDS}
    fields["latency_ms"] = round(rec.latency_ms, 3)
    fields["overhead_ms"] = round(rec.overhead_ms, 3)
    REQUESTS.info("request", extra={"fields": fields})
