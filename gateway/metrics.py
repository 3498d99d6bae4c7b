"""Prometheus metrics, one registry per app (so several apps in one process never collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from prefixgate.ledger import LedgerRecord

LABELS = ("route", "target", "model")
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
OVERHEAD_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1)
# Model names come from callers (a `gpt-*` route forwards whatever name it is sent), and every new
# label set is memory held for the life of the process: past this many, new models count as "other".
MAX_SERIES = 1000


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("prefixgate_requests", "Requests by outcome", (*LABELS, "status"), registry=r)
        self.tokens = Counter("prefixgate_tokens", "Prompt and output tokens by class", (*LABELS, "kind"), registry=r)
        self.cost = Counter("prefixgate_cost_usd", "Spend in USD", LABELS, registry=r)
        self.savings = Counter("prefixgate_savings_usd", "USD saved by caching versus no caching", LABELS, registry=r)
        self.hit_ratio = Gauge("prefixgate_cache_hit_ratio", "Cache-read share of prompt tokens so far", LABELS, registry=r)
        self.latency = Histogram("prefixgate_latency_seconds", "End-to-end latency", LABELS, buckets=LATENCY_BUCKETS, registry=r)
        self.ttft = Histogram("prefixgate_ttft_seconds", "Time to first streamed byte", LABELS, buckets=LATENCY_BUCKETS, registry=r)
        self.overhead = Histogram("prefixgate_overhead_seconds", "Time spent in the gateway itself",
                                  buckets=OVERHEAD_BUCKETS, registry=r)
        self.attempts = Counter("prefixgate_upstream_attempts", "Upstream attempts by outcome", ("target", "outcome"), registry=r)
        self._prompt: dict[tuple, list[int]] = {}

    def observe(self, rec: LedgerRecord) -> None:
        labels = (rec.route, rec.target, rec.model)
        if labels not in self._prompt and len(self._prompt) >= MAX_SERIES:
            labels = (rec.route, rec.target, "other")
        self.requests.labels(*labels, str(rec.status)).inc()
        writes = sum(rec.cache_writes.values())
        for kind, n in (("uncached_input", rec.uncached_input), ("cache_read", rec.cache_read),
                        ("cache_write", writes), ("output", rec.output)):
            if n:
                self.tokens.labels(*labels, kind).inc(n)
        if rec.cost_usd is not None:
            self.cost.labels(*labels).inc(float(rec.cost_usd))
            saved = float(rec.savings_usd or 0)
            if saved > 0:
                self.savings.labels(*labels).inc(saved)
        totals = self._prompt.setdefault(labels, [0, 0])
        totals[0] += rec.cache_read
        totals[1] += rec.uncached_input + rec.cache_read + writes
        if totals[1]:
            self.hit_ratio.labels(*labels).set(totals[0] / totals[1])
        self.latency.labels(*labels).observe(rec.latency_ms / 1000)
        if rec.ttft_ms is not None:
            self.ttft.labels(*labels).observe(rec.ttft_ms / 1000)
        self.overhead.observe(rec.overhead_ms / 1000)

    def render(self) -> bytes:
        return generate_latest(self.registry)
