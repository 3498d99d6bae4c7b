"""Paths as clients actually send them: aliases for base URLs without `/v1`, a 404 that names the likely
base-URL mistake, and one log line for every answer of 400 or above.

Several clients append `/messages`, `/chat/completions` or `/responses` to whatever base URL they are given
(DSPy on Anthropic, some IDE plugins), so a gateway URL without `/v1` reaches `/messages`. Those paths mean
one thing on this gateway, so they are served as their `/v1` twins rather than refused.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.types import Message, Receive, Scope, Send

log = logging.getLogger("prefixgate.gateway")

# First path segments that are `/v1/<segment>...` on this gateway when a client leaves out the `/v1`.
V1_SEGMENTS = frozenset({"chat", "completions", "containers", "embeddings", "files", "models", "messages", "responses",
                         "uploads"})
# The endpoints a misplaced base URL most often wraps (longest first, so `/v1/messages/count_tokens` wins).
KNOWN_ENDPOINTS = ("/v1/messages/count_tokens", "/v1/chat/completions", "/v1/completions", "/v1/embeddings",
                   "/v1/messages", "/v1/responses", "/v1/models", "/v1beta/models")


def aliased(path: str) -> str:
    """`path` as this gateway serves it: `/messages` is `/v1/messages`, and so on."""
    segment = path[1:].split("/", 1)[0]
    return "/v1" + path if segment in V1_SEGMENTS else path


def base_url_hint(path: str) -> str:
    """For a 404 on `path`: the part of the base URL to drop when `path` wraps a known endpoint, else where
    each SDK's base URL points."""
    for known in KNOWN_ENDPOINTS:
        at = path.find(known, 1)
        if at > 0:
            return f": is the client's base URL right? This gateway serves {known}: drop {path[:at]!r} from it"
    return (": base URLs are the gateway's address + /v1 for OpenAI clients, the bare address for Anthropic "
            "and Gemini clients")


def logging_errors(app: Callable[[Scope, Receive, Send], Awaitable[None]], scope: Scope, receive: Receive,
                   send: Send) -> Awaitable[None]:
    """Runs `app`, logging an answer of 400 or above with its method, path and client: requests refused
    before they reach the ledger (an unknown path, a bad key, a malformed body) otherwise leave no trace."""
    async def watched(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            headers = dict(scope.get("headers") or ())
            client = scope.get("client")
            log.warning("%s %s answered %d", scope["method"], scope["path"], message["status"], extra={"fields": {
                "method": scope["method"], "path": scope["path"], "status": message["status"],
                "client": f"{client[0]}:{client[1]}" if client else "",
                "user_agent": headers.get(b"user-agent", b"").decode("latin-1")}})
        await send(message)
    return app(scope, receive, watched)
