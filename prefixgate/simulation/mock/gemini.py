"""Mock Gemini API (v1beta): generateContent, streamGenerateContent, countTokens, models, cachedContents CRUD."""

from __future__ import annotations

import json
from dataclasses import replace

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from prefixgate.dialects import gemini as dialect
from prefixgate.errors import RequestError
from prefixgate.providers.files import GEMINI
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import ModelRules
from prefixgate.simulation.mock import agent, agent_wire, gemini_params, retired
from prefixgate.simulation.mock.faults import cut_off
from prefixgate.simulation.mock.gemini_generation_params import check_config_types, proto_field
from prefixgate.simulation.mock.gemini_part_params import check_file_data
from prefixgate.simulation.mock.gemini_signature_params import signature_for, signs
from prefixgate.simulation.mock.gemini_thinking import thought_tokens
from prefixgate.simulation.mock.google_pages import cache_page
from prefixgate.simulation.mock.server import MockContext, json_body, prompt_text, sse_response, tenant_of
from prefixgate.simulation.mock.text import reply_for, structured_reply
from prefixgate.tokens import count_tokens

_NO_KEY = ("Method doesn't allow unregistered callers (callers without established identity). Please use API Key "
           "or other form of API consumer identity to call this API.")
_ACTIONS = ("generateContent", "streamGenerateContent", "countTokens")


def authenticate(request: Request) -> str:
    key = request.headers.get("x-goog-api-key") or request.query_params.get("key")
    if not key:
        raise RequestError(_NO_KEY, status=403, kind="permission")
    return tenant_of(key)


def add_routes(app: FastAPI, ctx: MockContext) -> None:
    # The google-genai SDK calls v1 by default now; older clients and the REST docs use v1beta.
    for version in ("v1beta", "v1"):
        _add_version_routes(app, ctx, f"/{version}")

    @app.get("/v1beta/models")
    async def list_all(request: Request) -> dict:
        return list_models(request, ctx)

    @app.get("/v1beta/models/{model}")
    async def get_one(model: str, request: Request) -> dict:
        return get_model(request, ctx, model)


def list_models(request: Request, ctx: MockContext) -> dict:
    authenticate(request)
    return {"models": [_model_json(m) for m in retired.current(ctx, ctx.simulator.catalog.models_of("gemini"))]}


def get_model(request: Request, ctx: MockContext, model_id: str) -> dict:
    authenticate(request)
    model = _known(model_id, "get", ctx)
    if retired.is_retired(ctx, model):
        raise _not_found(model_id, "get")
    return _model_json(model)


async def model_action(ctx: MockContext, request: Request, tenant: str, target: str, body: dict,
                       fault_provider: str = "gemini") -> Response:
    """generateContent, streamGenerateContent or countTokens on `target` (`{model}:{method}`): the Gemini API's
    and Vertex's publishers/google models alike."""
    model, _, action = target.partition(":")
    if action not in _ACTIONS:
        raise RequestError(f"models/{target}: unknown method {action!r}", status=404, kind="not_found")
    fault = await ctx.fault_for(request, fault_provider, model)
    rules = _known(model, action, ctx)
    if fault_provider == "gemini" and retired.is_retired(ctx, rules):
        # Google routes a shut-down model to its replacement (mock/retired.py); Vertex's dates are its own.
        if not rules.replacement:
            raise _not_found(model, action)
        model = rules.replacement
        rules = _known(model, action, ctx)
    if action == "countTokens":
        return JSONResponse(_count_tokens(ctx, model, body, tenant))
    gemini_params.check_generate_body(body, rules)
    result = ctx.simulator.respond("gemini", body, now=ctx.clock(), tenant=tenant, model=model)
    turn = agent.gemini_turn(body)
    call = agent.decide(turn)
    limit = _max_output(body)
    thoughts = thought_tokens(body, rules.id, limit)    # billed as output, beside the answer's own tokens
    if call is not None:       # an agent's tool call (agent.py says when)
        usage = replace(result.usage, output=count_tokens(call.name + call.arguments) + thoughts)
        signature = signature_for(call.name, call.arguments) if signs(rules.id) else None
        if action == "generateContent":
            return JSONResponse(agent_wire.gemini_body(model, call, usage, thoughts, signature))
        events = list(agent_wire.gemini_events(model, call, usage, thoughts, signature))
    else:
        answer_limit = None if limit is None else limit - thoughts
        reply = structured_reply(turn) or reply_for(prompt_text(result.conversation), answer_limit)
        usage = replace(result.usage, output=reply.output_tokens + thoughts)
        finish = "MAX_TOKENS" if reply.truncated else "STOP"
        if action == "generateContent":
            return JSONResponse(dialect.build_response(model, reply.text, usage, finish_reason=finish,
                                                       thoughts=thoughts))
        events = dialect.stream_events(model, reply.chunks(), usage, finish_reason=finish, thoughts=thoughts)
    if request.query_params.get("alt") == "sse":
        return sse_response(events, fault, speaks="gemini")
    # Without alt=sse the REST API answers one JSON array of the chunks.
    chunks = [json.loads(e.decode().removeprefix("data: ")) for e in events]
    return JSONResponse(chunks)


def _add_version_routes(app: FastAPI, ctx: MockContext, prefix: str) -> None:
    @app.post(prefix + "/models/{target}")
    async def model_target(target: str, request: Request) -> Response:
        tenant = authenticate(request)
        # A part naming a file of the Files API (`files/x`, its uri) reads it as text; another project's is a 403.
        body = ctx.files.inlined(GEMINI, tenant, await json_body(request))
        return await model_action(ctx, request, tenant, target, body)

    @app.post(prefix + "/cachedContents")
    async def create_cache(request: Request) -> dict:
        tenant = authenticate(request)
        body = await json_body(request)
        fault = await ctx.fault_for(request, "gemini", body.get("model"))
        if "name" in body:
            raise RequestError("name: is output only and cannot be set on create", field="name")
        # A file the contents name is cached, and counted, as its content (Google's guide caches an upload).
        made = ctx.simulator.create_cached_content(ctx.files.inlined(GEMINI, tenant, body), now=ctx.clock(),
                                                   tenant=tenant).resource()
        return cut_off(made) if fault is not None and fault.cut_answer else made

    @app.get(prefix + "/cachedContents")
    async def list_caches(request: Request) -> dict:
        tenant = authenticate(request)
        await ctx.fault_for(request, "gemini", None)
        page, token = cache_page(ctx.simulator.list_cached_contents(now=ctx.clock(), tenant=tenant),
                                 request.query_params)
        return {"cachedContents": [c.resource() for c in page], **({"nextPageToken": token} if token else {})}

    @app.get(prefix + "/cachedContents/{cache_id}")
    async def get_cache(cache_id: str, request: Request) -> dict:
        tenant = authenticate(request)
        return ctx.simulator.get_cached_content(f"cachedContents/{cache_id}", now=ctx.clock(), tenant=tenant).resource()

    @app.patch(prefix + "/cachedContents/{cache_id}")
    async def update_cache(cache_id: str, request: Request) -> dict:
        tenant = authenticate(request)
        body = await json_body(request)
        await ctx.fault_for(request, "gemini", None)
        name = f"cachedContents/{cache_id}"
        return ctx.simulator.update_cached_content(name, body, now=ctx.clock(), tenant=tenant).resource()

    @app.delete(prefix + "/cachedContents/{cache_id}")
    async def delete_cache(cache_id: str, request: Request) -> dict:
        tenant = authenticate(request)
        ctx.simulator.delete_cached_content(f"cachedContents/{cache_id}", now=ctx.clock(), tenant=tenant)
        return {}


def _known(model: str, method: str, ctx: MockContext) -> ModelRules:
    try:
        return resolve_model("gemini", model, ctx.simulator.catalog)
    except UnknownModel:
        raise _not_found(model, method) from None


def _not_found(model: str, method: str) -> RequestError:
    return RequestError(f"models/{model} is not found for API version v1beta, or is not supported for {method}. Call "
                        "ListModels to see the list of available models and their supported methods.",
                        field="model", status=404, kind="not_found")


def _count_tokens(ctx: MockContext, model: str, body: dict, tenant: str) -> dict:
    request = body.get("generateContentRequest", body)
    if not isinstance(request, dict):
        raise RequestError("generateContentRequest: expected an object", field="generateContentRequest")
    path = "generate_content_request." if request is not body else ""
    check_file_data(request.get("contents"), f"{path}contents")
    config = proto_field(request, "generationConfig")
    if config is not None:
        check_config_types(config, f"{path}generation_config")
    request = {k: v for k, v in request.items() if k != "model"}
    total = ctx.simulator.count_tokens("gemini", request, model=model, tenant=tenant, now=ctx.clock())
    return {"totalTokens": total, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}]}


def _max_output(body: dict) -> int | None:
    config = body.get("generationConfig", body.get("generation_config")) or {}
    value = config.get("maxOutputTokens", config.get("max_output_tokens")) if isinstance(config, dict) else None
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise RequestError("generationConfig.maxOutputTokens: expected a positive integer",
                           field="generationConfig.maxOutputTokens")
    return value


def _model_json(model: ModelRules) -> dict:
    return {"name": f"models/{model.id}", "version": "001", "displayName": model.id,
            "inputTokenLimit": 1_048_576, "outputTokenLimit": model.max_output_tokens or gemini_params.OUTPUT_TOKEN_LIMIT,
            "supportedGenerationMethods": ["generateContent", "countTokens", "createCachedContent"]}
