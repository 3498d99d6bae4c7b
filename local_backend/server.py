"""`prefixgate backend`: the engine behind an OpenAI-compatible HTTP API (completions, chat completions,
responses), with Prometheus metrics."""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from prefixgate.bind import is_loopback
from prefixgate.errors import RequestError, error_body
from prefixgate.local_backend.async_engine import AsyncEngine
from prefixgate.local_backend.frontend import ClientGone, Frontend
from prefixgate.local_backend.metrics import EngineMetrics
from prefixgate.local_backend.responses_api import ResponsesAPI

log = logging.getLogger("prefixgate.local_backend")
# vLLM's convention: the key guards the /v1 API; /health and /metrics stay open for probes and scrapers.
GUARDED = "/v1/"


class BackendExposed(RuntimeError):
    """A non-loopback bind with no API key: anyone who reaches the port could spend this machine's compute."""


def _error(err: RequestError) -> JSONResponse:
    headers = {"Retry-After": str(max(1, round(err.retry_after)))} if err.retry_after else None
    return JSONResponse(error_body(err, "openai"), status_code=err.status, headers=headers)


def create_app(engine: AsyncEngine, api_key: str = "") -> FastAPI:
    """The HTTP API over `engine`; with `api_key`, every /v1 request must send it as a Bearer token."""
    metrics = EngineMetrics(engine.engine)
    engine.observer = metrics.observe
    model = engine.model_name

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine.start()
        yield
        engine.shutdown()

    app = FastAPI(title="prefixgate backend", lifespan=lifespan)
    frontend = Frontend(engine)
    app.state.engine, app.state.metrics = engine, metrics

    @app.exception_handler(RequestError)
    async def request_error(request: Request, err: RequestError) -> JSONResponse:
        return _error(err)

    if api_key:
        expected = f"Bearer {api_key}".encode()

        @app.middleware("http")
        async def require_key(request: Request, call_next: Any) -> Response:
            if request.url.path.startswith(GUARDED):
                sent = request.headers.get("authorization", "").encode()
                if not hmac.compare_digest(sent, expected):
                    return _error(RequestError("invalid or missing API key: send the backend's --api-key as "
                                               "'Authorization: Bearer <key>'", status=401, kind="authentication"))
            return await call_next(request)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "prefixgate",
                                            "max_model_len": engine.engine.max_model_len}]}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    responses = ResponsesAPI(frontend)
    app.state.responses = responses

    @app.post("/v1/responses")
    async def create_response(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(RequestError("the request body is not valid JSON"))
        answer = await responses.create(body)
        if isinstance(answer, dict):
            return JSONResponse(answer)
        return StreamingResponse(answer, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.get("/v1/responses/{response_id}")
    async def get_response(response_id: str) -> dict[str, Any]:
        return responses.store.get("local", response_id).response

    @app.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str) -> dict[str, Any]:
        responses.store.delete("local", response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await _serve(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await _serve(request, chat=True)

    async def _serve(request: Request, *, chat: bool) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(RequestError("the request body is not valid JSON"))
        try:
            answer = await frontend.serve(body, chat=chat, is_disconnected=request.is_disconnected)
        except ClientGone:
            return Response(status_code=499)
        if isinstance(answer, dict):
            return JSONResponse(answer)
        return StreamingResponse(answer, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    return app


def serve(model: str = "smollm2-135m", host: str = "127.0.0.1", port: int = 8100, log_level: str = "info",
          api_key: str = "", open_backend: bool = False, **engine_options: Any) -> None:
    import uvicorn

    # Checked before the model loads, so a refused start is immediate.
    if not is_loopback(host) and not api_key:
        if not open_backend:
            raise BackendExposed(
                f"refusing to serve on {host}: with no API key anyone who reaches port {port} can run the model. "
                "Set --api-key (or PREFIXGATE_BACKEND_API_KEY), bind to 127.0.0.1 (--host), or accept with --open")
        log.warning("serving on %s with no API key (--open): anyone who reaches port %d can run the model", host, port)
    engine = AsyncEngine.from_options(model, **engine_options)
    uvicorn.run(create_app(engine, api_key), host=host, port=port, log_level=log_level)
