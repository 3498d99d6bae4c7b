"""Model requests go straight from the ASGI server to intake, past FastAPI's and Starlette's layers
(error and body-limit middleware, routing, the framework's Request), which cost more per request than
the gateway's own work. Every other path (health, metrics, models, count_tokens, cachedContents,
the dashboard, a wrong method on a model path) is served by the FastAPI app as usual.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive, Scope, Send

from prefixgate.dialects import WIRE_FORMATS, format_of_path
from prefixgate.dialects.wire import Parse
from prefixgate.errors import RequestError
from prefixgate.gateway.browser_guard import refusal
from prefixgate.gateway.error_response import error_response
from prefixgate.gateway.inbound import Inbound
from prefixgate.gateway.intake import serve
from prefixgate.gateway.paths import aliased, logging_errors
from prefixgate.gateway.shared_first import waiting_for_shared_writes

log = logging.getLogger("prefixgate.gateway")
NOSNIFF = (b"x-content-type-options", b"nosniff")


def model_request(path: str) -> tuple[str, Parse] | None:
    """(wire format, body parser) when `path` is a model request this front serves itself."""
    for wire in WIRE_FORMATS.values():
        parse = wire.parser_for(path)
        if parse is not None:
            return wire.name, parse
    return None


def nosniffed(send: Send) -> Send:
    """`send` with `X-Content-Type-Options: nosniff` on the answer: the dashboard's JSON API, its refusals (401,
    403, 404, 422) included, is never sniffed into HTML by a browser (the page and its assets say so themselves)."""
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and NOSNIFF[0] not in (k.lower() for k, _ in message.get("headers", ())):
            message = {**message, "headers": [*message.get("headers", ()), NOSNIFF]}
        await send(message)
    return sending


class GatewayApp(FastAPI):
    allowed_origins: frozenset[str] = frozenset()
    loopback_only = False           # an unkeyed gateway on a loopback bind: see browser_guard
    cors: CORSMiddleware | None = None

    def guard_browsers(self, cors_origins: list[str], loopback_only: bool) -> None:
        self.allowed_origins, self.loopback_only = frozenset(cors_origins), loopback_only
        if cors_origins:    # the pages let in are answered with CORS headers their browsers need to read the answers
            self.cors = CORSMiddleware(self._serve, allow_origins=cors_origins, allow_methods=["*"], allow_headers=["*"],
                                       expose_headers=["*"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await super().__call__(scope, receive, send)
        path = aliased(scope["path"])
        if path != scope["path"]:
            scope = {**scope, "path": path, "raw_path": path.encode()}
        if path == "/api" or path.startswith("/api/"):
            send = nosniffed(send)
        with waiting_for_shared_writes(send) as send:
            await logging_errors(self._guarded, scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A web page's request (or a rebound host name) refused before anything reads it (browser_guard)."""
        refused = refusal(scope, self.allowed_origins, self.loopback_only)
        if refused is not None:
            return await error_response(refused, format_of_path(scope["path"]).name)(scope, receive, send)
        await (self.cors or self._serve)(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = model_request(scope["path"]) if scope["method"] == "POST" else None
        if found is None:
            return await super().__call__(scope, receive, send)
        dialect, parse = found
        try:
            response = await serve(self.state.proxy, Inbound(scope, receive), dialect, parse)
        except ClientDisconnect:
            return      # nobody is left to answer
        except Exception:
            log.exception("unhandled error on %s", scope["path"])
            response = error_response(RequestError("internal gateway error", status=500, kind="server"), dialect)
        await response(scope, receive, send)
