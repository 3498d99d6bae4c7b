"""The gateway's FastAPI application: the three providers' paths, `/health` and `/metrics`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from prefixgate import __version__
from prefixgate.bind import is_loopback
from prefixgate.config import Settings
from prefixgate.dialects import format_of_path, resent
from prefixgate.errors import RequestError
from prefixgate.gateway import (
    dashboard,
    endpoints_anthropic,
    endpoints_bedrock,
    endpoints_containers,
    endpoints_files,
    endpoints_gemini,
    endpoints_gemini_files,
    endpoints_interactions,
    endpoints_models,
    endpoints_openai,
    endpoints_responses,
    endpoints_uploads,
    endpoints_vertex,
)
from prefixgate.gateway.collector import collect_less
from prefixgate.gateway.dashboard.auth import is_admin
from prefixgate.gateway.error_response import error_response
from prefixgate.gateway.fastpath import GatewayApp
from prefixgate.gateway.local import LocalTarget, in_process_target
from prefixgate.gateway.paths import base_url_hint
from prefixgate.gateway.protected_mode import guard
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.tracing import tracing_for
from prefixgate.gateway.upstream import implausible_keys
from prefixgate.gateway.warm_start import warm_or_log
from prefixgate.policies import Policy, load_policy
from prefixgate.providers.rules import Catalog

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

log = logging.getLogger("prefixgate.gateway")


def create_app(settings: Settings, *, policy: Policy | None = None, local: LocalTarget | None = None,
               planner_state: object | None = None, tracer_provider: TracerProvider | None = None,
               catalog: Catalog | None = None) -> FastAPI:
    """The gateway for `settings`; `policy` defaults to the settings' policy file (or the zero-config one),
    `local` to the in-process engine, `planner_state` to none (the planner then learns nothing across requests),
    `tracer_provider` to what the `otel` setting finds (OpenTelemetry spans; see tracing.py), `catalog` to the
    settings' providers file parsed here (`serve` passes the one it checked)."""
    policy = policy or load_policy(settings)
    exposure = guard(settings, policy)  # protected mode: refuses before anything listens or loads
    tracing = tracing_for(settings, tracer_provider)
    for warning in implausible_keys(policy.upstreams.values()):
        log.warning(warning)
    if local is None and any(u.kind == "local" for u in policy.upstreams.values()):
        local = in_process_target(settings.local_model)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.proxy = Proxy(settings, policy, local=local, planner_state=planner_state, tracing=tracing,
                                catalog=catalog)
        app.state.proxy.metrics.include_local(local)
        await app.state.proxy.restore_budgets()
        app.state.file_quota = app.state.proxy.file_quota
        resent.keep(settings.resent_bodies_mb << 20)
        # Before the server accepts a connection: the first request then costs what the tenth does.
        await asyncio.to_thread(warm_or_log, app.state.proxy.catalog)
        collect_less()
        if hasattr(local, "start"):
            await local.start()  # the in-process engine loads before the first request, off the event loop
        try:
            yield
        finally:
            await app.state.proxy.aclose()
            if tracing is not None:
                tracing.flush()
            if hasattr(local, "close"):
                local.close()

    app = GatewayApp(title="prefixgate", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                     openapi_url=None)
    app.state.settings = settings
    app.guard_browsers(settings.cors_origins, not policy.keys and not settings.open_gateway and is_loopback(settings.host))
    app.state.policy = policy
    for module in (endpoints_models, endpoints_openai, endpoints_responses, endpoints_anthropic, endpoints_interactions,
                   endpoints_gemini, endpoints_vertex, endpoints_bedrock, endpoints_files,
                   endpoints_gemini_files, endpoints_uploads, endpoints_containers):
        app.include_router(module.router)
    app.include_router(dashboard.router)

    @app.get("/health")
    async def health(request: Request) -> dict:
        # A local model no route uses is never loaded (`local` stays None).
        status = getattr(local, "status", "not used by any route" if local is None else "ready")
        local_info = {"model": settings.local_model, "status": status} if settings.local_model else None
        body = {"status": "ok", "version": __version__, "local_backend": local_info,
                "routes": [r.name for r in policy.routes]}
        return {**body, "exposure": exposure.to_dict()} if is_admin(request) else body

    @app.get("/metrics")
    def metrics(request: Request) -> Response:
        return Response(request.app.state.proxy.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.exception_handler(StarletteHTTPException)
    async def no_such_path(request: Request, exc: StarletteHTTPException) -> Response:
        # An unknown path or method answers in the caller's own error shape, so its SDK raises its own
        # NotFoundError (FastAPI's {"detail": "Not Found"} reads as a malformed answer to a client).
        if exc.status_code in (404, 405) and exc.detail in ("Not Found", "Method Not Allowed"):
            what = f"no such endpoint{base_url_hint(request.url.path)}" if exc.status_code == 404 \
                else f"method {request.method} is not allowed"
            err = RequestError(f"{request.url.path}: {what} on this gateway", status=exc.status_code,
                               kind="not_found" if exc.status_code == 404 else "invalid_request")
            return error_response(err, format_of_path(request.url.path).name)
        return await http_exception_handler(request, exc)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        # The traceback goes to the log; the caller gets its own dialect's 500, never internals.
        log.exception("unhandled error on %s", request.url.path)
        return error_response(RequestError("internal gateway error", status=500, kind="server"),
                              format_of_path(request.url.path).name)

    return app
