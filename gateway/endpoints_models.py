"""Model listing, in each caller's own shape: `GET /v1/models` (OpenAI's list; Anthropic's when the request
carries `anthropic-version`, as the anthropic SDK's always does; Gemini's with a Google key header),
`GET /v1beta/models` (Gemini's), and one model by name under either.

The names are what the routes serve: each route's exact names, and every catalogue model of its target's
provider that the route's patterns match (zero config routes `gpt-*` to OpenAI, so every GPT id in
providers.toml is listed). A self-hosted server a route forwards patterns to (vLLM, SGLang, `prefixgate
backend`, which have no catalogue rows) is asked for its own list. A key limited to some routes sees only theirs. Model pickers (opencode,
gemini-cli, IDE plugins) and `models.list()` in every SDK read these.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from fnmatch import fnmatchcase

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import wire_format
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller, authenticate
from prefixgate.gateway.error_response import error_response
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.policies.router import is_pattern
from prefixgate.policies.schema import Upstream

router = APIRouter()
log = logging.getLogger("prefixgate.gateway")

# Catalogue provider whose rows an upstream of this kind serves (a compatible upstream names its own).
CATALOGUE_OF_KIND = {"openai": "openai", "anthropic": "anthropic", "gemini": "gemini", "bedrock": "bedrock"}
GEMINI_METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


@dataclass(frozen=True)
class Served:
    id: str
    route: str
    released: str = ""     # YYYY-MM-DD where the catalogue knows it


async def served_models(request: Request, caller: Caller) -> list[Served]:
    """Every model name the caller may send, in route order, each once."""
    proxy = request.app.state.proxy
    allowed = caller.key.routes if caller.key is not None and caller.key.routes else None
    out: dict[str, Served] = {}
    for route in proxy.policy.routes:
        if route.formats or (allowed is not None and route.name not in allowed):
            continue        # Vertex's route serves Vertex's own paths only
        for name in route.models:
            if not is_pattern(name):
                out.setdefault(name, Served(name, route.name))
        patterns = [m for m in route.models if is_pattern(m)]
        for ref in route.targets:
            for upstream_name in ref.upstreams:
                upstream = proxy.policy.upstreams[upstream_name]
                provider = upstream.provider or CATALOGUE_OF_KIND.get(upstream.kind, "")
                for rules in proxy.catalog.models_of(provider) if provider else ():
                    if any(fnmatchcase(rules.id, p) for p in patterns):
                        out.setdefault(rules.id, Served(rules.id, route.name, rules.released))
                if patterns and upstream.kind == "openai_compatible" and upstream.self_hosted:
                    for name in await upstream_models(request, upstream):
                        if any(fnmatchcase(name, p) for p in patterns):
                            out.setdefault(name, Served(name, route.name))
    return list(out.values())


async def upstream_models(request: Request, upstream: Upstream) -> list[str]:
    """A self-hosted server's own `GET /v1/models` ids; none (and a warning) when it does not answer."""
    path = "/models" if upstream.url.endswith("/v1") else "/v1/models"
    try:
        resp = await request.app.state.proxy.upstream.forward(upstream, wire_format(upstream.dialect), "GET", path, "",
                                                              b"", upstream.api_key(), timeout_s=10)
        return [m["id"] for m in json.loads(resp.body).get("data") or [] if isinstance(m.get("id"), str)]
    except (UpstreamFailure, ValueError, AttributeError, TypeError) as e:
        log.warning("upstream %r did not list its models: %s", upstream.name, e)
        return []


def shape_of(request: Request) -> str:
    """Whose list the caller expects: Anthropic's SDK sends `anthropic-version`; Google's a Google key."""
    if request.url.path.startswith("/v1beta/"):
        return "gemini"
    headers = request.headers
    if "anthropic-version" in headers:
        return "anthropic"
    if "x-goog-api-key" in headers or "key" in request.query_params:
        return "gemini"
    return "openai"


def openai_model(m: Served) -> dict:
    return {"id": m.id, "object": "model", "created": 0, "owned_by": m.route}


def anthropic_model(m: Served) -> dict:
    return {"type": "model", "id": m.id, "display_name": m.id,
            "created_at": f"{m.released or '1970-01-01'}T00:00:00Z"}


def gemini_model(m: Served) -> dict:
    return {"name": f"models/{m.id}", "baseModelId": m.id, "version": m.released or "001", "displayName": m.id,
            "description": f"{m.id}, served through prefixgate (route {m.route})",
            "supportedGenerationMethods": GEMINI_METHODS}


def listing(shape: str, models: list[Served]) -> dict:
    if shape == "anthropic":
        data = [anthropic_model(m) for m in models]
        return {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None}
    if shape == "gemini":
        return {"models": [gemini_model(m) for m in models]}
    return {"object": "list", "data": [openai_model(m) for m in models]}


ONE = {"openai": openai_model, "anthropic": anthropic_model, "gemini": gemini_model}


def _json(body: dict) -> Response:
    return Response(compact_bytes(body), media_type="application/json")


@router.get("/v1/models")
@router.get("/v1beta/models")
async def list_models(request: Request) -> Response:
    shape = shape_of(request)
    try:
        caller = authenticate(request.headers, request.query_params, request.app.state.proxy.keys)
    except RequestError as e:
        return error_response(e, shape)
    return _json(listing(shape, await served_models(request, caller)))


@router.get("/{version}/models/{model_id:path}")
async def get_model(request: Request, version: str, model_id: str) -> Response:
    shape = shape_of(request)
    try:
        caller = authenticate(request.headers, request.query_params, request.app.state.proxy.keys)
        if version not in ("v1", "v1beta"):
            raise RequestError(f"unknown path {request.url.path}", status=404, kind="not_found")
        name = model_id.removeprefix("models/")
        found = next((m for m in await served_models(request, caller) if m.id == name), None)
        if found is None:
            raise RequestError(f"model {name!r} is not served by this gateway", field="model", status=404,
                               kind="not_found")
    except RequestError as e:
        return error_response(e, shape)
    return _json(ONE[shape](found))
