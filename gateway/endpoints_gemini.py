"""Gemini's paths, under `/v1beta` and `/v1` (google-genai uses either, by version):
`models/{model}:generateContent`, `:streamGenerateContent?alt=sse`, `:countTokens`, and the
`cachedContents` resource, passed through to Gemini."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import gemini
from prefixgate.errors import RequestError
from prefixgate.gateway import cache_scope
from prefixgate.gateway.auth import upstream_credential
from prefixgate.gateway.error_response import answer_or_error, error_response
from prefixgate.gateway.intake import authenticated_body, serve
from prefixgate.gateway.named_state import check_counted
from prefixgate.gateway.upstream import CACHED_CONTENTS_QUERY, UpstreamResponse, allowed_query
from prefixgate.model_ids import path_model
from prefixgate.tokens import annotate_tokens

router = APIRouter()
WIRE = gemini.WIRE


@router.post("/{version}/models/{target}")
async def model_action(request: Request, version: str, target: str) -> Response:
    model, _, action = target.rpartition(":")
    if version not in ("v1beta", "v1") or not model:
        return error_response(RequestError(f"unknown path {request.url.path}", status=404, kind="not_found"), WIRE.name)
    parse = gemini.generate_parser(target)
    if parse is not None:      # the gateway's front serves these itself (fastpath); kept for the router alone
        return await serve(request.app.state.proxy, request, WIRE.name, parse)
    if action == "countTokens":
        return await answer_or_error(WIRE.name, _count_tokens(request, version, model))
    return error_response(RequestError(f"unsupported Gemini method {action!r}", status=404, kind="not_found"), WIRE.name)


async def _count_tokens(request: Request, version: str, model: str) -> Response:
    proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    await check_counted(proxy.stored_ids, caller, raw)
    route = proxy.router.decide(model, caller.key).route
    upstream = proxy.policy.upstreams[route.targets[0].upstreams[0]]
    if upstream.dialect == WIRE.name:
        target_model = route.targets[0].model or model
        key = upstream_credential(upstream, caller, WIRE.name)
        resp = await proxy.upstream.forward(upstream, WIRE, "POST", f"/{version}/models/{path_model(target_model)}:countTokens", "",
                                            raw, key)
        return Response(resp.body, resp.status, media_type="application/json")
    conv = gemini.parse_request(gemini.counted_request(raw), model=model)
    return Response(compact_bytes({"totalTokens": annotate_tokens(conv, "cl100k_base")}), media_type="application/json")


@router.api_route("/{version}/cachedContents", methods=["GET", "POST"])
@router.api_route("/{version}/cachedContents/{name}", methods=["GET", "PATCH", "DELETE"])
async def cached_contents(request: Request, version: str, name: str = "") -> Response:
    return await answer_or_error(WIRE.name, _cached_contents(request, version, name))


async def _cached_contents(request: Request, version: str, name: str) -> Response:
    """Explicit Gemini caches are Gemini's resources in the gateway's account, each owned by the tenant that made
    it (cache_scope): passed through with the gateway's key."""
    proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    builtin = proxy.policy.upstreams[WIRE.name]
    upstream = await cache_scope.home(proxy, caller, WIRE.name, builtin.kind, request.method, raw, name) or builtin
    query = allowed_query(request.query_params.multi_items(), CACHED_CONTENTS_QUERY)
    if version not in ("v1beta", "v1"):
        raise RequestError(f"unknown path {request.url.path}", status=404, kind="not_found")
    path = f"/{version}/cachedContents" + (f"/{path_model(name, field='name')}" if name else "")

    async def forward(method: str, body: bytes, timeout_s: float) -> UpstreamResponse:
        key = upstream_credential(upstream, caller, WIRE.name)
        return await proxy.upstream.forward(upstream, WIRE, method, path, query if method == request.method else "",
                                            body, key, timeout_s)

    return await cache_scope.scoped(request, proxy, caller, WIRE.name, upstream, name, raw, forward)
