"""Prometheus metrics for the engine, named after vLLM's so existing dashboards read them."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from prefixgate.local_backend.engine import IterationStats, LLMEngine
from prefixgate.local_backend.kv_events import KVEventPublisher

PREFIX = "prefixgate_backend_"
TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
ITL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0)


class EngineMetrics:
    """Counters and histograms fed after every step; gauges read the engine when scraped."""

    def __init__(self, engine: LLMEngine, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        model = engine.config.model_name
        r, lbl = self.registry, ["model_name"]

        def counter(name: str, doc: str) -> Counter:
            return Counter(PREFIX + name, doc, lbl, registry=r).labels(model)

        self.prompt_tokens = counter("prompt_tokens", "Prompt tokens of admitted requests.")
        self.generation_tokens = counter("generation_tokens", "Generated tokens.")
        self.prefix_cache_queries = counter("prefix_cache_queries", "Prompt tokens looked up in the prefix cache.")
        self.prefix_cache_hits = counter("prefix_cache_hits", "Prompt tokens found in the prefix cache.")
        self.preemptions = counter("num_preemptions", "Requests preempted (recomputed later) for lack of KV blocks.")
        self.draft_tokens = counter("spec_decode_num_draft_tokens", "Speculated tokens verified.")
        self.accepted_tokens = counter("spec_decode_num_accepted_tokens", "Speculated tokens accepted.")
        self.requests = Counter(PREFIX + "request_success", "Finished requests by finish reason.",
                                ["model_name", "finished_reason"], registry=r)
        self.ttft = Histogram(PREFIX + "time_to_first_token_seconds", "Time to first token.", lbl,
                              buckets=TTFT_BUCKETS, registry=r).labels(model)
        self.itl = Histogram(PREFIX + "inter_token_latency_seconds", "Time between a request's tokens.", lbl,
                             buckets=ITL_BUCKETS, registry=r).labels(model)
        kv, sched = engine.kv, engine.scheduler
        gauges = {
            "kv_blocks_in_use": ("KV cache blocks held by requests.", lambda: kv.num_used_blocks),
            "kv_blocks_total": ("KV cache blocks in the pool.", lambda: kv.pool.num_blocks),
            "kv_cache_usage_perc": ("Fraction of KV blocks in use.",
                                    lambda: kv.num_used_blocks / kv.pool.num_blocks),
            "num_requests_running": ("Requests being computed.", lambda: len(sched.running)),
            "num_requests_waiting": ("Requests waiting to be admitted.", lambda: len(sched.waiting)),
        }
        for name, (doc, read) in gauges.items():
            Gauge(PREFIX + name, doc, lbl, registry=r).labels(model).set_function(read)
        self._model = model
        self._seen_queries = self._seen_hits = 0
        if engine.kv_events is not None:
            r.register(_KVEventCounts(engine.kv_events, model))

    def observe(self, stats: IterationStats, engine: LLMEngine) -> None:
        self.prompt_tokens.inc(stats.num_prompt_tokens)
        self.generation_tokens.inc(stats.num_generation_tokens)
        self.preemptions.inc(stats.num_preemptions)
        self.draft_tokens.inc(stats.num_draft_tokens)
        self.accepted_tokens.inc(stats.num_accepted_tokens)
        for t in stats.time_to_first_token:
            self.ttft.observe(t)
        for t in stats.inter_token_latency:
            self.itl.observe(t)
        for reason in stats.finished_reasons:
            self.requests.labels(self._model, reason).inc()
        cache = engine.kv.stats
        self.prefix_cache_queries.inc(cache.queries - self._seen_queries)
        self.prefix_cache_hits.inc(cache.hits - self._seen_hits)
        self._seen_queries, self._seen_hits = cache.queries, cache.hits


class _KVEventCounts(Collector):
    """The publisher's own counts, read when scraped (drops happen on the engine thread, between steps too)."""

    def __init__(self, publisher: KVEventPublisher, model: str) -> None:
        self.publisher, self.model = publisher, model

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        p = self.publisher
        for name, doc, value in (
                ("kv_events_published_batches", "KV event batches sent on the PUB socket.", p.published),
                ("kv_events_dropped_batches", "KV event batches dropped because the publish queue was full "
                                              "(subscribers see a sequence gap).", p.dropped)):
            family = CounterMetricFamily(PREFIX + name, doc, labels=["model_name"])
            family.add_metric([self.model], value)
            yield family
        queued = GaugeMetricFamily(PREFIX + "kv_events_queued_batches", "KV event batches waiting to be sent.",
                                   labels=["model_name"])
        queued.add_metric([self.model], p.queued)
        yield queued
