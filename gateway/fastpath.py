"""Model requests go straight to their handler, past FastAPI's exception, exit-stack, routing and
dependency layers, which cost more per request than the gateway's own work. Every other path (health,
metrics, models, count_tokens, cachedContents) is served by the FastAPI app as usual."""

from __future__ import annotations

import logging

from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from prefixgate.dialects import anthropic, openai
from prefixgate.errors import RequestError
from prefixgate.gateway.endpoints_gemini import model_action
from prefixgate.gateway.intake import error_response, serve

log = logging.getLogger("prefixgate.gateway")
GEMINI_PREFIXES = ("/v1beta/models/", "/v1/models/")


class FastPath:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        request = Request(scope, receive)
        try:
            if path == "/v1/chat/completions":
                response = await serve(request, "openai", openai.parse_request)
            elif path == "/v1/messages":
                response = await serve(request, "anthropic", anthropic.parse_request)
            elif path.startswith(GEMINI_PREFIXES) and path.count("/") == 3:
                version, _, target = path[1:].split("/", 2)
                response = await model_action(request, version, target)
            else:
                return await self.app(scope, receive, send)
        except ClientDisconnect:
            return      # nobody is left to answer
        except Exception:
            log.exception("unhandled error on %s", path)
            dialect = "anthropic" if path.startswith("/v1/messages") else "openai" if path.endswith("completions") else "gemini"
            response = error_response(RequestError("internal gateway error", status=500, kind="server"), dialect)
        await response(scope, receive, send)
