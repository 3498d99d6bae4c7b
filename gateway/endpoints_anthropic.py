"""Anthropic's paths: `POST /v1/messages` and `POST /v1/messages/count_tokens`."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.dialects import anthropic
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import authenticate, upstream_credential
from prefixgate.gateway.intake import error_response, read_body, serve
from prefixgate.gateway.proxy import dumps
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.tokens import annotate_tokens

router = APIRouter()


# The gateway's front serves this path itself (fastpath); the route keeps the router usable on its own.
@router.post("/v1/messages")
async def messages(request: Request) -> Response:
    return await serve(request.app.state.proxy, request, "anthropic", anthropic.parse_request)


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request) -> Response:
    """Asked of Anthropic when the route ends there (its count is the billing one); otherwise counted here."""
    proxy = request.app.state.proxy
    try:
        raw = await read_body(request, proxy.settings.max_body_bytes)
        caller = authenticate(request.headers, request.query_params, proxy.keys)
        conv = anthropic.parse_request(raw, count_tokens=True)
        route = proxy.router.decide(conv.model or "", caller.key).route
        upstream = proxy.policy.upstreams[route.targets[0].upstreams[0]]
        if upstream.dialect == "anthropic":
            body = dumps({**anthropic.encode_request(conv), "model": route.targets[0].model or conv.model})
            key = upstream_credential(upstream, caller, "anthropic")
            resp = await proxy.upstream.forward(upstream, "POST", "/v1/messages/count_tokens", "", body, key)
            return Response(resp.body, resp.status, media_type="application/json")
        return Response(dumps({"input_tokens": annotate_tokens(conv, "cl100k_base")}), media_type="application/json")
    except UpstreamFailure as f:
        return error_response(f.request_error(), "anthropic")
    except RequestError as e:
        return error_response(e, "anthropic")
