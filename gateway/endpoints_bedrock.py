"""Bedrock Runtime's CountTokens (`POST /model/{modelId}/count-tokens`; model requests are served by the gateway's
front, fastpath): asked of Bedrock when the route ends there (its count is the billing one), otherwise counted
here, as Anthropic's count_tokens is."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import bedrock_invoke, converse
from prefixgate.dialects.bedrock import counted_request
from prefixgate.gateway.auth import upstream_credential
from prefixgate.gateway.error_response import answer_or_error
from prefixgate.gateway.intake import authenticated_body
from prefixgate.tokens import annotate_tokens

router = APIRouter()
WIRES = {"invoke": bedrock_invoke.WIRE, "converse": converse.WIRE}


@router.post("/model/{model_id:path}/count-tokens")
async def count_tokens(request: Request, model_id: str) -> Response:
    return await answer_or_error(bedrock_invoke.WIRE.name, _count_tokens(request, model_id))


async def _count_tokens(request: Request, model_id: str) -> Response:
    proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    operation, body = counted_request(raw)
    wire = WIRES[operation]
    conv = wire.parse_request(body, model=model_id)     # checked here, whoever counts it
    route = proxy.router.decide(model_id, caller.key, wire.name).route
    ref = route.targets[0]
    upstream = proxy.policy.upstreams[ref.upstreams[0]]
    if upstream.dialect_for(wire.name) == wire.name:    # Bedrock itself: the caller's request, for the route's model
        key = upstream_credential(upstream, caller, wire.name)
        path = f"/model/{quote(ref.model or model_id, safe='')}/count-tokens"
        resp = await proxy.upstream.forward(upstream, wire, "POST", path, "", raw, key)
        return Response(resp.body, resp.status, media_type="application/json")
    return Response(compact_bytes({"inputTokens": annotate_tokens(conv, "cl100k_base")}), media_type="application/json")
