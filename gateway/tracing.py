"""Optional OpenTelemetry spans: one server span per model request, one client span per upstream attempt.

Off unless a tracer provider is in play (setting `otel`): `auto` traces when the process already has one
(`opentelemetry-instrument prefixgate serve`, or an application that set one before `create_app`), `on`
also sets up the SDK from the standard OTEL_* variables when nothing did, `off` never traces. Off, the
gateway holds no `Tracing` and the request path pays one `is None` test.

Spans carry what the ledger record carries about a request (dialect, route, target, model, status, token
counts, cost, attempts), never keys, headers or prompt text. The caller's `traceparent` parents the
server span; nothing is propagated upstream, so what a provider receives does not depend on tracing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from prefixgate.config import ConfigError, Settings
from prefixgate.dialects import wire_format

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

    from prefixgate.ledger import LedgerRecord

# Global providers that only stand in until someone configures one (the API's defaults).
_UNCONFIGURED = {("opentelemetry.trace", "ProxyTracerProvider"), ("opentelemetry.trace", "NoOpTracerProvider")}


class Tracing:
    def __init__(self, provider: TracerProvider) -> None:
        from opentelemetry import propagate, trace

        from prefixgate import __version__

        self._provider = provider
        self._tracer = provider.get_tracer("prefixgate.gateway", __version__)
        self._extract, self._trace = propagate.extract, trace

    def flush(self) -> None:
        """Export the spans still batched (the gateway calls this on shutdown; a SIGTERM skips atexit)."""
        force_flush = getattr(self._provider, "force_flush", None)
        if force_flush is not None:
            force_flush(5000)

    def request_span(self, dialect: str, path: str, headers: dict[str, str] | Any) -> Span:
        """The server span of one model request, a child of the caller's trace when it sent one."""
        return self._tracer.start_span(
            # Span names are path templates (`WireFormat.span_name`): a model name in the path makes no new name.
            wire_format(dialect).span_name, context=self._extract(headers), kind=self._trace.SpanKind.SERVER,
            attributes={"http.request.method": "POST", "url.path": path, "prefixgate.dialect": dialect})

    def attempt_span(self, parent: Span, upstream: str, model: str, attempt: int) -> Span:
        """A client span for one try at one upstream, under the request's span."""
        return self._tracer.start_span(
            f"upstream {upstream}", context=self._trace.set_span_in_context(parent), kind=self._trace.SpanKind.CLIENT,
            attributes={"prefixgate.target": upstream, "prefixgate.model": model, "prefixgate.attempt": attempt})

    def end_attempt(self, span: Span, outcome: str, status: int | None) -> None:
        span.set_attribute("prefixgate.outcome", outcome)
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if outcome != "ok":
            span.set_status(self._trace.StatusCode.ERROR, outcome)
        span.end()

    def end_request(self, span: Span, rec: LedgerRecord) -> None:
        """Close the server span with the request's ledger record as its attributes."""
        writes = sum(rec.cache_writes.values())
        span.set_attributes({
            "http.response.status_code": rec.status, "prefixgate.request_id": rec.id, "prefixgate.route": rec.route,
            "prefixgate.target": rec.target, "prefixgate.provider": rec.provider, "prefixgate.model": rec.model,
            "prefixgate.stream": rec.stream, "prefixgate.attempts": rec.attempts, "prefixgate.plan": rec.plan_summary,
            "prefixgate.tokens.uncached_input": rec.uncached_input, "prefixgate.tokens.cache_read": rec.cache_read,
            "prefixgate.tokens.cache_write": writes, "prefixgate.tokens.output": rec.output,
            "gen_ai.request.model": rec.model, "gen_ai.usage.input_tokens": rec.uncached_input + rec.cache_read + writes,
            "gen_ai.usage.output_tokens": rec.output, "prefixgate.overhead_ms": rec.overhead_ms,
        })
        if rec.cost_usd is not None:
            span.set_attribute("prefixgate.cost_usd", float(rec.cost_usd))
            span.set_attribute("prefixgate.savings_usd", float(rec.savings_usd or 0))
        if rec.miss_reason:
            span.set_attribute("prefixgate.miss_reason", rec.miss_reason)
        self.end_request_status(span, rec.status, rec.error)

    def end_request_status(self, span: Span, status: int, error: str) -> None:
        """Close a server span with the answer's status (the whole record, if any, is `end_request`'s); a
        5xx is an error (a 4xx is the caller's, per HTTP conventions)."""
        span.set_attribute("http.response.status_code", status)
        if status >= 400:
            span.set_attribute("error.type", str(status))
        if status >= 500:
            span.set_status(self._trace.StatusCode.ERROR, error[:200])
        span.end()


def tracing_for(settings: Settings, provider: TracerProvider | None = None) -> Tracing | None:
    """The gateway's tracing: with `provider` when given, else per the `otel` setting; None when off."""
    if settings.otel == "off" or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if provider is not None:
        return Tracing(provider)
    try:
        from opentelemetry import trace
    except ImportError:
        if settings.otel == "on":
            raise ConfigError("otel=on needs OpenTelemetry: pip install 'prefixgate[otel]'") from None
        return None
    current = trace.get_tracer_provider()
    if (type(current).__module__, type(current).__name__) not in _UNCONFIGURED:
        return Tracing(current)
    return Tracing(_sdk_provider()) if settings.otel == "on" else None


def _sdk_provider() -> TracerProvider:
    """An SDK provider set up from OTEL_* variables (service name, resource, OTEL_TRACES_EXPORTER:
    otlp by default, console or none), installed as the process's global provider."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise ConfigError("otel=on needs the OpenTelemetry SDK: pip install 'prefixgate[otel]'") from None
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    defaults = {} if named else {"service.name": "prefixgate"}
    provider = TracerProvider(resource=Resource.create(defaults))
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporter_name == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter_name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError("otel=on exports OTLP over HTTP: pip install 'prefixgate[otel]' "
                              "(or set OTEL_TRACES_EXPORTER=console)") from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter_name != "none":
        raise ConfigError(f"OTEL_TRACES_EXPORTER={exporter_name!r} is not supported here: use otlp, console or none")
    trace.set_tracer_provider(provider)
    return provider
