"""The shipped local-backend status alert and Grafana panel, evaluated by Prometheus' own rule engine (`promtool
test rules`) on what real gateways' /metrics serve: one whose local model failed to load, one that loaded the tiny
model, and one whose model has not loaded yet (read before its start; the gateway only listens once it is done)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from prefixgate.gateway.metrics import Metrics
from prefixgate.local_backend.frontend import local_target
from tests.gateway.dashboard.test_dashboard_deploy import DEPLOY, promtool
from tests.gateway.test_gateway_local_metrics import OPTIONS, gateway, tiny_folder  # noqa: F401 (a fixture)
from tests.support_services import ServerThread

ALERT = "PrefixgateLocalBackendFailed"
MINUTES = 10  # each scrape held this long, every minute: past the alert's `for`


def selector(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(labels.items())) + "}"


def series(text: str, instance: str) -> list[dict[str, str]]:
    """A scrape as promtool input series, labelled as Prometheus labels a target, each value held for MINUTES."""
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = {**sample.labels, "job": "prefixgate", "instance": instance}
            value = "NaN" if math.isnan(sample.value) else repr(sample.value).replace("inf", "Inf")
            out.append({"series": selector(sample.name, labels), "values": " ".join([value] * (MINUTES + 1))})
    return out


def status_panel_expr() -> tuple[str, dict[str, int]]:
    """The status panel's query and its value mappings, as text (a /health status) -> value."""
    dash = json.loads((DEPLOY / "grafana" / "prefixgate-dashboard.json").read_text())
    panel = next(p for p in dash["panels"] if p["title"] == "Local backend: status")
    [mapping] = panel["fieldConfig"]["defaults"]["mappings"]
    return panel["targets"][0]["expr"], {m["text"]: int(v) for v, m in mapping["options"].items()}


def test_the_status_alert_fires_for_a_model_that_failed_to_load_and_the_panel_shows_each_state(
        tmp_path: Path, tiny_folder: Path) -> None:  # noqa: F811 (the imported fixture)
    missing, tiny = str(tmp_path / "no-such-model"), str(tiny_folder)
    starting = Metrics()
    starting.include_local(local_target(tiny))  # a target before the gateway's start loads it
    health, inputs = {("starting", tiny): "not loaded"}, series(starting.render().decode(), "starting")
    answers = {}
    for instance, model, target in (("failed", missing, local_target(missing)),
                                    ("loaded", tiny, local_target(tiny, **OPTIONS))):
        (tmp_path / instance).mkdir()
        with ServerThread(gateway(tmp_path / instance, model, target)) as gw:
            answers[instance] = httpx.post(gw.url + "/v1/chat/completions", json={
                "model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}).status_code
            health[(instance, model)] = httpx.get(gw.url + "/health").json()["local_backend"]["status"]
            inputs += series(httpx.get(gw.url + "/metrics").text, instance)
    assert health == {("starting", tiny): "not loaded", ("failed", missing): "failed", ("loaded", tiny): "loaded"}
    assert answers == {"failed": 503, "loaded": 200}  # what callers of the local route see

    expr, values = status_panel_expr()
    assert sorted(values) == ["failed", "loaded", "not loaded"]

    def alerts(state: str) -> list[dict]:
        labels = {"alertname": ALERT, "alertstate": state, "instance": "failed", "model_name": missing,
                  "severity": "critical"}
        return [{"labels": selector("ALERTS", labels), "value": 1}]

    query = f'ALERTS{{alertname="{ALERT}"}}'
    # The failed gateway's alert is pending until its `for` has passed, then fires; the others never raise it.
    checks = [{"expr": query, "eval_time": "1m", "exp_samples": alerts("pending")},
              {"expr": query, "eval_time": f"{MINUTES}m", "exp_samples": alerts("firing")},
              # The panel's value for each gateway maps to the state its /health reported.
              {"expr": expr, "eval_time": f"{MINUTES}m", "exp_samples": [
                  {"labels": selector("", {"instance": instance, "model_name": model}), "value": values[state]}
                  for (instance, model), state in health.items()]}]
    unit = {"rule_files": [str(DEPLOY / "prometheus" / "prefixgate-rules.yml")], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": inputs, "promql_expr_test": checks}]}
    (tmp_path / "unit.yml").write_text(yaml.safe_dump(unit, sort_keys=False, width=1 << 16))
    promtool("test", "rules", str(tmp_path / "unit.yml"))
