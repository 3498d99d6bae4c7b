"""Mock OpenAI Chat Completions API: `/v1/chat/completions` and `/v1/models` (when no Anthropic headers)."""

from __future__ import annotations

from dataclasses import replace

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from prefixgate.dialects import openai as dialect
from prefixgate.errors import RequestError
from prefixgate.providers.files import OPENAI
from prefixgate.providers.pricing import resolve_model
from prefixgate.simulation.mock import agent, agent_wire, audio, openai_params, retired
from prefixgate.simulation.mock.server import MockContext, json_body, prompt_text, sse_response, tenant_of
from prefixgate.simulation.mock.service_tier import openai_tier
from prefixgate.simulation.mock.text import reply_for, structured_reply
from prefixgate.tokens import count_tokens, encoding_for

_NO_KEY = ("You didn't provide an API key. You need to provide your API key in an Authorization header using "
           "Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")


def authenticate(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    if not key:
        raise RequestError(_NO_KEY, status=401, kind="authentication")
    # Caches are per organisation; the OpenAI-Organization header selects one, else the key stands for it.
    return tenant_of(request.headers.get("openai-organization") or key)


def add_routes(app: FastAPI, ctx: MockContext) -> None:
    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        tenant = authenticate(request)
        body = await json_body(request)
        openai_params.check_chat_body(body)
        retired.refuse(ctx, "openai", str(body.get("model", "")))
        body = ctx.files.inlined(OPENAI, tenant, body)     # a `file` part reads the organisation's file
        fault = await ctx.fault_for(request, "openai", body.get("model"))
        result = ctx.simulator.respond("openai", body, now=ctx.clock(), tenant=tenant)
        tier = openai_tier(body, fault)
        model = body["model"]
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        encoding = encoding_for("openai", result.model.id)
        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage")) if isinstance(options, dict) else False
        turn = agent.chat_turn(body)
        call = agent.decide(turn)
        if call is not None:       # an agent's tool call (agent.py says when)
            usage = replace(result.usage, output=count_tokens(call.name + call.arguments, encoding))
            if result.conversation.stream:
                return sse_response(agent_wire.chat_events(model, call, usage, include_usage), fault, speaks="openai")
            return JSONResponse(agent_wire.chat_body(model, call, usage))
        reply = structured_reply(turn, encoding) or reply_for(prompt_text(result.conversation), limit, encoding,
                                                        fault.answer_words if fault else None)
        usage = replace(result.usage, output=reply.output_tokens)
        finish = "length" if reply.truncated else "stop"
        if result.conversation.stream:
            events = dialect.stream_events(model, reply.chunks(), usage, finish_reason=finish,
                                           include_usage=include_usage, service_tier=tier)
            return sse_response(events, fault, speaks="openai")
        answer = dialect.build_response(model, reply.text, usage, finish_reason=finish) | {"service_tier": tier}
        return JSONResponse(audio.with_audio(answer, body, ctx.clock()))


def list_models(request: Request, ctx: MockContext) -> dict:
    authenticate(request)
    return {"object": "list", "data": [_model(m.id) for m in retired.current(ctx, ctx.simulator.catalog.models_of("openai"))]}


def get_model(request: Request, ctx: MockContext, model_id: str) -> dict:
    authenticate(request)
    model = resolve_model("openai", model_id, ctx.simulator.catalog)
    retired.refuse(ctx, "openai", model_id, model)
    return _model(model.id)


def _model(model_id: str) -> dict:
    return {"id": model_id, "object": "model", "created": 1_700_000_000, "owned_by": "openai"}
