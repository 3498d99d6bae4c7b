"""`prefixgate mock-providers`: one local server speaking the Anthropic, OpenAI (Chat Completions and
Responses) and Gemini (generateContent and Interactions) APIs.

It answers at the providers' real paths with their auth headers, error shapes, streaming event order and
usage fields; usage comes from the cache simulator (so a repeated prompt reports cached tokens), replies
are deterministic text. The real SDKs work against it unmodified by pointing their base URL here:

    anthropic.Anthropic(base_url="http://127.0.0.1:8200")
    openai.OpenAI(base_url="http://127.0.0.1:8200/v1")
    genai.Client(http_options={"base_url": "http://127.0.0.1:8200"})
    openai.OpenAI(base_url="http://127.0.0.1:8200/deepseek/v1")   # and /openrouter/v1, /xai/v1, ...
    openai.AzureOpenAI(azure_endpoint="http://127.0.0.1:8200/azure", api_version="2024-10-21")

Faults (latency, error statuses with retry-after, dropped or slow streams) come from the `x-mock-fault` request
header or a faults file; see `mock/faults.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from prefixgate.dialects import bedrock, interactions
from prefixgate.dialects.validate import load_body
from prefixgate.errors import RequestError, error_body
from prefixgate.ir import Conversation
from prefixgate.providers.files import ANTHROPIC, GEMINI, OPENAI
from prefixgate.simulation.mock.containers import Containers
from prefixgate.simulation.mock.diagnostics import AnthropicDiagnostics, ResponsesDiagnostics
from prefixgate.simulation.mock.faults import HEADER, Fault, FaultError, FaultPlan
from prefixgate.simulation.mock.files import Files
from prefixgate.simulation.mock.retired import today_from_env
from prefixgate.simulation.mock.stream_errors import SPEAKERS, stream_error_event
from prefixgate.simulation.simulator import Simulator


class GoogleFrontEndError(RequestError):
    """An error Google's front end answers on Vertex AI before a publisher sees the request (an unknown model):
    Google's shape, whichever publisher the path names."""


class StreamDropped(ConnectionError):
    """Raised inside a streaming body to cut the connection mid-stream (the drop_stream_after fault)."""


@dataclass
class MockContext:
    # Responses start as soon as the simulator answers, so a written entry is readable at once.
    simulator: Simulator = field(default_factory=lambda: Simulator(entry_visible_after_s=0.0))
    faults: FaultPlan = field(default_factory=FaultPlan)
    clock: Callable[[], float] = time.time
    # The day models are retired by (mock/retired.py); None: the clock's.
    today: date | None = field(default_factory=today_from_env)
    # (path, body) of the latest requests to the compatible providers' mocks: what tests inspect (was a
    # `cache_salt` sent?).
    received: deque[tuple[str, dict]] = field(default_factory=lambda: deque(maxlen=256))
    # Vertex: OAuth2 access tokens issued by /token -> when each expires; and each project tenant's
    # `projects/{p}/locations/{l}` (what its caches are named under).
    vertex_tokens: dict[str, float] = field(default_factory=dict)
    vertex_scopes: dict[str, str] = field(default_factory=dict)
    # Prompt fingerprints behind cache diagnostics (mock/diagnostics.py).
    anthropic_diagnostics: AnthropicDiagnostics = field(default_factory=AnthropicDiagnostics)
    responses_diagnostics: ResponsesDiagnostics = field(default_factory=ResponsesDiagnostics)
    containers: Containers = field(default_factory=Containers)     # code execution's, per account
    # Azure OpenAI: deployments beyond mock/compatible.py's, name -> the model id its answers name.
    azure_deployments: dict[str, str] = field(default_factory=dict)
    files: Files = field(init=False)        # the Files APIs', per account

    def __post_init__(self) -> None:
        self.files = Files(lambda: self.clock())

    async def fault_for(self, request: Request, provider: str, model: Any) -> Fault | None:
        """The fault this request gets; sleeps its latency, raises its error status."""
        try:
            fault = self.faults.for_request(provider, request.url.path, model if isinstance(model, str) else None,
                                            request.headers.get(HEADER))
            err = None if fault is None else fault.error(provider, request.url.path, self.clock())
        except FaultError as e:
            raise RequestError(str(e), field=HEADER) from None
        if fault is None:
            return None
        if fault.latency_s:
            await asyncio.sleep(fault.latency_s)
        if err is not None:
            raise err
        return fault


def create_app(context: MockContext | None = None) -> FastAPI:
    from prefixgate.simulation.mock import anthropic as mock_anthropic
    from prefixgate.simulation.mock import bedrock as mock_bedrock
    from prefixgate.simulation.mock import compatible as mock_compatible
    from prefixgate.simulation.mock import completions as mock_completions
    from prefixgate.simulation.mock import containers_api as mock_containers_api
    from prefixgate.simulation.mock import files as mock_files
    from prefixgate.simulation.mock import gemini as mock_gemini
    from prefixgate.simulation.mock import gemini_uploads as mock_gemini_uploads
    from prefixgate.simulation.mock import interactions as mock_interactions
    from prefixgate.simulation.mock import openai as mock_openai
    from prefixgate.simulation.mock import openai_uploads as mock_openai_uploads
    from prefixgate.simulation.mock import responses as mock_responses
    from prefixgate.simulation.mock import vertex as mock_vertex

    ctx = context or MockContext()
    app = FastAPI(title="prefixgate mock providers", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.mock = ctx

    @app.exception_handler(RequestError)
    async def provider_error(request: Request, err: RequestError) -> Response:
        # Google's front end answers a bad token in its own shape, whichever publisher the path names.
        google = isinstance(err, GoogleFrontEndError) or (err.status == 401 and "/projects/" in request.url.path)
        answer = error_response(err, "gemini" if google else dialect_of(request))
        if getattr(request.state, "answered_early", False):
            answer.headers["connection"] = "close"
        return answer

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    # Providers evict cache entries before their TTL when they need the room (best effort, never promised):
    # tests make the mock do so here, for every workspace at once.
    @app.post("/_mock/evict")
    async def evict() -> dict:
        return {"evicted": ctx.simulator.store.clear()}

    modules = {"anthropic": mock_anthropic, "openai": mock_openai, "gemini": mock_gemini}

    # GET /v1/models is every provider's model list; the caller's auth headers say whose.
    @app.get("/v1/models")
    async def list_models(request: Request) -> dict:
        return modules[dialect_of(request)].list_models(request, ctx)

    @app.get("/v1/models/{model_id}")
    async def get_model(model_id: str, request: Request) -> dict:
        return modules[dialect_of(request)].get_model(request, ctx, model_id)

    def files_account(request: Request) -> tuple[str, str]:
        dialect = dialect_of(request)
        if dialect == "anthropic":
            account = mock_anthropic.authenticate(request)
            mock_files.require_beta(request.headers.get("anthropic-beta", ""))
            return ANTHROPIC, account
        if dialect == "gemini":
            return GEMINI, mock_gemini.authenticate(request)
        return OPENAI, mock_openai.authenticate(request)

    for module in (*modules.values(), mock_bedrock):
        module.add_routes(app, ctx)
    mock_files.add_routes(app, ctx.files, files_account)
    mock_gemini_uploads.add_routes(app, ctx.files, mock_gemini.authenticate)
    mock_openai_uploads.add_routes(app, ctx.files, mock_openai.authenticate)
    mock_responses.add_routes(app, ctx)
    mock_containers_api.add_routes(app, ctx)
    mock_interactions.add_routes(app, ctx)
    mock_completions.add_routes(app, ctx)
    mock_compatible.add_routes(app, ctx)
    mock_vertex.add_routes(app, ctx)
    return app


def dialect_of(request: Request) -> str:
    """Which provider's API a request speaks (its error shape follows)."""
    path, headers = request.url.path, request.headers
    if path.startswith(interactions.PATHS):
        return "interactions"
    if path.startswith("/upload/"):
        return "gemini"     # the Gemini Files API's uploads (their chunks carry no key to tell by)
    if path.startswith(("/v1/projects/", "/v1beta1/projects/")):
        return "anthropic" if "/publishers/anthropic/" in path else "gemini"    # Vertex AI
    if path.startswith("/model/") or path.startswith("/anthropic/v1/"):
        return "bedrock"
    if (path.startswith("/v1beta") or path.startswith("/v1/cachedContents") or "x-goog-api-key" in headers
            or "key" in request.query_params or (path.startswith("/v1/models/") and ":" in path)):
        return "gemini"
    if path.startswith("/v1/messages") or "anthropic-version" in headers or "x-api-key" in headers:
        return "anthropic"
    return "openai"


def error_response(err: RequestError, dialect: str) -> JSONResponse:
    if dialect == "bedrock":
        status, body, headers = bedrock.error_body(err)
        return JSONResponse(body, status_code=status, headers=headers)
    if dialect == "interactions":
        return JSONResponse(interactions.error_json(err), status_code=err.status)
    # A provider's own refusal (a 429: rate_limits.py) carries the headers it sends with it.
    headers = dict(err.refused.headers) if err.refused and err.refused.provider == dialect else {}
    if err.retry_after is not None:
        headers["retry-after"] = f"{err.retry_after:g}"
    if dialect == "anthropic":
        headers["request-id"] = "req_" + uuid.uuid4().hex[:24]
    return JSONResponse(error_body(err, dialect), status_code=err.status, headers=headers)


async def json_body(request: Request) -> dict:
    return load_body(await request.body())


def tenant_of(key: str) -> str:
    """Caches are per workspace; each API key is its own workspace here."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def prompt_text(conv: Conversation) -> str:
    return "\n".join(seg.text for seg in conv.segments)


def sse_response(events: Iterable[bytes], fault: Fault | None, headers: dict[str, str] | None = None,
                 media_type: str = "text/event-stream", speaks: str | None = None) -> Response:
    """A streamed body of `events` (SSE, or Bedrock's event-stream frames), with the stream faults applied;
    `speaks`: whose mid-stream error a `stream_error` fault reports (stream_errors.SPEAKERS)."""
    drop_after = fault.drop_stream_after if fault is not None else None
    delay = fault.event_delay_s if fault is not None else 0.0
    failure = fault.stream_failure() if fault is not None else None
    if failure is not None and speaks not in SPEAKERS:
        raise RequestError(f"mock-providers: stream_error is modelled for {', '.join(SPEAKERS)} streams only",
                           field=HEADER)

    async def body() -> Any:
        for sent, event in enumerate(events):
            if drop_after is not None and sent >= drop_after:
                raise StreamDropped("mock-providers: stream dropped by fault injection")
            if failure is not None and sent >= fault.stream_error_after:
                yield stream_error_event(speaks, failure, sent)
                return
            if delay and sent:
                await asyncio.sleep(delay)
            yield event

    return StreamingResponse(body(), media_type=media_type, headers={"cache-control": "no-cache", **(headers or {})})
