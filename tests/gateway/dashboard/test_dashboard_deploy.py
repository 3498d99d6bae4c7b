"""The shipped Prometheus rules and Grafana dashboard: valid files whose queries name only metrics the
gateway (and the local backend) actually export, with the alerts the issue asks for."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from prefixgate.gateway.dashboard.alerts import AlertCollector
from prefixgate.gateway.dashboard.source import SqliteSource
from prefixgate.gateway.metrics import Metrics
from prefixgate.ledger import Ledger, LedgerRecord
from prefixgate.local_backend.frontend import local_target
from tests.support_services import ServerThread

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
NAME = re.compile(r"\bprefixgate_[a-z0-9_]+")


def gateway_names() -> set[str]:
    metrics = Metrics()
    with tempfile.TemporaryDirectory() as tmp:
        # A ledger with a record in the alert window and one in the baseline before it (every gauge has a value).
        ledger = Ledger(f"{tmp}/ledger.sqlite")
        for dt in (1000, 1):
            ledger.append(LedgerRecord(id=f"x{dt}", ts=time.time() - dt, route="r", uncached_input=10, cache_read=90))
        ledger.close()
        metrics.registry.register(AlertCollector(SqliteSource(f"{tmp}/ledger.sqlite")))
        metrics.include_local(local_target("unloaded"))  # its status (the engine's series come from backend_names)
        metrics.observe(LedgerRecord(id="x", ts=0, route="r", target="t", model="m", uncached_input=5, cache_read=5,
                                     cache_writes={"5m": 1}, output=1, cost_usd="1", savings_usd="0.5", ttft_ms=5.0))
        return exported(metrics.render().decode())


def exported(text: str) -> set[str]:
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line and not line.startswith("#")}


@functools.cache
def backend_names() -> set[str]:
    """What a live local backend's /metrics exports after one request (a tiny random-weight model)."""
    from prefixgate.local_backend.async_engine import AsyncEngine
    from prefixgate.local_backend.config import EngineConfig
    from prefixgate.local_backend.engine import LLMEngine
    from prefixgate.local_backend.server import create_app as backend_app
    from tests.local_backend.support_tiny import tiny_llama

    engine = AsyncEngine(LLMEngine(EngineConfig(model="tiny-llama"), tiny_llama()[0]))
    with ServerThread(backend_app(engine)) as server:
        r = httpx.post(server.url + "/v1/completions", json={"model": "tiny-llama", "prompt": "hello", "max_tokens": 2})
        assert r.status_code == 200, r.text
        return exported(httpx.get(server.url + "/metrics").text)


def promtool(*args: str) -> None:
    """Prometheus' promtool (Debian's prometheus package, installed by `make services`), which must succeed."""
    binary = shutil.which("promtool")
    assert binary, "promtool is not on PATH: `make services` installs it (Debian package prometheus)"
    run = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def check_names(exprs: list[str]) -> set[str]:
    known = gateway_names() | backend_names()
    used = {name for expr in exprs for name in NAME.findall(expr)}
    assert used and used <= known, sorted(used - known)
    for expr in exprs:
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), expr
    return used


def test_prometheus_rules_cover_the_issues_alerts_with_real_metric_names():
    # Prometheus' own check: the file loads, every expression parses, every annotation template compiles.
    promtool("check", "rules", str(DEPLOY / "prometheus" / "prefixgate-rules.yml"))
    doc = yaml.safe_load((DEPLOY / "prometheus" / "prefixgate-rules.yml").read_text())
    rules = [r for group in doc["groups"] for r in group["rules"]]
    alerts = {r["alert"]: r for r in rules if "alert" in r}
    records = {r["record"] for r in rules if "record" in r}
    assert {"PrefixgateRouteHitRateDropped", "PrefixgateRouteHitRateFalling", "PrefixgateHitRateBelowTarget",
            "PrefixgateTTFTP95AboveBaseline", "PrefixgateLocalKVCacheNearlyFull", "PrefixgateLocalQueueDepth",
            "PrefixgateLocalBackendFailed"} <= set(alerts)
    for rule in alerts.values():
        assert rule["annotations"]["summary"] and rule["labels"]["severity"] and re.fullmatch(r"\d+m", rule["for"])
    used = check_names([r["expr"] for r in rules])
    assert "prefixgate_route_hit_rate_drop_alert" in used and "prefixgate_backend_kv_cache_usage_perc" in used
    # Recording rules used by alerts are defined here.
    for rule in alerts.values():
        for name in re.findall(r"prefixgate:[a-z0-9_:]+", rule["expr"]):
            assert name in records, name
    assert "0.9" in alerts["PrefixgateLocalKVCacheNearlyFull"]["expr"]
    assert "2 *" in alerts["PrefixgateTTFTP95AboveBaseline"]["expr"]


def test_grafana_dashboard_is_importable_and_queries_real_metrics():
    dash = json.loads((DEPLOY / "grafana" / "prefixgate-dashboard.json").read_text())
    assert dash["__inputs"][0]["name"] == "DS_PROMETHEUS" and dash["uid"]
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells and g["x"] + g["w"] <= 24, p["title"]   # no overlapping panels
        cells |= mine
        assert p["targets"] and all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for t in p["targets"])
    used = check_names([t["expr"] for p in panels for t in p["targets"]])
    assert {"prefixgate_cost_usd_total", "prefixgate_savings_usd_total", "prefixgate_backend_num_requests_waiting"} <= used


def test_the_request_counter_counts_callers_requests_and_the_gateways_own_rows_only_as_spend():
    # One caller's request that succeeded on its second attempt, and a keep-alive refresh: what the upstream-errors
    # rule divides is 1 request and 0 errors, not 3 and 1 (a 33% error rate); the cost counter has all three.
    metrics = Metrics()
    row = dict(route="chat", target="openai", model="gpt-5.4", uncached_input=1000)
    metrics.observe(LedgerRecord(id="q-1", ts=0, status=504, kind="abandoned_attempt", cost_usd="0.004", **row))
    metrics.observe(LedgerRecord(id="q", ts=1, cost_usd="0.01", **row))
    metrics.observe(LedgerRecord(id="ka", ts=2, kind="keepalive", cost_usd="0.001", **row))
    samples = {(s.name, s.labels.get("status") or s.labels.get("kind")): s.value
               for family in text_string_to_metric_families(metrics.render().decode()) for s in family.samples}
    assert samples[("prefixgate_requests_total", "200")] == 1
    assert ("prefixgate_requests_total", "504") not in samples
    assert samples[("prefixgate_cost_usd_total", None)] == pytest.approx(0.015)
    assert samples[("prefixgate_tokens_total", "uncached_input")] == 3000
