"""A model request straight from the ASGI server: the headers, query and body that intake reads, without
building the framework's Request (and its Headers, URL and QueryParams objects) on the hot path.

It offers the part of Starlette's `Request` that intake uses (`headers`, `query_params`, `stream()`,
`receive`), so the FastAPI routes can hand intake a real `Request` instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qsl

from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope


class Inbound:
    __slots__ = ("scope", "receive", "_headers", "_query")

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.scope, self.receive = scope, receive
        self._headers: dict[str, str] | None = None
        self._query: dict[str, str] | None = None

    @property
    def headers(self) -> dict[str, str]:
        """Lower-case names; a repeated header reads as its first value, as with Starlette's `Headers.get`."""
        if self._headers is None:
            self._headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in reversed(self.scope["headers"])}
        return self._headers

    @property
    def query_params(self) -> dict[str, str]:
        """A repeated parameter reads as its last value, as with Starlette's `QueryParams`."""
        if self._query is None:
            self._query = dict(parse_qsl(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        return self._query

    async def stream(self) -> AsyncIterator[bytes]:
        """The body as it arrives; ClientDisconnect if the client hangs up first."""
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            body = message.get("body", b"")
            if body:
                yield body
            if not message.get("more_body", False):
                return
