"""Behaviour the docs promise that no other test exercised end to end: prefix affinity over two real
backends, tokens-per-minute limits, a providers_file's prices, `otel: on` exporting spans from the real
process, and the x-prefixgate-overhead-ms header."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import httpx
import pytest

from prefixgate.ledger import read_records
from prefixgate.policies import hash_key
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for
from tests.reliability.support_gateway_process import GatewayProcess
from tests.reliability.support_upstream import Tap, mock_upstream
from tests.support_services import ServerThread, wait_until

SYSTEM = "You are the support agent of a parcel company; the refund policy follows. " * 80
BRANDS = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Wonka", "Stark")


def chat(url: str, system: str, question: str, key: str = "caller", **headers: str) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", timeout=60, headers={"authorization": f"Bearer {key}", **headers},
                      json={"model": "gpt-5.4-mini", "messages": [{"role": "system", "content": system},
                                                                 {"role": "user", "content": question}]})


def test_prefix_affinity_sends_each_prefix_to_one_of_two_real_backends(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-affinity-0001")
    taps = {"a": Tap(), "b": Tap()}
    with ServerThread(mock_upstream({"faults": []}, taps["a"])) as a, \
            ServerThread(mock_upstream({"faults": []}, taps["b"])) as b:
        settings = settings_for(a.url, tmp_path)
        policy = policy_for(settings, {
            "upstreams": {"a": {"kind": "openai_compatible", "url": a.url + "/v1", "api_key_env": "OPENAI_API_KEY"},
                          "b": {"kind": "openai_compatible", "url": b.url + "/v1", "api_key_env": "OPENAI_API_KEY"}},
            "routes": [{"name": "chat", "models": ["gpt-5.4-mini"], "targets": [{"replicas": ["a", "b"]}]}]})
        with running_gateway(settings, policy=policy) as gw:
            served: dict[int, Counter] = {}
            cached: dict[int, list[int]] = {}
            for prefix in range(8):
                # Eight different prompts (a value in front of one prompt would be moved out by the planner, and
                # the eight would share one prefix).
                system = f"Tenant {prefix}. " + f"You serve the {BRANDS[prefix]} desk; its refund policy follows. " * 150
                for turn in range(3):
                    r = chat(gw.url, system, f"Question {turn} about parcel {prefix * 10 + turn}?")
                    assert r.status_code == 200, r.text
                    served.setdefault(prefix, Counter())[r.headers["x-prefixgate-target"]] += 1
                    cached.setdefault(prefix, []).append(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
    # Each prefix stays on one backend, so its second and third requests read that backend's cache...
    assert all(len(targets) == 1 for targets in served.values()), served
    assert all(c[0] == 0 and c[1] > 1000 and c[2] > 1000 for c in cached.values()), cached
    # ...and the prefixes spread over both (8 prefixes all on one of two replicas: p = 2 / 2^8).
    chosen = Counter(next(iter(t)) for t in served.values())
    assert set(chosen) == {"a", "b"}, chosen
    # The backends really received them: every request reached the backend the header names.
    assert {name: sum(len(v) for v in tap.answers.values()) for name, tap in taps.items()} == \
        {name: 3 * chosen[name] for name in taps}


def test_tokens_per_minute_limit_refuses_the_next_request_in_the_callers_dialect(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-tpm-0001")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path)
        policy = policy_for(settings, {
            "routes": [{"name": "chat", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
            "keys": [{"name": "small", "key_sha256": hash_key("k-small"),
                      "rate_limit": {"tokens_per_minute": 500}}]})
        with running_gateway(settings, policy=policy) as gw:
            # The gateway's limits read one instant (10 s into a minute): the first request's tokens and the next
            # ones' check fall in one minute's window, however near a minute's end the test runs.
            gw.server.config.app.state.proxy.limits.clock = lambda: 1_800_000_010
            # One request of ~1,300 prompt tokens uses up the minute's 500 tokens once it is counted.
            assert chat(gw.url, SYSTEM, "Where is my parcel?", key="k-small").status_code == 200

            def refused() -> bool:
                r = chat(gw.url, "Be brief.", "And now?", key="k-small")
                return (r.status_code == 429 and r.json()["error"]["type"] == "tokens"
                        and "tokens per minute" in r.json()["error"]["message"] and "retry-after" in r.headers)
            wait_until(refused, 30, "the tokens-per-minute limit enforced")
            assert len(up.received) == 1


def test_a_providers_file_prices_the_ledger_and_the_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-prices-0001")
    prices = tmp_path / "prices.toml"
    prices.write_text('[[model]]\nprovider = "openai"\nid = "gpt-5.4-mini"\n'
                      'price = { input = "100", output = "1000", cache_read = "10" }\n')
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path, providers_file=str(prices))
        policy = policy_for(settings, {"routes": [{"name": "chat", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}]})
        with running_gateway(settings, policy=policy) as gw:
            r = chat(gw.url, "Be brief.", "Where is my parcel?")
            assert r.status_code == 200
            rid = r.headers["x-prefixgate-request-id"]
            wait_until(lambda: any(x["id"] == rid for x in read_records(settings.ledger_path)), 30, "recorded")
    record = next(x for x in read_records(settings.ledger_path) if x["id"] == rid)
    # The fake upstream's usage priced by hand at the file's rates, not the packaged ones (the file gives
    # no write price, so writes are billed as plain input).
    writes = sum(record["cache_writes"].values())
    expected = (Decimal(record["uncached_input"] + writes) * 100 + Decimal(record["cache_read"]) * 10
                + Decimal(record["output"]) * 1000) / 1_000_000
    assert Decimal(record["cost_usd"]) == expected > 0
    assert Decimal(r.headers["x-prefixgate-cost-usd"]) == expected


def test_overhead_header_is_the_recorded_gateway_time(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-overhead-0001")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path)
        policy = policy_for(settings, {"routes": [{"name": "chat", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}]})
        with running_gateway(settings, policy=policy) as gw:
            answers = [chat(gw.url, SYSTEM, f"Question {i}?") for i in range(3)]
            ids = {r.headers["x-prefixgate-request-id"]: r for r in answers}
            wait_until(lambda: ids.keys() <= {x["id"] for x in read_records(settings.ledger_path)}, 30, "recorded")
    for record in read_records(settings.ledger_path):
        header = float(ids[record["id"]].headers["x-prefixgate-overhead-ms"])
        assert header == pytest.approx(record["overhead_ms"], abs=0.001)
        assert 0 <= header < record["latency_ms"]


@pytest.mark.slow
def test_otel_on_exports_spans_from_the_real_process(tmp_path):
    # The console exporter (the test extras carry the OpenTelemetry SDK, not the OTLP exporter): the
    # spans land in the process's captured output when it stops and flushes them.
    with ServerThread(mock_upstream({"faults": []}, Tap())) as upstream:
        gw = GatewayProcess(upstream.url, tmp_path / "ledger.sqlite", otel="on")
        gw.env.update({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "prefixgate-otel-test"})
        with gw:
            r = chat(gw.url, "Be brief.", "Where is my parcel?")
            assert r.status_code == 200
    log = gw.log_path.read_text()
    assert '"name": "POST /v1/chat/completions"' in log and '"name": "upstream openai"' in log, log[-2000:]
    assert "prefixgate-otel-test" in log and r.headers["x-prefixgate-request-id"] in log
