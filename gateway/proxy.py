"""One request through the gateway: authenticate, route, plan, forward with retries and fallbacks,
answer in the caller's dialect, and account for it.

Retries never double-bill: an attempt is retried or failed over only when the upstream refused it
(429/5xx) or never answered (connect error, timeout before the first byte). Once an upstream has
answered 2xx the request is that upstream's, streamed or not, and a later break is reported to the
caller instead of being sent again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.background import BackgroundTask
from starlette.responses import Response

from prefixgate.cache_planner import Mode, Plan, PlannerState, RedisStore, Target, fingerprint, plan
from prefixgate.config import Settings
from prefixgate.cost import Cost, price_usage
from prefixgate.dialects import dialect as dialect_module
from prefixgate.dialects import openai as openai_dialect
from prefixgate.errors import RequestError, error_body
from prefixgate.gateway.auth import Caller, upstream_credential
from prefixgate.gateway.dashboard_shape import prefix_shape
from prefixgate.gateway.local import LocalTarget
from prefixgate.gateway.logs import log_request
from prefixgate.gateway.metrics import Metrics
from prefixgate.gateway.pricing import price_for
from prefixgate.gateway.relay import stream_response
from prefixgate.gateway.replies import read_reply, write_reply
from prefixgate.gateway.state import MemoryCounters, RedisCounters
from prefixgate.gateway.tracing import Tracing
from prefixgate.gateway.translate import translate_body
from prefixgate.gateway.upstream import UpstreamClient, UpstreamFailure, UpstreamResponse
from prefixgate.ir import Conversation
from prefixgate.ledger import Ledger, LedgerRecord, miss_reason
from prefixgate.policies import (
    Limits,
    Policy,
    Route,
    Router,
    TargetRef,
    Upstream,
    backoff_delay,
    pick_replica,
    retry_condition,
)
from prefixgate.policies.router import caller_checkpoints_for
from prefixgate.providers.cached_contents import parse_rfc3339
from prefixgate.providers.rules import load_catalog
from prefixgate.usage import Usage

# Caller headers that carry meaning for the same provider upstream (API version, beta features, org).
FORWARD_HEADERS = {
    "anthropic": ("anthropic-version", "anthropic-beta"),
    "openai": ("openai-organization", "openai-project", "openai-beta"),
    "gemini": (),
}
PLANNER_PROVIDER = {"anthropic": "anthropic", "openai": "openai", "gemini": "gemini",
                    "openai_compatible": "local", "local": "local"}


# Upstreams that take `cache_salt` (this project's engine and `prefixgate backend`, vLLM): each tenant's
# prefix-cache blocks hash under its own salt, so no tenant can read another's through cache hits or timing.
SELF_HOSTED = ("local", "openai_compatible")


def tenant_salt(tenant: str) -> str:
    return hashlib.sha256(f"prefixgate-tenant:{tenant}".encode()).hexdigest()[:32]


def dumps(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


# A caller may name the stream of similar prompts a request belongs to; the planner learns per route.
ROUTE_HEADER = "x-prefixgate-route"


@dataclass
class Call:
    """One caller request in flight."""

    id: str
    dialect: str
    conv: Conversation
    caller: Caller
    route: Route
    mode: Mode
    headers: dict[str, str]             # caller headers to forward to a same-dialect upstream
    started: float
    include_usage: bool = True          # OpenAI streams: did the caller ask for the usage chunk?
    route_hint: str = ""                # the caller's x-prefixgate-route: one stream of similar prompts
    json_array: bool = False            # a Gemini stream asked without alt=sse: one JSON array, not events
    attempts: int = 0
    notes: list[str] = field(default_factory=list)
    span: Any = None                    # the request's OpenTelemetry span while it is open (tracing on)


@dataclass
class Prepared:
    """A request ready for one upstream: translated, planned, encoded."""

    upstream: Upstream
    model: str
    plan: Plan
    body: bytes
    key: str | None
    stream: bool
    extra_usage: Usage | None = None    # tokens billed outside the response (an explicit cache created for it)
    trace_body: str = ""                # the unplanned body, kept when the ledger keeps bodies

    def usage_counter(self) -> Any:
        """A stream usage accumulator that prices OpenAI cache writes at the TTL this request asked for."""
        module = dialect_module(self.upstream.dialect)
        return module.StreamUsage(self.write_ttl) if self.upstream.dialect == "openai" else module.StreamUsage()

    def usage_of(self, data: dict) -> Usage:
        module = dialect_module(self.upstream.dialect)
        if self.upstream.dialect == "openai":
            return module.usage_from_response(data, self.write_ttl)
        return module.usage_from_response(data)

    @property
    def write_ttl(self) -> str:
        conv = self.plan.conversation
        return openai_dialect.write_ttl({**conv.params, **conv.cache_params})


class Proxy:
    def __init__(self, settings: Settings, policy: Policy, *, local: LocalTarget | None = None,
                 planner_state: object | None = None, tracing: Tracing | None = None) -> None:
        self.settings = settings
        self.tracing = tracing
        self.policy = policy
        self.router = Router(policy)
        self.keys = {k.key_sha256: k for k in policy.keys}
        self.counters = RedisCounters(settings.redis_url) if settings.redis_url else MemoryCounters()
        self.limits = Limits(self.counters)
        self.upstream = UpstreamClient(settings.connect_timeout_s, local)
        self.ledger = Ledger(settings.ledger_path, settings.redis_url)
        self.metrics = Metrics()
        self.catalog = load_catalog(settings.providers_file or None)
        # The planner learns per route; with Redis, replicas share what they learn.
        self.planner_state = planner_state or PlannerState(
            store=RedisStore(settings.redis_url) if settings.redis_url else None)
        self.in_flight: dict[str, int] = defaultdict(int)

    async def aclose(self) -> None:
        await self.upstream.aclose()
        await self.counters.close()
        self.ledger.close()

    def start(self, dialect: str, conv: Conversation, caller: Caller, headers: dict[str, str], started: float,
              span: Any = None) -> Call:
        decision = self.router.decide(conv.model or "", caller.key)
        forwarded = {h: headers[h] for h in FORWARD_HEADERS[dialect] if h in headers}
        call = Call(uuid.uuid4().hex[:20], dialect, conv, caller, decision.route, decision.mode, forwarded, started,
                    span=span)
        if dialect == "openai" and conv.stream:
            call.include_usage = bool((conv.params.get("stream_options") or {}).get("include_usage"))
        call.route_hint = headers.get(ROUTE_HEADER, "")[:200]
        return call

    # ---- the request path ---------------------------------------------------------------------

    async def handle(self, call: Call) -> Response:
        if call.caller.key is not None:
            await self.limits.admit(call.caller.key)
        failure: UpstreamFailure | RequestError | None = None
        retry = call.route.retry
        for ref in call.route.targets:
            try:
                prep = self.prepare(call, ref)
            except RequestError as e:       # this target cannot take the request (translation, credentials)
                call.notes.append(f"skip {'/'.join(ref.upstreams)}: {e.message}")
                failure = e
                continue
            prep = await self.explicit_cache(call, prep)
            for attempt in range(1, retry.attempts + 1):
                call.attempts += 1
                sent = time.perf_counter()
                self.in_flight[prep.upstream.name] += 1
                try:
                    resp = await self._send(call, prep, retry.timeout_s)
                except UpstreamFailure as f:
                    self.in_flight[prep.upstream.name] -= 1
                    condition = retry_condition(f.status, f.timed_out, f.connect_failed)
                    self.metrics.attempts.labels(prep.upstream.name, condition or str(f.status)).inc()
                    if condition is None or condition not in retry.on:
                        return self.fail(call, f.request_error(), prep)
                    failure = f
                    call.notes.append(f"attempt {call.attempts} on {prep.upstream.name}: {condition}")
                    if attempt < retry.attempts:
                        await asyncio.sleep(backoff_delay(retry, attempt, f.retry_after))
                    continue
                except BaseException:
                    self.in_flight[prep.upstream.name] -= 1
                    raise
                self.metrics.attempts.labels(prep.upstream.name, "ok").inc()
                if prep.stream:
                    return stream_response(self, call, prep, resp, sent)
                return self.complete(call, prep, resp, sent)
        if isinstance(failure, UpstreamFailure):
            return self.fail(call, failure.request_error(), None)
        raise failure or RequestError("no target could take this request", status=502, kind="server")

    async def _send(self, call: Call, prep: Prepared, timeout_s: float) -> UpstreamResponse:
        """One attempt at `prep`'s upstream, with its own client span when the request is traced."""
        send = self.upstream.send(prep.upstream, prep.model, prep.body, prep.stream, self._headers(call, prep), prep.key,
                                  timeout_s)
        if call.span is None:
            return await send
        span = self.tracing.attempt_span(call.span, prep.upstream.name, prep.model, call.attempts)
        try:
            resp = await send
        except UpstreamFailure as f:
            self.tracing.end_attempt(span, retry_condition(f.status, f.timed_out, f.connect_failed) or str(f.status), f.status)
            raise
        except BaseException:
            self.tracing.end_attempt(span, "cancelled", None)
            raise
        self.tracing.end_attempt(span, "ok", resp.status)
        return resp

    def prepare(self, call: Call, ref: TargetRef) -> Prepared:
        first = self.policy.upstreams[ref.upstreams[0]]
        model = ref.model or call.conv.model or ""
        conv, notes = self._convert(call, first.dialect, model)
        sent_as = dumps(dialect_module(first.dialect).encode_request(conv)).decode() if self.settings.ledger_bodies else ""
        the_plan = plan(conv, Target(PLANNER_PROVIDER[first.kind], model), self.planner_state, call.mode,
                        route=self._planner_route(call, conv), catalog=self.catalog,
                        caller_checkpoints=caller_checkpoints_for(call.route, call.caller.key))
        the_plan.route = call.route.name
        the_plan.explanation[:0] = notes
        name = ref.upstreams[0] if len(ref.upstreams) == 1 else pick_replica(
            the_plan.prefix_hash, ref.upstreams, self.in_flight, ref.load_factor)
        upstream = self.policy.upstreams[name]
        key = upstream_credential(upstream, call.caller, call.dialect)
        out = the_plan.conversation
        if out.stream and upstream.dialect == "openai":
            # Ask for the usage chunk whatever the caller asked: a stream without usage cannot be billed.
            out.params = {**out.params, "stream_options": {**(out.params.get("stream_options") or {}), "include_usage": True}}
        payload = dialect_module(upstream.dialect).encode_request(out)
        if upstream.kind in SELF_HOSTED and self.settings.tenant_cache_isolation and call.caller.key is not None:
            # The salt is the gateway's to set, never the caller's: one tenant must not borrow another's.
            payload["cache_salt"] = tenant_salt(call.caller.key.tenant or call.caller.key.name)
        body = dumps(payload)
        return Prepared(upstream, model, the_plan, body, key, call.conv.stream, trace_body=sent_as)

    def _planner_route(self, call: Call, conv: Conversation) -> str:
        """Tenants never share learned state; within one, the caller's route header, else the prompt's shape."""
        tenant = call.caller.key.tenant if call.caller.key else "-"
        return f"{tenant}/{call.route_hint or fingerprint(conv)}"

    async def explicit_cache(self, call: Call, prep: Prepared) -> Prepared:
        """Create the Gemini cachedContents entry the plan asks for (with the caller's credentials), then
        send the request against it. A refusal is noted and the request goes out as planned without it."""
        create = prep.plan.cache_create
        if create is None or prep.upstream.dialect != "gemini":
            return prep
        try:
            resp = await self.upstream.forward(prep.upstream, "POST", "/v1beta/cachedContents", "", dumps(create),
                                               prep.key, call.route.retry.timeout_s)
            data = json.loads(resp.body or b"{}")
            name, expires = data["name"], parse_rfc3339(data["expireTime"], "expireTime")
        except (UpstreamFailure, RequestError, ValueError, KeyError, TypeError) as e:
            reason = e.message if isinstance(e, UpstreamFailure | RequestError) else f"unexpected answer ({type(e).__name__})"
            call.notes.append(f"cache: explicit cache not created: {reason}")
            return prep
        prep.plan.adopt_cached_content(name, expires)
        tokens = int((data.get("usageMetadata") or {}).get("totalTokenCount") or 0)
        body = dumps(dialect_module("gemini").encode_request(prep.plan.conversation))
        # Creating the cache bills its tokens at the input rate: on this request's record.
        return replace(prep, body=body, extra_usage=Usage(cache_writes={"explicit": tokens}))

    def _convert(self, call: Call, target_dialect: str, model: str) -> tuple[Conversation, list[str]]:
        conv = call.conv
        if target_dialect == call.dialect:
            params = conv.params if target_dialect == "gemini" else {**conv.params, "model": model}
            return replace(conv, model=model, params=params), []
        body = dialect_module(call.dialect).encode_request(conv)
        translated, notes = translate_body(body, call.dialect, target_dialect, model)
        if target_dialect == "gemini":
            out = dialect_module("gemini").parse_request(translated, model=model)
        else:
            # Gemini callers stream by URL, not by body field: the caller's intent is conv.stream.
            translated.pop("stream", None)
            translated.pop("stream_options", None)
            if conv.stream:
                translated["stream"] = True
            out = dialect_module(target_dialect).parse_request(translated)
        out.stream = conv.stream
        return out, notes

    def _headers(self, call: Call, prep: Prepared) -> dict[str, str]:
        if prep.upstream.dialect == "anthropic":
            headers = {"anthropic-version": "2023-06-01"}
            if call.dialect == "anthropic":
                headers.update(call.headers)
            return headers
        return dict(call.headers) if prep.upstream.dialect == call.dialect and prep.upstream.kind != "openai_compatible" else {}

    # ---- answers ------------------------------------------------------------------------------

    def complete(self, call: Call, prep: Prepared, resp: UpstreamResponse, sent: float) -> Response:
        received = time.perf_counter()
        self.in_flight[prep.upstream.name] -= 1
        try:
            data = json.loads(resp.body or b"")
        except ValueError:
            return self.fail(call, RequestError(f"upstream {prep.upstream.name!r} sent a body that is not JSON",
                                                status=502, kind="server"), prep)
        usage = prep.usage_of(data)
        if prep.upstream.dialect == call.dialect:
            content = resp.body or b""
        else:
            content = dumps(write_reply(call.dialect, read_reply(prep.upstream.dialect, data), call.conv.model or prep.model))
        rec = self.record(call, prep, usage, 200, ttft_s=None, upstream_s=received - sent)
        headers = {**resp.headers, **self.headers(call, prep, rec)}
        return Response(content, 200, headers, media_type="application/json",
                        background=BackgroundTask(self.finish, call, rec))

    def fail(self, call: Call, err: RequestError, prep: Prepared | None) -> Response:
        rec = self.record(call, prep, None, err.status, ttft_s=None, upstream_s=0.0, error=err.message)
        headers = {"x-prefixgate-request-id": call.id}
        if err.retry_after is not None:
            headers["retry-after"] = str(max(1, round(err.retry_after)))
        return Response(dumps(error_body(err, call.dialect)), err.status, headers, media_type="application/json",
                        background=BackgroundTask(self.finish, call, rec))

    def headers(self, call: Call, prep: Prepared, rec: LedgerRecord) -> dict[str, str]:
        out = {
            "x-prefixgate-request-id": call.id,
            "x-prefixgate-route": call.route.name,
            "x-prefixgate-target": prep.upstream.name,
            "x-prefixgate-plan": prep.plan.summary,
            "x-prefixgate-overhead-ms": f"{rec.overhead_ms:.3f}",
        }
        if rec.status == 200 and not prep.stream:
            out["x-prefixgate-cache-read-tokens"] = str(rec.cache_read)
            out["x-prefixgate-cost-usd"] = rec.cost_usd if rec.cost_usd is not None else "unknown"
            out["x-prefixgate-savings-usd"] = rec.savings_usd if rec.savings_usd is not None else "unknown"
        return out

    def record(self, call: Call, prep: Prepared | None, usage: Usage | None, status: int, *, ttft_s: float | None,
               upstream_s: float, error: str = "") -> LedgerRecord:
        """The request's ledger record, queued for the writer and counted in the metrics."""
        now = time.perf_counter()
        usage = (usage or Usage()) + (prep.extra_usage if prep and prep.extra_usage else Usage())
        cost: Cost | None = None
        if prep is not None and usage != Usage():
            price = price_for(PLANNER_PROVIDER[prep.upstream.kind], prep.model, usage, self.catalog)
            cost = price_usage(usage, price) if price is not None else None
        explanation = (prep.plan.explanation if prep else []) + call.notes
        rec = LedgerRecord(
            id=call.id, ts=time.time(), key=call.caller.key.name if call.caller.key else "",
            tenant=call.caller.key.tenant if call.caller.key else "", route=call.route.name,
            target=prep.upstream.name if prep else "", provider=prep.upstream.kind if prep else "",
            model=prep.model if prep else (call.conv.model or ""), dialect=call.dialect, stream=call.conv.stream,
            status=status, uncached_input=usage.uncached_input, cache_read=usage.cache_read,
            cache_writes=dict(usage.cache_writes), output=usage.output,
            cost_usd=str(cost.total) if cost else None,
            cost_without_cache_usd=str(cost.without_cache) if cost else None,
            savings_usd=str(cost.savings) if cost else None,
            latency_ms=(now - call.started) * 1000, ttft_ms=ttft_s * 1000 if ttft_s is not None else None,
            overhead_ms=max(0.0, (now - call.started - upstream_s) * 1000), attempts=call.attempts,
            prefix_hash=prep.plan.prefix_hash if prep else "", plan_summary=prep.plan.summary if prep else "",
            explanation=explanation, miss_reason=miss_reason(usage, status, explanation), error=error,
            body=prep.trace_body if prep else "",
            segments=prefix_shape(prep.plan.conversation if prep else call.conv, PLANNER_PROVIDER[prep.upstream.kind] if prep else call.dialect))
        self.ledger.append(rec)
        self.metrics.observe(rec)
        if call.span is not None:
            self.tracing.end_request(call.span, rec)
            call.span = None
        return rec

    async def finish(self, call: Call, rec: LedgerRecord) -> None:
        """After the answer is sent: count tokens and spend against the caller's limits, log one line."""
        if call.caller.key is not None and rec.status == 200:
            tokens = rec.uncached_input + rec.cache_read + sum(rec.cache_writes.values()) + rec.output
            await self.limits.record(call.caller.key, tokens, float(rec.cost_usd or 0))
        log_request(rec)
