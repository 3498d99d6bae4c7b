"""Test harness for the gateway: a fake upstream speaking all three provider APIs (built from the
dialect emitters), which records what it received and injects faults on demand, and helpers that run
it and the gateway under real uvicorn servers on free ports."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from prefixgate.config import Settings, load_settings
from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.errors import RequestError, error_body
from prefixgate.gateway.app import create_app
from prefixgate.gateway.stored_ids import OWNER, StoredIds
from prefixgate.policies import Policy, builtin_upstreams
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from prefixgate.usage import Usage
from tests.support_services import ServerThread, wait_until

USAGE = Usage(uncached_input=40, cache_read=1920, cache_writes={"5m": 64}, output=5)
CHUNKS = ["Hello", ", ", "world"]
FAULTS = {"429": (429, "rate_limit"), "429-wait": (429, "rate_limit"), "500": (500, "server"), "503": (503, "overloaded"),
          "529": (529, "overloaded"), "400": (400, "invalid_request"), "401": (401, "authentication")}


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    query: dict[str, str]
    body: dict
    raw: bytes = b""


class Counted:
    """An ASGI app that counts the HTTP requests reaching it."""

    def __init__(self, app) -> None:
        self.app, self.paths = app, []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


@dataclass
class FakeUpstream:
    """Answers like Anthropic, OpenAI and Gemini. Queue faults ("429", "429-wait" (Retry-After: 2), "500", "529", "timeout", "drop", "error"
    (the provider's error event mid-stream), "hang") with `fail(...)`; each request takes the next one, or answers
    normally when none is left."""

    usage: Usage = USAGE
    received: list[Received] = field(default_factory=list)
    faults: deque = field(default_factory=deque)
    disconnects: int = 0
    delay_s: float = 0.0
    url: str = ""

    def fail(self, *faults: str) -> None:
        self.faults.extend(faults)

    def reset(self) -> None:
        self.received.clear()
        self.faults.clear()
        self.disconnects = 0
        self.usage = USAGE

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self._openai, methods=["POST"]),
            Route("/v1/messages", self._anthropic, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
            Route("/v1beta/models/{target}", self._gemini, methods=["POST"]),
            Route("/v1beta/cachedContents", self._cached, methods=["GET", "POST"]),
        ])

    async def _take(self, request: Request, dialect: str) -> tuple[dict, Response | str | None]:
        raw = await request.body()
        body = json.loads(raw) if raw else {}
        self.received.append(Received(request.url.path, dict(request.headers), dict(request.query_params), body, raw))
        fault = self.faults.popleft() if self.faults else None
        if fault in FAULTS:
            status, kind = FAULTS[fault]
            message = f"injected {fault}"
            if fault == "401":   # like OpenAI's "Incorrect API key provided: sk-..."
                key = request.headers.get("authorization", "") or request.headers.get("x-api-key", "")
                message = f"Incorrect API key provided: {key.removeprefix('Bearer ')}"
            err = RequestError(message, status=status, kind=kind)
            headers = {"429": {"retry-after": "0"}, "429-wait": {"retry-after": "2"}}.get(fault)
            return body, JSONResponse(error_body(err, dialect), status, headers=headers)
        if fault in ("timeout", "hang"):
            for _ in range(500):
                if await request.is_disconnected():
                    self.disconnects += 1
                    break
                await asyncio.sleep(0.02)
            return body, Response(status_code=599)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return body, fault

    async def _openai(self, request: Request) -> Response:
        body, fault = await self._take(request, "openai")
        if isinstance(fault, Response):
            return fault
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return self._stream(oa.stream_events(body["model"], CHUNKS, self.usage, include_usage=include), fault,
                                oa.error_event)
        answer = oa.build_response(body["model"], "".join(CHUNKS), self.usage)
        if fault == "drop":     # a whole answer whose 200 went out and whose body breaks half-way
            return self._cut(json.dumps(answer).encode())
        return JSONResponse(answer, headers={"x-request-id": "req_up"})

    async def _anthropic(self, request: Request) -> Response:
        body, fault = await self._take(request, "anthropic")
        if isinstance(fault, Response):
            return fault
        if body.get("stream"):
            return self._stream(an.stream_events(body["model"], CHUNKS, self.usage), fault, an.error_event)
        return JSONResponse(an.build_response(body["model"], "".join(CHUNKS), self.usage), headers={"request-id": "req_up"})

    async def _gemini(self, request: Request) -> Response:
        body, fault = await self._take(request, "gemini")
        if isinstance(fault, Response):
            return fault
        model = request.path_params["target"].split(":")[0]
        if request.path_params["target"].endswith(":streamGenerateContent"):
            return self._stream(ge.stream_events(model, CHUNKS, self.usage), fault, ge.error_event)
        if request.path_params["target"].endswith(":countTokens"):
            return JSONResponse({"totalTokens": 7})
        return JSONResponse(ge.build_response(model, "".join(CHUNKS), self.usage))

    async def _count(self, request: Request) -> Response:
        await self._take(request, "anthropic")
        return JSONResponse({"input_tokens": 42})

    async def _cached(self, request: Request) -> Response:
        body, _ = await self._take(request, "gemini")
        if request.method == "POST":
            return JSONResponse({"name": "cachedContents/abc", "model": body.get("model")})
        return JSONResponse({"cachedContents": []})

    def _cut(self, whole: bytes) -> StreamingResponse:
        async def gen():
            yield whole[:len(whole) // 2]
            raise ConnectionResetError("injected drop")
        return StreamingResponse(gen(), media_type="application/json")

    def _stream(self, events, fault: str | None, error_event) -> StreamingResponse:
        async def gen():
            for i, ev in enumerate(events):
                if fault == "drop" and i == 2:
                    raise ConnectionResetError("injected drop")
                if fault == "error" and i == 3:     # the provider's own error event mid-stream, then the end
                    yield error_event(RequestError("Overloaded", status=529, kind="overloaded"))
                    return
                yield ev
                await asyncio.sleep(0)
        return StreamingResponse(gen(), media_type="text/event-stream")


def settings_for(upstream_url: str, tmp_path, **overrides) -> Settings:
    values = dict(anthropic_base_url=upstream_url, openai_base_url=upstream_url, gemini_base_url=upstream_url,
                  ledger_path=str(tmp_path / "ledger.sqlite"), log_level="warning")
    values.update(overrides)
    return Settings(**values)


def policy_for(settings: Settings, data: dict) -> Policy:
    return Policy.from_dict(data, builtin_upstreams(settings))


@contextmanager
def running_upstream() -> Iterator[FakeUpstream]:
    fake = FakeUpstream()
    with ServerThread(fake.app()) as server:
        fake.url = server.url
        yield fake


@contextmanager
def running_gateway(settings: Settings, **kw) -> Iterator[ServerThread]:
    with ServerThread(create_app(settings, **kw)) as server:
        yield server


def shared_owner(redis_url: str, kind: str, ident: str) -> None:
    """Until Redis holds who owns (kind, ident): the replica that relayed its creation shares that a moment after its
    answer (gateway/shared_later.py); until then another replica knows nothing of it."""
    r = redis.Redis.from_url(redis_url)
    wait_until(lambda: r.hget(f"{StoredIds.REDIS_PREFIX}{kind}:{ident}", OWNER) is not None, 10, f"{kind} {ident} shared")


@contextmanager
def gateway_over_mock(folder: Path, policy: Callable[[str], dict] | None = None, **overrides) -> Iterator[ServerThread]:
    """A gateway whose hosted upstreams are the in-process mock providers, routed by `policy(mock_url)` (None: the
    zero-config routes), with settings `overrides`."""
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, folder, **overrides)
        with running_gateway(settings, policy=policy_for(settings, policy(mock.url)) if policy else None) as gw:
            yield gw


@contextmanager
def keyed_stack(folder: Path) -> Iterator[tuple[ServerThread, FakeUpstream]]:
    """A gateway on its zero-config routes in front of a fake upstream, with every hosted provider's key set."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-secret-openai-key-000111")
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-key-000222")
    mp.setenv("GEMINI_API_KEY", "AIzaSecretGeminiKey000000000000333")
    try:
        with running_upstream() as up, running_gateway(settings_for(up.url, folder)) as gw:
            yield gw, up
    finally:
        mp.undo()


@contextmanager
def policy_stack(folder, data: dict) -> Iterator[tuple[FakeUpstream, ServerThread, Settings]]:
    """A fake upstream and a gateway in front of it routing by policy `data`, with provider keys set."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-secret-openai-key-000111")
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-key-000222")
    try:
        with running_upstream() as up:
            settings = settings_for(up.url, folder)
            with running_gateway(settings, policy=policy_for(settings, data)) as gw:
                yield up, gw, settings
    finally:
        mp.undo()


@contextmanager
def chat_stub_stack(folder, answer, data: dict) -> Iterator[tuple[ServerThread, Settings, Starlette]]:
    """A gateway routing by policy `data` in front of an OpenAI upstream whose chat completions `answer`
    (a Starlette endpoint) makes, for answers no real provider's mock would give."""
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-secret-openai-key-000111")
    try:
        with ServerThread(Starlette(routes=[Route("/v1/chat/completions", answer, methods=["POST"])])) as up:
            settings = settings_for(up.url, folder)
            app = create_app(settings, policy=policy_for(settings, data))
            with ServerThread(app) as gw:
                yield gw, settings, app
    finally:
        mp.undo()


def zero_config_settings(tmp_path, monkeypatch, **overrides) -> Settings:
    """A gateway as a newcomer starts it: the bundled model, no provider keys in the environment."""
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return load_settings(local_model="smollm2-135m", ledger_path=str(tmp_path / "ledger.sqlite"), **overrides)
