"""Slow clients are let go: the HTTP server closes a connection whose request headers have not all arrived
within `client_timeout_s` of its first byte (or of the connection opening), so a few hundred connections that
trickle a header a minute (slowloris) cannot hold the gateway's sockets. uvicorn times out idle keep-alive
connections only; this adds the deadline on the request head. The body's deadline is intake's (`read_body`)."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeadDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each request head."""

    head_timeout_s = 15.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        self.transport.close()


def protocol_for(head_timeout_s: float) -> type[HeadDeadline]:
    """The server's HTTP protocol class with this deadline."""
    return type("HeadDeadline", (HeadDeadline,), {"head_timeout_s": head_timeout_s})
