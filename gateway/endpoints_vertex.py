"""Vertex AI's other paths, at the root and under `/vertex_ai` (model requests are served by the gateway's
front, fastpath): token counts (Gemini's `:countTokens`, Claude's `count-tokens:rawPredict`) and Gemini's
`cachedContents`, passed through to Vertex in the gateway's project with the gateway's credentials. A caller's
project and location in the path are its own view; the cache names Vertex answers with are the gateway's."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import anthropic, gemini, vertex_anthropic, vertex_gemini
from prefixgate.dialects.validate import load_body
from prefixgate.dialects.vertex import resource_rest
from prefixgate.errors import RequestError
from prefixgate.gateway import cache_scope
from prefixgate.gateway.auth import Caller, upstream_credential
from prefixgate.gateway.error_response import answer_or_error, error_response
from prefixgate.gateway.intake import authenticated_body
from prefixgate.gateway.named_state import check_counted, check_named
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.upstream import CACHED_CONTENTS_QUERY, UpstreamResponse, allowed_query
from prefixgate.model_ids import path_model
from prefixgate.policies.schema import Upstream
from prefixgate.tokens import annotate_tokens

router = APIRouter()
_SCOPE = "/{version}/projects/{project}/locations/{location}"


def _routes(prefix: str) -> None:
    router.add_api_route(f"{prefix}{_SCOPE}/publishers/{{publisher}}/models/{{target}}", model_action, methods=["POST"])
    router.add_api_route(f"{prefix}{_SCOPE}/cachedContents", cached_contents, methods=["GET", "POST"])
    router.add_api_route(f"{prefix}{_SCOPE}/cachedContents/{{name}}", cached_contents, methods=["GET", "PATCH", "DELETE"])


async def model_action(request: Request, publisher: str, target: str) -> Response:
    wire = vertex_anthropic.WIRE if publisher == "anthropic" else vertex_gemini.WIRE
    model, _, action = target.rpartition(":")
    if publisher == "anthropic" and target == f"{vertex_anthropic.COUNT_TOKENS}:rawPredict":
        return await answer_or_error(wire.name, _count_claude_tokens(request))
    if publisher == "google" and action == "countTokens":
        return await answer_or_error(wire.name, _count_gemini_tokens(request, model))
    return error_response(RequestError(f"unsupported Vertex method {target!r} on {publisher} models", status=404,
                                       kind="not_found"), wire.name)


async def _count_claude_tokens(request: Request) -> Response:
    proxy: Proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    conv = anthropic.parse_request(raw, count_tokens=True)
    await check_named(proxy.stored_ids, caller, conv)     # a count reads what it names
    upstream = cache_scope.routed(proxy, conv.model or "", caller, vertex_anthropic.NAME, "vertex")
    if upstream is None:
        return Response(compact_bytes({"input_tokens": annotate_tokens(conv, "cl100k_base")}), media_type="application/json")
    path = f"/publishers/anthropic/models/{vertex_anthropic.COUNT_TOKENS}:rawPredict"
    return await _forward(proxy, upstream, vertex_anthropic.WIRE, "POST", path, "", raw, caller)


async def _count_gemini_tokens(request: Request, model: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    await check_counted(proxy.stored_ids, caller, raw)
    upstream = cache_scope.routed(proxy, model, caller, vertex_gemini.NAME, "vertex")
    if upstream is None:
        conv = gemini.parse_request(raw, model=model)
        return Response(compact_bytes({"totalTokens": annotate_tokens(conv, "cl100k_base")}), media_type="application/json")
    path = f"/publishers/google/models/{path_model(model)}:countTokens"
    body = load_body(raw)      # a cache named under the caller's project: where the upstream keeps it
    scoped = vertex_gemini.caches_at(body, upstream.url)
    sent = raw if scoped is body else compact_bytes(scoped)
    return await _forward(proxy, upstream, vertex_gemini.WIRE, "POST", path, "", sent, caller)


async def cached_contents(request: Request, name: str = "") -> Response:
    return await answer_or_error(vertex_gemini.NAME, _cached_contents(request, name))


async def _cached_contents(request: Request, name: str = "") -> Response:
    proxy: Proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    if "name" in request.path_params:     # one segment, decoded once: never `%2F..` into another project
        path_model(request.path_params["name"], field="name")
    upstream = await cache_scope.home(proxy, caller, vertex_gemini.NAME, "vertex", request.method, raw, name) \
        or _named_scope(proxy, request)
    sent = compact_bytes(_in_gateway_project(raw, upstream)) if request.method == "POST" and raw else raw
    query = allowed_query(request.query_params.multi_items(), CACHED_CONTENTS_QUERY)
    path = resource_rest(request.url.path) or ""

    async def forward(method: str, body: bytes, timeout_s: float) -> UpstreamResponse:
        key = upstream_credential(upstream, caller, vertex_gemini.NAME)
        return await proxy.upstream.forward(upstream, vertex_gemini.WIRE, method, path,
                                            query if method == request.method else "", body, key, timeout_s)

    return await cache_scope.scoped(request, proxy, caller, vertex_gemini.NAME, upstream, name, sent, forward)


def _named_scope(proxy: Proxy, request: Request) -> Upstream:
    """Where a cachedContents call goes when its cache's home is not known (`cache_scope.home`; google-genai names
    a cache under the client's own project): the Vertex upstream whose project and location its path names, else
    one in its location (a list of the caller's caches there: the client names its own project, the region is
    where it looks)."""
    vertex = [u for u in proxy.policy.upstreams.values() if u.kind == "vertex"]
    scope = request.url.path.partition("/projects/")[2].partition("/cachedContents")[0]
    named = [u for u in vertex if u.url.endswith(f"/projects/{scope}")]
    named += [u for u in vertex if u.url.endswith(f"/locations/{request.path_params.get('location')}")]
    if named:
        return named[0]
    return next((u for u in vertex if u.name != "vertex"), proxy.policy.upstreams["vertex"])


def _in_gateway_project(raw: bytes, upstream: Upstream) -> dict:
    """A cachedContents.create body whose model names the caller's project: the gateway's instead."""
    body = load_body(raw)
    model = str(body.get("model") or "")
    if "/models/" in model:
        body["model"] = model.rsplit("/models/", 1)[1]
    return vertex_gemini.WIRE.explicit_cache_body(upstream.url, body) if body.get("model") else body


async def _forward(proxy: Proxy, upstream: Upstream, wire: vertex_gemini.VertexGemini | vertex_anthropic.VertexAnthropic,
                   method: str, path: str, query: str, raw: bytes, caller: Caller) -> Response:
    key = upstream_credential(upstream, caller, wire.name)
    resp = await proxy.upstream.forward(upstream, wire, method, path, query, raw, key)
    return Response(resp.body, resp.status, media_type="application/json")


for _prefix in ("", "/vertex_ai"):
    _routes(_prefix)
