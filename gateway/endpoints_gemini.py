"""Gemini's paths, under `/v1beta` and `/v1` (google-genai uses either, by version):
`models/{model}:generateContent`, `:streamGenerateContent?alt=sse`, `:countTokens`, and the
`cachedContents` resource, passed through to Gemini."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.dialects import gemini
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import authenticate, upstream_credential
from prefixgate.gateway.intake import error_response, read_body, serve
from prefixgate.gateway.proxy import dumps
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.ir import Conversation
from prefixgate.tokens import annotate_tokens

router = APIRouter()


def generate_parser(target: str) -> Callable[[bytes], Conversation] | None:
    """The body parser for a `{model}:generateContent` or `:streamGenerateContent` target, else None."""
    model, _, action = target.rpartition(":")
    if not model or action not in ("generateContent", "streamGenerateContent"):
        return None
    stream = action == "streamGenerateContent"

    def parse(raw: bytes) -> Conversation:
        conv = gemini.parse_request(raw, model=model)
        conv.stream = stream       # Gemini streams by URL, not by a body field
        return conv
    return parse


@router.post("/{version}/models/{target}")
async def model_action(request: Request, version: str, target: str) -> Response:
    model, _, action = target.rpartition(":")
    if version not in ("v1beta", "v1") or not model:
        return error_response(RequestError(f"unknown path {request.url.path}", status=404, kind="not_found"), "gemini")
    parse = generate_parser(target)
    if parse is not None:      # the gateway's front serves these itself (fastpath); kept for the router alone
        return await serve(request.app.state.proxy, request, "gemini", parse)
    if action == "countTokens":
        return await _count_tokens(request, version, model)
    return error_response(RequestError(f"unsupported Gemini method {action!r}", status=404, kind="not_found"), "gemini")


async def _count_tokens(request: Request, version: str, model: str) -> Response:
    proxy = request.app.state.proxy
    try:
        raw = await read_body(request, proxy.settings.max_body_bytes)
        caller = authenticate(request.headers, request.query_params, proxy.keys)
        route = proxy.router.decide(model, caller.key).route
        upstream = proxy.policy.upstreams[route.targets[0].upstreams[0]]
        if upstream.dialect == "gemini":
            target_model = route.targets[0].model or model
            key = upstream_credential(upstream, caller, "gemini")
            resp = await proxy.upstream.forward(upstream, "POST", f"/{version}/models/{target_model}:countTokens", "", raw, key)
            return Response(resp.body, resp.status, media_type="application/json")
        conv = gemini.parse_request(raw, model=model)
        return Response(dumps({"totalTokens": annotate_tokens(conv, "cl100k_base")}), media_type="application/json")
    except UpstreamFailure as f:
        return error_response(f.request_error(), "gemini")
    except RequestError as e:
        return error_response(e, "gemini")


@router.api_route("/{version}/cachedContents", methods=["GET", "POST"])
@router.api_route("/{version}/cachedContents/{name}", methods=["GET", "PATCH", "DELETE"])
async def cached_contents(request: Request, version: str, name: str = "") -> Response:
    """Explicit Gemini caches are Gemini's own resources: passed through with the gateway's key."""
    proxy = request.app.state.proxy
    try:
        raw = await read_body(request, proxy.settings.max_body_bytes)
        caller = authenticate(request.headers, request.query_params, proxy.keys)
        upstream = proxy.policy.upstreams["gemini"]
        key = upstream_credential(upstream, caller, "gemini")
        query = "&".join(f"{k}={v}" for k, v in request.query_params.items() if k != "key")
        path = f"/{version}/cachedContents" + (f"/{name}" if name else "")
        resp = await proxy.upstream.forward(upstream, request.method, path, query, raw, key)
        return Response(resp.body, resp.status, media_type="application/json")
    except UpstreamFailure as f:
        return error_response(f.request_error(), "gemini")
    except RequestError as e:
        return error_response(e, "gemini")
