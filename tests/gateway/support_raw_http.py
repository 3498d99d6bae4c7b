"""Raw socket HTTP/1.1 servers for the upstream client's tests: each request read whole as its bytes came (what
the client really wrote), and an upstream or HTTP proxy that records every request and answers it `OK`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{\"ok\":true}"


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head + await reader.readexactly(length)


@asynccontextmanager
async def recording_server(seen: list[bytes]) -> AsyncIterator[int]:
    """The port of a local server that appends each request to `seen` and answers it `OK`."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(OK)
        await writer.drain()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def use_http_proxy(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    """Upstream requests go through the HTTP proxy on local `port`, no host exempted."""
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
