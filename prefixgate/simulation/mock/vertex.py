"""Mock Vertex AI: Claude (`publishers/anthropic`) and Gemini (`publishers/google`) under a project and
location, Vertex's `cachedContents`, and the Google OAuth2 token endpoint the gateway's credentials use.

Paths, at the mock's root (as on `https://{location}-aiplatform.googleapis.com`):

    POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:rawPredict | :streamRawPredict
    POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/count-tokens:rawPredict
    POST /{v1|v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent
         | :streamGenerateContent (?alt=sse) | :countTokens
    POST|GET /{v1|v1beta1}/projects/{p}/locations/{l}/cachedContents, GET|PATCH|DELETE .../cachedContents/{id}
                                          (the list a page at a time: google_pages.py)
    POST /token                           OAuth2: JWT-bearer (service account) and refresh_token grants
    GET  /_mock/vertex/cachedContents     every cache ever created (deleted and expired too) with its
                                          token-hours of storage so far: what Google would bill

Claude's body is Anthropic's without `model` (the path names it) and with `anthropic_version`
(`vertex-2023-10-16`, or the API date anthropic-python 2.x sends); caching and usage as Anthropic's. Gemini's
usage is the Gemini API's (no `trafficType` yet); caches take the full model name
`projects/{p}/locations/{l}/publishers/google/models/{m}` and are named
`projects/{p}/locations/{l}/cachedContents/{id}`. Caches are per project and location, as Vertex's are. Which
model ids Vertex serves, and its 404 for the others: vertex_models.py.

Auth: `Authorization: Bearer` with a token this mock issued from /token and not yet expired (lifetime
PREFIXGATE_MOCK_VERTEX_TOKEN_LIFETIME seconds, default 3600), or the static PREFIXGATE_MOCK_VERTEX_TOKEN
(default `mock-vertex-token`); anything else is Google's 401 UNAUTHENTICATED. Faults: `provider: vertex`.
"""

from __future__ import annotations

import os
import re
import secrets
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from prefixgate.errors import RequestError
from prefixgate.providers.cached_contents import CachedContent
from prefixgate.providers.pricing import resolve_model
from prefixgate.simulation.mock import anthropic as mock_anthropic
from prefixgate.simulation.mock import anthropic_params
from prefixgate.simulation.mock import gemini as mock_gemini
from prefixgate.simulation.mock.google_pages import cache_page
from prefixgate.simulation.mock.server import MockContext, json_body, tenant_of
from prefixgate.simulation.mock.vertex_models import claude_id, gemini_rules

VERSION = "vertex-2023-10-16"
_API_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DEFAULT_STATIC_TOKEN = "mock-vertex-token"
_UNAUTHENTICATED = ("Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
                    "or other valid authentication credential. See "
                    "https://developers.google.com/identity/sign-in/web/devconsole-project.")
_SCOPE = "/projects/{project}/locations/{location}"


def authenticate(request: Request, ctx: MockContext, project: str) -> str:
    """The project's cache scope, after checking the bearer token."""
    auth = request.headers.get("authorization", "")
    token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    static = os.environ.get("PREFIXGATE_MOCK_VERTEX_TOKEN", DEFAULT_STATIC_TOKEN)
    issued = ctx.vertex_tokens.get(token)
    if not token or not (token == static or (issued is not None and ctx.clock() < issued)):
        # Google's front end refuses it before a publisher sees it: Google's error shape on every path.
        raise RequestError(_UNAUTHENTICATED, status=401, kind="authentication")
    return tenant_of(f"vertex:{project}")


def add_routes(app: FastAPI, ctx: MockContext) -> None:
    @app.post("/token")
    async def token(request: Request) -> dict:
        form = await request.form()
        grant = form.get("grant_type")
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            if str(form.get("assertion", "")).count(".") != 2:
                raise RequestError("invalid_grant: the assertion is not a JWT", field="assertion")
        elif grant == "refresh_token":
            if not form.get("refresh_token"):
                raise RequestError("invalid_request: refresh_token is required", field="refresh_token")
        else:
            raise RequestError(f"unsupported_grant_type: {grant!r}", field="grant_type")
        lifetime = int(os.environ.get("PREFIXGATE_MOCK_VERTEX_TOKEN_LIFETIME", "3600"))
        issued = "ya29.mock-" + secrets.token_urlsafe(24)
        ctx.vertex_tokens[issued] = ctx.clock() + lifetime
        return {"access_token": issued, "expires_in": lifetime, "token_type": "Bearer"}

    @app.post("/v1" + _SCOPE + "/publishers/anthropic/models/{target}")
    async def claude(project: str, location: str, target: str, request: Request) -> Response:
        tenant = authenticate(request, ctx, project)
        model, _, method = target.partition(":")
        body = await json_body(request)
        version = body.get("anthropic_version")
        # Vertex's own version, or an Anthropic API date (what anthropic-python 2.x's AnthropicVertex sends).
        if not (version == VERSION or (isinstance(version, str) and _API_DATE.match(version))):
            raise RequestError(f"anthropic_version: required on Vertex AI ({VERSION!r} or an Anthropic API "
                               f"version date), got {version!r}", field="anthropic_version")
        messages_body = {k: v for k, v in body.items() if k != "anthropic_version"}
        scope = f"projects/{project}/locations/{location}"
        if model == "count-tokens" and method == "rawPredict":
            # The body names the model as Vertex versions it (`claude-haiku-4-5@20251001`), as AnthropicVertex sends it.
            if isinstance(messages_body.get("model"), str):
                messages_body["model"] = claude_id(ctx.simulator.catalog, messages_body["model"], scope)
            return JSONResponse(await mock_anthropic.count(ctx, request, messages_body, fault_provider="vertex"))
        if method not in ("rawPredict", "streamRawPredict"):
            raise RequestError(f"{target}: unknown method {method!r}", status=404, kind="not_found")
        if "model" in body:
            raise RequestError("model: Extra inputs are not permitted (the URL names the model)", field="model")
        # streamRawPredict streams whatever the body says; the SDK keeps `stream: true` in it.
        messages_body["model"] = claude_id(ctx.simulator.catalog, model, scope)
        rules = resolve_model("anthropic", messages_body["model"], ctx.simulator.catalog)
        # Vertex's own version validates as Anthropic's 2023-06-01 does.
        api_version = version if _API_DATE.match(version) else "2023-06-01"
        anthropic_params.check_body(messages_body, api_version, rules.id)
        return await mock_anthropic.answer(ctx, request, messages_body, tenant, fault_provider="vertex")

    for version in ("/v1", "/v1beta1"):
        _add_gemini_routes(app, ctx, version + _SCOPE)

    @app.get("/_mock/vertex/cachedContents")
    async def storage_bill() -> dict:
        now = ctx.clock()
        out = []
        for tenant, contents in ctx.simulator.cached_contents.by_tenant().items():
            scope = ctx.vertex_scopes.get(tenant)
            if scope is None:       # a Gemini API workspace's caches, not a Vertex project's
                continue
            out += [{**_resource(c, scope), "tokens": c.tokens, "tokenHours": str(c.token_hours(until=now)),
                     "deleted": c.deleted_at is not None} for c in contents]
        return {"cachedContents": out}


def _add_gemini_routes(app: FastAPI, ctx: MockContext, prefix: str) -> None:
    def scoped(project: str, location: str, request: Request) -> tuple[str, str]:
        authenticate(request, ctx, project)
        scope = f"projects/{project}/locations/{location}"
        tenant = tenant_of(f"vertex:{scope}")       # caches are regional: another location's are not found
        ctx.vertex_scopes[tenant] = scope
        return tenant, scope

    @app.post(prefix + "/publishers/google/models/{target}")
    async def gemini(project: str, location: str, target: str, request: Request) -> Response:
        tenant, scope = scoped(project, location, request)
        gemini_rules(ctx.simulator.catalog, target.partition(":")[0], scope)
        body = await json_body(request)
        named = body.get("cachedContent")
        if isinstance(named, str):
            body["cachedContent"] = _local_name(named, scope)
        return await mock_gemini.model_action(ctx, request, tenant, target, body, fault_provider="vertex")

    @app.post(prefix + "/cachedContents")
    async def create(project: str, location: str, request: Request) -> dict:
        tenant, scope = scoped(project, location, request)
        body = await json_body(request)
        await ctx.fault_for(request, "vertex", body.get("model"))
        model = body.get("model")
        publisher = f"{scope}/publishers/google/models/"
        if not isinstance(model, str) or not model.startswith("projects/"):
            raise RequestError("vertex caches only support model name start with projects", field="model")
        if not model.startswith(publisher):
            raise RequestError(f"model: expected {publisher}{{model}} (this project and location)", field="model")
        if "name" in body:
            raise RequestError("name: is output only and cannot be set on create", field="name")
        gemini_rules(ctx.simulator.catalog, model.removeprefix(publisher), scope)
        body["model"] = "models/" + model.removeprefix(publisher)
        return _resource(ctx.simulator.create_cached_content(body, now=ctx.clock(), tenant=tenant), scope)

    @app.get(prefix + "/cachedContents")
    async def list_all(project: str, location: str, request: Request) -> dict:
        tenant, scope = scoped(project, location, request)
        await ctx.fault_for(request, "vertex", None)
        page, token = cache_page(ctx.simulator.list_cached_contents(now=ctx.clock(), tenant=tenant),
                                 request.query_params)
        return {"cachedContents": [_resource(c, scope) for c in page], **({"nextPageToken": token} if token else {})}

    @app.get(prefix + "/cachedContents/{cache_id}")
    async def get(project: str, location: str, cache_id: str, request: Request) -> dict:
        tenant, scope = scoped(project, location, request)
        return _resource(ctx.simulator.get_cached_content(f"cachedContents/{cache_id}", now=ctx.clock(),
                                                          tenant=tenant), scope)

    @app.patch(prefix + "/cachedContents/{cache_id}")
    async def update(project: str, location: str, cache_id: str, request: Request) -> dict:
        tenant, scope = scoped(project, location, request)
        body = await json_body(request)
        return _resource(ctx.simulator.update_cached_content(f"cachedContents/{cache_id}", body, now=ctx.clock(),
                                                             tenant=tenant), scope)

    @app.delete(prefix + "/cachedContents/{cache_id}")
    async def delete(project: str, location: str, cache_id: str, request: Request) -> dict:
        tenant, _ = scoped(project, location, request)
        await ctx.fault_for(request, "vertex", None)
        ctx.simulator.delete_cached_content(f"cachedContents/{cache_id}", now=ctx.clock(), tenant=tenant)
        return {}


def _local_name(name: str, scope: str) -> str:
    """A Vertex cache name as the simulator keeps it (`cachedContents/{id}`); another project's is not found."""
    if not name.startswith(f"{scope}/cachedContents/"):
        raise RequestError(f"cachedContent: {name!r} is not a cache of {scope}", field="cachedContent",
                           status=404, kind="not_found")
    return name.removeprefix(f"{scope}/")


def _resource(content: CachedContent, scope: str) -> dict[str, Any]:
    """The simulator's cache as Vertex names it: full resource and model names."""
    out = content.resource()
    out["name"] = f"{scope}/{content.name}"
    out["model"] = f"{scope}/publishers/google/models/{content.model_path.removeprefix('models/')}"
    return out
