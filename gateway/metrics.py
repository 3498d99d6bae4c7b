"""Prometheus metrics, one registry per app (so several apps in one process never collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from prefixgate.ledger import LedgerRecord
from prefixgate.reuse import Store
from prefixgate.reuse.memo import STORE

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
        self.requests = Counter("prefixgate_requests", "Callers' requests by outcome (not the gateway's own rows)",
                                (*LABELS, "status"), registry=r)
        self.tokens = Counter("prefixgate_tokens", "Prompt and output tokens by class", (*LABELS, "kind"), registry=r)
        # What a hit rate divides: prefixgate_tokens less the gateway's own rows (a refresh reads the whole prefix).
        self.caller_tokens = Counter("prefixgate_caller_prompt_tokens", "Callers' prompt tokens by class (not the "
                                     "gateway's own rows, such as keep-alive refreshes)", (*LABELS, "kind"), registry=r)
        self.cost = Counter("prefixgate_cost_usd", "Spend in USD", LABELS, registry=r)
        self.savings = Counter("prefixgate_savings_usd", "USD saved by caching versus no caching", LABELS, registry=r)
        self.hit_ratio = Gauge("prefixgate_cache_hit_ratio", "Cache-read share of callers' prompt tokens so far", LABELS, registry=r)
        self.latency = Histogram("prefixgate_latency_seconds", "End-to-end latency", LABELS, buckets=LATENCY_BUCKETS, registry=r)
        self.ttft = Histogram("prefixgate_ttft_seconds", "Time to first streamed byte", LABELS, buckets=LATENCY_BUCKETS, registry=r)
        self.overhead = Histogram("prefixgate_overhead_seconds", "Time spent in the gateway itself",
                                  buckets=OVERHEAD_BUCKETS, registry=r)
        self.attempts = Counter("prefixgate_upstream_attempts", "Upstream attempts by outcome", ("target", "outcome"), registry=r)
        # Pushed alerts (webhooks.py): destination is its scheme and host only (the URL holds the hook's secret).
        self.alert_deliveries = Counter("prefixgate_alert_deliveries", "Alert deliveries by outcome: delivered, failed, dropped",
                                        ("destination", "rule", "outcome"), registry=r)
        self.credited = Counter("prefixgate_cost_credited_usd", "Spend given back (an explicit cache deleted before the "
                                "TTL its creation paid storage for)", LABELS, registry=r)
        self.flips = Counter("prefixgate_route_flips", "Prefixes answered by a target where they were cold, by reason",
                             ("route", "reason"), registry=r)
        self.flip_cost = Counter("prefixgate_route_flip_cost_usd", "USD spent writing flipped prefixes again", ("route",),
                                 registry=r)
        self._children: dict[tuple[str, str, str], _Children] = {}
        r.register(MemoCollector(STORE))

    def include_local(self, local: object | None) -> None:
        """The in-process local backend's target, if it is a collector (local_backend's InProcessTarget): its status
        and, once loaded, the engine's own `prefixgate_backend_*` metrics, read at each scrape."""
        if callable(getattr(local, "collect", None)):
            self.registry.register(local)  # a Collector by its collect()

    def observe(self, rec: LedgerRecord) -> None:
        labels = (rec.route, rec.target, rec.model)
        child = self._children.get(labels)
        if child is None and len(self._children) >= MAX_SERIES:
            # A route that forwards any model name a caller sends must not grow series without bound.
            labels = (rec.route, rec.target, "other")
            child = self._children.get(labels)
        if child is None:
            # labels() hashes and locks on every call; a route's children are looked up once.
            child = self._children[labels] = _Children(self, labels)
        writes = sum(rec.cache_writes.values())
        prompt = (("uncached_input", rec.uncached_input), ("cache_read", rec.cache_read), ("cache_write", writes))
        for kind, n in (*prompt, ("output", rec.output)):
            if n:
                child.tokens[kind].inc(n)
        if rec.cost_usd is not None and rec.cost_usd.startswith("-"):
            child.credited.inc(-float(rec.cost_usd))
        elif rec.cost_usd is not None:
            child.cost.inc(float(rec.cost_usd))
            saved = float(rec.savings_usd or 0)
            if saved > 0:
                child.savings.inc(saved)
        if rec.flip:
            self.flips.labels(rec.route, rec.flip).inc()
            if rec.flip_cost_usd is not None:
                self.flip_cost.labels(rec.route).inc(float(rec.flip_cost_usd))
        if rec.kind:
            # The gateway's own rows (a keep-alive refresh, an abandoned attempt, an explicit cache's upkeep) are spend
            # and tokens like any, as on the dashboard; they are neither a caller's request, its hit rate nor its latency.
            return
        for kind, n in prompt:
            if n:
                child.caller_tokens[kind].inc(n)
        child.prompt[0] += rec.cache_read
        child.prompt[1] += rec.uncached_input + rec.cache_read + writes
        if child.prompt[1]:
            child.hit_ratio.set(child.prompt[0] / child.prompt[1])
        child.requests(str(rec.status)).inc()
        child.latency.observe(rec.latency_ms / 1000)
        if rec.ttft_ms is not None:
            child.ttft.observe(rec.ttft_ms / 1000)
        self.overhead.observe(rec.overhead_ms / 1000)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Children:
    """One (route, target, model)'s metric children, resolved once."""

    def __init__(self, m: Metrics, labels: tuple[str, str, str]) -> None:
        self._requests, self._by_status = m.requests, {}
        self.labels = labels
        self.tokens = {k: m.tokens.labels(*labels, k) for k in ("uncached_input", "cache_read", "cache_write", "output")}
        self.caller_tokens = {k: m.caller_tokens.labels(*labels, k) for k in ("uncached_input", "cache_read", "cache_write")}
        self.cost, self.savings, self.credited = m.cost.labels(*labels), m.savings.labels(*labels), m.credited.labels(*labels)
        self.hit_ratio = m.hit_ratio.labels(*labels)
        self.latency, self.ttft = m.latency.labels(*labels), m.ttft.labels(*labels)
        self.prompt = [0, 0]

    def requests(self, status: str) -> Counter:
        child = self._by_status.get(status)
        if child is None:
            child = self._by_status[status] = self._requests.labels(*self.labels, status)
        return child


class MemoCollector(Collector):
    """The reuse store's memos (`prefixgate.reuse`), read at each scrape: `prefixgate_memo_*` by memo, and the
    store's bound."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self):  # noqa: ANN201 -- prometheus_client's collector protocol
        memos = list(self.store.memos.values())
        families = []
        for name, doc in (("hits", "Lookups answered from the memo"), ("misses", "Lookups the memo could not answer"),
                          ("evictions", "Entries evicted for space (least recently used first, across memos)")):
            family = CounterMetricFamily(f"prefixgate_memo_{name}", doc, labels=("memo",))
            for m in memos:
                family.add_metric((m.name,), getattr(m, name))
            families.append(family)
        for name, doc in (("bytes", "Bytes the memo's entries hold (parsed objects counted)"),
                          ("entries", "Entries in the memo")):
            family = GaugeMetricFamily(f"prefixgate_memo_{name}", doc, labels=("memo",))
            for m in memos:
                family.add_metric((m.name,), getattr(m, name))
            families.append(family)
        families.append(GaugeMetricFamily("prefixgate_memo_bound_bytes", "The reuse store's bound (resent_bodies_mb)",
                                          value=self.store.max_bytes))
        return families
