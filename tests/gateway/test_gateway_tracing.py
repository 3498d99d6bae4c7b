"""OpenTelemetry: a real gateway request makes one server span (the ledger record's facts, no secrets or
prompt text) with one client span per upstream attempt; without a tracer provider nothing is traced."""

from __future__ import annotations

import anthropic
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from prefixgate.config import Settings
from prefixgate.gateway.tracing import tracing_for
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for
from tests.support_services import wait_until

POLICY = {"routes": [
    {"name": "chat", "models": ["chat"], "retry": {"attempts": 2, "backoff_s": 0.01, "timeout_s": 5},
     "targets": [{"upstream": "openai", "model": "gpt-5.4"}]},
    {"name": "anthropic", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
]}
SECRET_PROMPT = "The launch code is 4471-ALPHA. " * 40
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-secret-openai-key-000111")
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-key-000222")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path_factory.mktemp("tracing"))
        with running_gateway(settings, policy=policy_for(settings, POLICY), tracer_provider=provider) as gw:
            yield up, gw, exporter
    mp.undo()


def request_spans(exporter: InMemorySpanExporter, n: int = 1) -> list:
    wait_until(lambda: sum(s.kind == SpanKind.SERVER for s in exporter.get_finished_spans()) >= n, 5, "server span")
    return [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER]


def test_a_request_makes_a_server_span_with_an_attempt_span_under_it(traced):
    up, gw, exporter = traced
    up.reset()
    exporter.clear()
    client = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="chat", messages=[{"role": "system", "content": SECRET_PROMPT}, {"role": "user", "content": "Hi"}],
        extra_headers={"traceparent": TRACEPARENT})
    [server] = request_spans(exporter)
    a = server.attributes
    assert server.name == "POST /v1/chat/completions"
    assert a["prefixgate.request_id"] == raw.headers["x-prefixgate-request-id"]
    assert (a["prefixgate.dialect"], a["prefixgate.route"], a["prefixgate.target"], a["prefixgate.model"]) == \
        ("openai", "chat", "openai", "gpt-5.4")
    assert a["http.response.status_code"] == 200 and a["prefixgate.attempts"] == 1
    assert a["prefixgate.tokens.cache_read"] == 1920 == int(raw.headers["x-prefixgate-cache-read-tokens"])
    assert (a["prefixgate.tokens.uncached_input"], a["prefixgate.tokens.cache_write"], a["prefixgate.tokens.output"]) == (40, 64, 5)
    assert a["prefixgate.cost_usd"] == pytest.approx(float(raw.headers["x-prefixgate-cost-usd"]))
    # The caller's trace continues through the gateway.
    assert format(server.context.trace_id, "032x") == TRACEPARENT.split("-")[1]
    assert format(server.parent.span_id, "016x") == TRACEPARENT.split("-")[2]
    [attempt] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CLIENT]
    assert attempt.parent.span_id == server.context.span_id
    assert (attempt.attributes["prefixgate.target"], attempt.attributes["prefixgate.outcome"]) == ("openai", "ok")
    # Nothing secret: no key, no prompt text, no headers in any span.
    text = repr([(s.name, dict(s.attributes), s.events) for s in exporter.get_finished_spans()])
    for secret in ("sk-secret-openai-key", "caller", "launch code", "4471"):
        assert secret not in text


def test_a_retried_request_has_one_span_per_attempt(traced):
    up, gw, exporter = traced
    up.reset()
    exporter.clear()
    up.fail("503")
    openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0).chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "Hi"}])
    [server] = request_spans(exporter)
    attempts = sorted((s for s in exporter.get_finished_spans() if s.kind == SpanKind.CLIENT),
                      key=lambda s: s.attributes["prefixgate.attempt"])
    assert [(s.attributes["prefixgate.outcome"], s.attributes["http.response.status_code"]) for s in attempts] == \
        [("5xx", 503), ("ok", 200)]
    assert attempts[0].status.status_code == StatusCode.ERROR
    assert server.attributes["prefixgate.attempts"] == 2 and server.status.status_code != StatusCode.ERROR


def test_streams_and_refusals_are_traced_in_the_callers_dialect(traced):
    up, gw, exporter = traced
    up.reset()
    exporter.clear()
    client = anthropic.Anthropic(api_key="caller", base_url=gw.url, max_retries=0)
    with client.messages.stream(model="claude-haiku-4-5", max_tokens=16, messages=[{"role": "user", "content": "Hi"}]) as s:
        s.get_final_message()
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="claude-haiku-4-5", max_tokens=16, messages="not a list")
    stream, refused = sorted(request_spans(exporter, 2), key=lambda s: s.attributes["http.response.status_code"])
    assert stream.name == "POST /v1/messages" and stream.attributes["prefixgate.stream"] is True
    assert stream.attributes["prefixgate.tokens.output"] == 5
    assert refused.attributes["http.response.status_code"] == 400 and refused.attributes["error.type"] == "400"


def test_tracing_is_off_without_a_provider_or_when_disabled(monkeypatch):
    assert tracing_for(Settings()) is None                      # auto, and no provider configured
    assert tracing_for(Settings(otel="off"), TracerProvider()) is None
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing_for(Settings(), TracerProvider()) is None
