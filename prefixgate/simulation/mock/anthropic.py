"""Mock Anthropic Messages API: `/v1/messages`, `/v1/messages/count_tokens`, `/v1/models`."""

from __future__ import annotations

import uuid
from dataclasses import replace

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from prefixgate.dialects import anthropic as dialect
from prefixgate.errors import RequestError
from prefixgate.providers.files import ANTHROPIC
from prefixgate.providers.pricing import resolve_model
from prefixgate.simulation.mock import agent, agent_wire, anthropic_params, retired
from prefixgate.simulation.mock.code_execution import executed, runs_code, streamed
from prefixgate.simulation.mock.files import names_a_file, require_beta
from prefixgate.simulation.mock.server import MockContext, json_body, prompt_text, sse_response, tenant_of
from prefixgate.simulation.mock.service_tier import anthropic_tier
from prefixgate.simulation.mock.text import reply_for, structured_reply
from prefixgate.tokens import count_tokens


def authenticate(request: Request) -> str:
    """The caller's workspace; Anthropic wants `x-api-key` (or a bearer token) and `anthropic-version`."""
    key = request.headers.get("x-api-key")
    auth = request.headers.get("authorization", "")
    if not key and auth.lower().startswith("bearer "):
        key = auth[7:].strip()
    if not key:
        raise RequestError("x-api-key header is required", status=401, kind="authentication")
    if not request.headers.get("anthropic-version"):
        raise RequestError("anthropic-version: header is required", field="anthropic-version")
    return tenant_of(key)


async def answer(ctx: MockContext, request: Request, body: dict, tenant: str, fault_provider: str = "anthropic") -> Response:
    """A Messages API answer to `body` (Anthropic's own API, and Claude on Vertex with the path's model)."""
    fault = await ctx.fault_for(request, fault_provider, body.get("model"))
    container = ctx.containers.anthropic(body, tenant, ctx.clock())
    result = ctx.simulator.respond("anthropic", body, now=ctx.clock(), tenant=tenant)
    result = replace(result, usage=replace(result.usage, service_tier=anthropic_tier(body, fault)))
    model, message_id = body["model"], dialect.new_id()
    headers = {"request-id": "req_" + uuid.uuid4().hex[:24]}
    turn = agent.messages_turn(body)
    call = agent.decide(turn)
    if call is not None:       # an agent's tool call (agent.py says when)
        usage = replace(result.usage, output=count_tokens(call.name + call.arguments))
        if result.conversation.stream:
            return sse_response(agent_wire.messages_events(model, call, usage), fault, headers, speaks="anthropic")
        return JSONResponse(agent_wire.messages_body(model, call, usage), headers=headers)
    reply = structured_reply(turn) or reply_for(prompt_text(result.conversation), body["max_tokens"],
                                                  words=fault.answer_words if fault else None)
    usage = replace(result.usage, output=reply.output_tokens)
    finish = "max_tokens" if reply.truncated else "end_turn"
    # Claude API only: Bedrock and Vertex do not document cache diagnostics.
    extra = ctx.anthropic_diagnostics.answer(body, tenant, message_id, usage) if fault_provider == "anthropic" else {}
    extra |= container
    # Claude on Vertex or Bedrock runs no code.
    ran = executed(ctx.files, tenant) if fault_provider == "anthropic" and runs_code(body) else []
    if result.conversation.stream:
        events = dialect.stream_events(model, reply.chunks(), usage, finish_reason=finish, id=message_id, extra=extra)
        return sse_response(streamed(ran, events) if ran else events, fault, headers, speaks="anthropic")
    built = dialect.build_response(model, reply.text, usage, finish_reason=finish, id=message_id, extra=extra)
    built["content"] = [*ran, *built["content"]]
    return JSONResponse(built, headers=headers)


def add_routes(app: FastAPI, ctx: MockContext) -> None:
    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        tenant = authenticate(request)
        body = await json_body(request)
        model_name = str(body.get("model", ""))
        model = resolve_model("anthropic", model_name, ctx.simulator.catalog)
        retired.refuse(ctx, "anthropic", model_name, model)
        anthropic_params.check_body(body, request.headers["anthropic-version"], model.id,
                                    request.headers.get("anthropic-beta", ""))
        if names_a_file(body):
            require_beta(request.headers.get("anthropic-beta", ""))
        return await answer(ctx, request, ctx.files.inlined(ANTHROPIC, tenant, body), tenant)

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> dict:
        tenant = authenticate(request)
        body = await json_body(request)
        anthropic_params.check_count_body(body, request.headers.get("anthropic-beta", ""))
        retired.refuse(ctx, "anthropic", str(body.get("model", "")))
        if names_a_file(body):
            require_beta(request.headers.get("anthropic-beta", ""))
        return await count(ctx, request, ctx.files.inlined(ANTHROPIC, tenant, body))     # a file counts as its text


async def count(ctx: MockContext, request: Request, body: dict, fault_provider: str = "anthropic") -> dict:
    """count_tokens on a Messages body (Anthropic's own API, and Vertex's count-tokens:rawPredict)."""
    await ctx.fault_for(request, fault_provider, body.get("model"))
    resolve_model("anthropic", str(body.get("model", "")), ctx.simulator.catalog)
    return {"input_tokens": ctx.simulator.count_tokens("anthropic", body)}


def list_models(request: Request, ctx: MockContext) -> dict:
    authenticate(request)
    data = [_model_json(m.id, m.released) for m in retired.current(ctx, ctx.simulator.catalog.models_of("anthropic"))]
    return {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None}


def get_model(request: Request, ctx: MockContext, model_id: str) -> dict:
    authenticate(request)
    m = resolve_model("anthropic", model_id, ctx.simulator.catalog)
    retired.refuse(ctx, "anthropic", model_id, m)
    return _model_json(m.id, m.released)


def _model_json(model_id: str, released: str) -> dict:
    return {"type": "model", "id": model_id, "display_name": model_id,
            "created_at": f"{released or '2025-01-01'}T00:00:00Z"}
