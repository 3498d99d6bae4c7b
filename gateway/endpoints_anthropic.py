"""Anthropic's paths: `POST /v1/messages` and `POST /v1/messages/count_tokens`."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import anthropic
from prefixgate.gateway.auth import upstream_credential
from prefixgate.gateway.error_response import answer_or_error
from prefixgate.gateway.intake import authenticated_body, serve
from prefixgate.gateway.named_state import check_named
from prefixgate.gateway.upstream import forwarded_headers, takes_callers_headers
from prefixgate.tokens import annotate_tokens

router = APIRouter()
WIRE = anthropic.WIRE


# The gateway's front serves this path itself (fastpath); the route keeps the router usable on its own.
@router.post("/v1/messages")
async def messages(request: Request) -> Response:
    return await serve(request.app.state.proxy, request, WIRE.name, anthropic.parse_request)


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request) -> Response:
    return await answer_or_error(WIRE.name, _count_tokens(request))


async def _count_tokens(request: Request) -> Response:
    """Asked of Anthropic when the route ends there (its count is the billing one); otherwise counted here."""
    proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    conv = anthropic.parse_request(raw, count_tokens=True)
    await check_named(proxy.stored_ids, caller, conv)     # a count reads what it names
    route = proxy.router.decide(conv.model or "", caller.key).route
    ref, upstream = await proxy.counted_on(WIRE, conv, route)     # where a file it names lives
    if upstream.dialect == WIRE.name:
        body = compact_bytes({**anthropic.encode_request(conv), "model": ref.model or conv.model})
        key = upstream_credential(upstream, caller, WIRE.name)
        # The caller's version and betas (a beta field in the body is refused without its header), as a model
        # request sends them, to Anthropic itself only.
        own = forwarded_headers(WIRE, request.headers) if takes_callers_headers(upstream) else {}
        resp = await proxy.upstream.forward(upstream, WIRE, "POST", "/v1/messages/count_tokens", "", body, key,
                                            caller_headers=own)
        return Response(resp.body, resp.status, media_type="application/json")
    return Response(compact_bytes({"input_tokens": annotate_tokens(conv, "cl100k_base")}), media_type="application/json")
