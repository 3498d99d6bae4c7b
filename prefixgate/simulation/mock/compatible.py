"""Mock hosted OpenAI-compatible providers: each one's Chat Completions under `/{provider}/v1/...`, and
Azure OpenAI's deployment paths under `/azure/openai/deployments/{deployment}/chat/completions?api-version=`
and its v1 API's Responses API (`/azure/openai/v1/responses`, retrieve, delete, input items), and xAI's
(`/xai/v1/responses`): mock/responses.py's, with the provider's key, caching rules and store.

Bodies and streams are OpenAI's; what differs is what each provider documents (reference sheet section 4):
DeepSeek reports `prompt_cache_hit_tokens`/`prompt_cache_miss_tokens`; OpenRouter always reports usage
(streamed or not, asked or not) with `cost` in USD and `cached_tokens`/`cache_write_tokens`; Groq adds its
timings (`queue_time`, `prompt_time`, ...); Mistral's `cached_tokens` come in 64-token blocks; Fireworks
also sends its token-count headers; Azure takes the key in `api-key`, insists on `api-version`, answers with the
model its deployment runs (a dated id such as `gpt-4o-2024-11-20`, never the deployment's name; a stream's first
chunk, its prompt filter results, names none) and a 404 for a deployment the resource lacks. Every
provider caches by prefix automatically; the mock runs OpenAI's implicit cache per provider and key, with
the provider's own minimum and step from its model's row (DeepSeek's 64-token units, Groq's 128, ...). Like OpenAI's API, an unknown body field such as
`cache_salt` is refused with a 400.

OpenRouter's Claude models cache only at `cache_control` breakpoints on content parts: the mock runs
Anthropic's cache on the request translated to a Messages body (no breakpoint, no cache; writes reported
as `cache_write_tokens` and billed at 1.25x in `cost`; more than 4 breakpoints refused as Anthropic does).
Its Gemini models take the same breakpoints, and without any cache implicitly (Gemini 2.5), as the
automatic stand-in does.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from decimal import Decimal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from prefixgate.cost import price_usage
from prefixgate.dialects import anthropic
from prefixgate.dialects import openai as dialect
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.translate import translate_body
from prefixgate.errors import RequestError
from prefixgate.providers.compatible import PROFILES, caches_by_markers
from prefixgate.providers.pricing import UnknownModel, price_for, resolve_model
from prefixgate.providers.rules import ModelRules
from prefixgate.simulation.mock import responses as mock_responses
from prefixgate.simulation.mock.server import MockContext, json_body, prompt_text, sse_response, tenant_of
from prefixgate.simulation.mock.text import reply_for
from prefixgate.tokens import encoding_for
from prefixgate.usage import Usage

# The OpenAI model whose cache rules stand in for every provider's automatic prefix cache.
CACHE_STAND_IN = "gpt-5.4"
# The Claude model whose cache stands in for a Gemini model's breakpoints on OpenRouter, under the Gemini
# model's own minimum (its row's).
BREAKPOINT_STAND_IN = "claude-sonnet-4-6"
# OpenRouter's reported cost for a model the price table lacks: the mock's own made-up price, USD per MTok.
UNLISTED_PRICE = (Decimal("1"), Decimal("0.25"), Decimal("2"))      # input, cache read, output
# Fields a self-hosted server takes that no hosted provider does: refused as OpenAI refuses unknown fields.
REFUSED_FIELDS = ("cache_salt",)
# The mock Azure resource's deployments (docs/providers.md's examples), name -> the model id its answers name;
# MockContext.azure_deployments adds or overrides. A deployment named after a model Azure's rows list (the portal's
# default name) answers as that model.
AZURE_DEPLOYMENTS = {"prod-4o": "gpt-4o-2024-11-20", "chat-prod": "gpt-4o-2024-11-20", "chat-mini": "gpt-4o-mini-2024-07-18"}
# Azure's first chunk of a stream: its prompt's content filter results, naming no model.
AZURE_FILTER_RESULTS = {"choices": [], "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": [
    {"prompt_index": 0, "content_filter_results": {name: {"filtered": False, "severity": "safe"}
                                                   for name in ("hate", "self_harm", "sexual", "violence")}}]}


def add_routes(app: FastAPI, ctx: MockContext) -> None:
    @app.post("/{provider}/v1/chat/completions")
    async def chat_completions(provider: str, request: Request) -> Response:
        if provider not in PROFILES or PROFILES[provider].deployments:
            raise RequestError(f"mock-providers: no compatible provider {provider!r} "
                               f"(known: {', '.join(p for p in PROFILES if p != 'azure')})", status=404, kind="not_found")
        return await _answer(ctx, request, provider, _bearer(request), None)

    @app.post("/azure/openai/deployments/{deployment}/chat/completions")
    async def azure_chat(deployment: str, request: Request) -> Response:
        key = _azure_key(request)
        if not request.query_params.get("api-version"):
            raise RequestError("Missing API version parameter.", status=400, field="api-version")
        return await _answer(ctx, request, "azure", key, _deployed_model(ctx, deployment))

    # Azure's v1 API and xAI serve the Responses API too (Azure's without api-version, the body's model naming the
    # deployment, the answer the model it runs); each one's stored responses are its own, apart from OpenAI's.
    mock_responses.add_routes(app, ctx, root="/azure/openai/v1", account=lambda r: f"azure:{tenant_of(_azure_key(r))}",
                              deployed=lambda deployment: _deployed_model(ctx, _deployment_named(deployment)),
                              rules=lambda model: _cache_rules(ctx, "azure", model))
    mock_responses.add_routes(app, ctx, root="/xai/v1", account=lambda r: f"xai:{tenant_of(_bearer(r))}",
                              rules=lambda model: _cache_rules(ctx, "xai", model))


def _azure_key(request: Request) -> str:
    key = request.headers.get("api-key", "")
    if not key:
        raise RequestError("Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
                           "provide a valid key for an active subscription and use a correct regional API "
                           "endpoint for your resource.", status=401, kind="authentication")
    return key


def _deployment_named(model: object) -> str:
    if not isinstance(model, str) or not model:
        raise RequestError("Missing required parameter: 'model'.", status=400, field="model")
    return model


def _bearer(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    if not key:
        raise RequestError("No auth credentials found", status=401, kind="authentication")
    return key


def _deployed_model(ctx: MockContext, deployment: str) -> str:
    model = {**AZURE_DEPLOYMENTS, **ctx.azure_deployments}.get(deployment)
    if model is not None:
        return model
    try:
        resolve_model("azure", deployment, ctx.simulator.catalog)
    except UnknownModel:
        raise RequestError("The API deployment for this resource does not exist. If you created the deployment within "
                           "the last 5 minutes, please wait a moment and try again.", status=404, kind="not_found",
                           code="DeploymentNotFound") from None
    return deployment


async def _answer(ctx: MockContext, request: Request, provider: str, key: str, deployed: str | None) -> Response:
    body = await json_body(request)
    ctx.received.append((request.url.path, body))
    for name in REFUSED_FIELDS:
        if name in body:
            raise RequestError(f"Unrecognized request argument supplied: {name}", status=400, field=name)
    # Azure names the model by its deployment; the body's model (if any) is ignored, as Azure does.
    model = deployed or body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("you must provide a model parameter", status=400, field="model")
    fault = await ctx.fault_for(request, "openai", model)
    tenant = f"{provider}:{tenant_of(key)}"
    if caches_by_markers(PROFILES[provider], model) and (model.startswith("anthropic/") or _has_markers(body)):
        claude = model if model.startswith("anthropic/") else BREAKPOINT_STAND_IN
        messages, _ = translate_body(body, dialect.WIRE, anthropic.WIRE, claude)
        rules = None
        if claude == BREAKPOINT_STAND_IN:
            own = _cache_rules(ctx, provider, model)
            rules = replace(resolve_model("anthropic", claude, ctx.simulator.catalog), min_cache_tokens=own.min_cache_tokens)
        # Scoped by the model asked for: a Gemini model's entries are not the stand-in Claude's.
        result = ctx.simulator.respond("anthropic", messages, now=ctx.clock(), tenant=f"{tenant}:{model}", model=claude,
                                       rules=rules)
    else:
        result = ctx.simulator.respond("openai", {**body, "model": CACHE_STAND_IN}, now=ctx.clock(), tenant=tenant,
                                       model=CACHE_STAND_IN, rules=_cache_rules(ctx, provider, model))
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    reply = reply_for(prompt_text(result.conversation), limit, encoding_for("openai", CACHE_STAND_IN))
    usage = _as_reported(provider, replace(result.usage, output=reply.output_tokens))
    usage_body = _usage_body(provider, model, usage)
    finish = "length" if reply.truncated else "stop"
    headers = ({"fireworks-prompt-tokens": str(usage.input_total), "fireworks-cached-prompt-tokens": str(usage.cache_read)}
               if provider == "fireworks" else {})
    if result.conversation.stream:
        options = body.get("stream_options") or {}
        asked = bool(options.get("include_usage")) if isinstance(options, dict) else False
        # OpenRouter sends the usage chunk whether asked or not (P1).
        events = dialect.stream_events(model, reply.chunks(), usage, finish_reason=finish,
                                       include_usage=asked or provider == "openrouter", usage_body=usage_body)
        if provider == "azure":
            events = itertools.chain([encode_sse(AZURE_FILTER_RESULTS)], events)
        return sse_response(events, fault, headers)
    out = dialect.build_response(model, reply.text, usage, finish_reason=finish)
    out["usage"] = usage_body
    return JSONResponse(out, headers=headers)


def _cache_rules(ctx: MockContext, provider: str, model: str) -> ModelRules:
    """The provider's own caching rules for `model`: its row, else the provider's lowest minimum (its models
    share one cache design), else OpenAI's stand-in for a provider with no rows at all."""
    catalog = ctx.simulator.catalog
    try:
        return resolve_model(provider, model, catalog)
    except UnknownModel:
        rows = sorted(catalog.models_of(provider), key=lambda m: m.min_cache_tokens)
        return rows[0] if rows else resolve_model("openai", CACHE_STAND_IN, catalog)


def _has_markers(body: dict) -> bool:
    return any(isinstance(part, dict) and "cache_control" in part
               for msg in body.get("messages") or [] if isinstance(msg, dict) and isinstance(msg.get("content"), list)
               for part in msg["content"])


def _as_reported(provider: str, usage: Usage) -> Usage:
    if provider != "mistral":
        return usage
    # Mistral reports cached tokens in whole 64-token blocks (P5); the rest bill as plain input.
    blocks = usage.cache_read // 64 * 64
    return replace(usage, cache_read=blocks, uncached_input=usage.uncached_input + usage.cache_read - blocks)


def _usage_body(provider: str, model: str, usage: Usage) -> dict:
    out = dialect.usage_json(usage)
    if provider == "deepseek":
        out = {k: v for k, v in out.items() if k != "prompt_tokens_details"}
        out["prompt_cache_hit_tokens"] = usage.cache_read
        out["prompt_cache_miss_tokens"] = usage.input_total - usage.cache_read
    elif provider == "groq":
        # Groq's timings beside the counts (P7), in seconds; the mock's figures are made up but consistent.
        prompt_s, completion_s = round(usage.input_total / 500_000, 6), round(usage.output / 1_000, 6)
        out.update(queue_time=0.0002, prompt_time=prompt_s, completion_time=completion_s,
                   total_time=round(prompt_s + completion_s, 6))
    elif provider == "openrouter":
        out["prompt_tokens_details"]["cache_write_tokens"] = usage.cache_write
        out["cost"] = float(_openrouter_cost(model, usage))
        out["is_byok"] = False
        out["cost_details"] = {"upstream_inference_cost": None}
    return out


def _openrouter_cost(model: str, usage: Usage) -> Decimal:
    """What OpenRouter bills: the model's list price (its row), else the mock's made-up one."""
    try:
        price = price_for("openrouter", model, usage)
    except UnknownModel:
        inp, read, out = UNLISTED_PRICE
        return (usage.uncached_input * inp + usage.cache_read * read + usage.output * out) / Decimal(1_000_000)
    return price_usage(usage, price).total
