"""mock-providers behind a counter of the model requests that reach it, and a gateway in front with response
caching on some routes: what the response cache's tests drive with the real SDK clients. The gateway stores an answer
after it is sent (`ResponseCache.settle`, a background task), so it takes each request once those answered before it
have settled (`Settled`): a repeat sent the moment an answer ends is then the hit or miss the test means."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from starlette.types import Message, Receive, Scope, Send

from prefixgate.gateway.app import create_app
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, settings_for
from tests.support_services import ServerThread

KEYS = {"ACME_KEY": "pg-acme-0001", "ACME_OTHER_KEY": "pg-acme-0002", "GLOBEX_KEY": "pg-globex-0001"}


class CountingUpstream:
    """An ASGI wrapper counting the model requests (POSTs) that reach the upstream: a hit must add none."""

    def __init__(self, app) -> None:
        self.app = app
        self.posts: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.posts.append(scope["path"])
        await self.app(scope, receive, send)


class Settled:
    """The gateway's app, taking each HTTP request once every request answered before it has settled: its app call
    returned, which Starlette makes after the response's background work (budget, response-cache store)."""

    def __init__(self, app) -> None:
        self.app = app
        self.state = app.state
        self.settling = 0       # requests whose answer went out and whose background work has not ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        while self.settling:
            await asyncio.sleep(0.01)
        answered = False

        async def sending(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body") and not answered:
                answered = True         # counted before its last byte leaves: the client may ask again at once
                self.settling += 1
            await send(message)
        try:
            await self.app(scope, receive, sending)
        finally:
            if answered:
                self.settling -= 1


def policy(**cache: dict) -> dict:
    """Routes per provider; `cache` gives each route's response_cache (by route name)."""
    def route(name: str, models: list[str], upstream: str) -> dict:
        out = {"name": name, "models": models, "targets": [{"upstream": upstream}]}
        if name in cache:
            out["response_cache"] = cache[name]
        return out
    return {
        "routes": [route("shadow", ["gpt-5.4"], "openai"), route("gpt", ["gpt-*"], "openai"),
                   {**route("smart", ["smart"], "anthropic"),
                    "targets": [{"upstream": "anthropic", "model": "claude-sonnet-5-5"}]},
                   route("claude", ["claude-*"], "anthropic"), route("gemini", ["gemini-*"], "gemini")],
        "keys": [{"name": "acme-app", "key_env": "ACME_KEY", "tenant": "acme"},
                 {"name": "acme-batch", "key_env": "ACME_OTHER_KEY", "tenant": "acme"},
                 {"name": "globex-app", "key_env": "GLOBEX_KEY", "tenant": "globex"}],
    }


@contextmanager
def cache_stack(folder, data: dict | Callable[[str], dict], faults: FaultPlan | None = None,
                **settings) -> Iterator[tuple[CountingUpstream, ServerThread, object]]:
    """The counting mock and a gateway on policy `data` (or `data(the mock's URL)`, for upstreams of its own)."""
    mp = pytest.MonkeyPatch()
    for var, value in {**KEYS, "OPENAI_API_KEY": "sk-gw-openai", "ANTHROPIC_API_KEY": "sk-ant-gw",
                       "GEMINI_API_KEY": "gw-gemini"}.items():
        mp.setenv(var, value)
    try:
        upstream = CountingUpstream(mock_app(MockContext(faults=faults or FaultPlan())))
        with ServerThread(upstream) as mock:
            s = settings_for(mock.url, folder, **settings)
            app = create_app(s, policy=policy_for(s, data(mock.url) if callable(data) else data))
            with ServerThread(Settled(app)) as gw:
                yield upstream, gw, s
    finally:
        mp.undo()
