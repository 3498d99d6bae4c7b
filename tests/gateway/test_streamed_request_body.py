"""A request body sent upstream as it arrives (a `/v1/files` upload: `http1.BodyStream`), against a raw socket
server: whole and with its content-length, at the pace the upstream reads it, and the same through an HTTP proxy
(aiohttp), never chunked (a provider's multipart parser is owed the length the caller declared)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from prefixgate.dialects import wire_format
from prefixgate.gateway.http1 import BodyStream, Http1Pool
from prefixgate.gateway.upstream import UpstreamClient
from prefixgate.policies.schema import Upstream
from tests.gateway.support_raw_http import OK, recording_server, use_http_proxy

CHUNK = b"f" * (1 << 20)
CHUNKS = 32         # 32 MiB: far more than the socket buffers on both sides hold


def counted(sent: list[int], pieces: list[bytes]) -> AsyncIterator[bytes]:
    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            sent.append(len(piece))
            yield piece
    return chunks()


def test_a_streamed_body_arrives_whole_with_its_length() -> None:
    async def main() -> None:
        seen: list[bytes] = []
        async with recording_server(seen) as port:
            pool = Http1Pool(connect_timeout_s=2)
            try:
                body = BodyStream(counted([], [b"--b\r\n", b"part one ", b"part two\r\n--b--\r\n"]), 31)
                resp = await pool.request("POST", f"http://127.0.0.1:{port}/v1/files",
                                          {"content-type": "multipart/form-data; boundary=b"}, body, 5)
                assert resp.status == 200 and await resp.read() == b'{"ok":true}'
            finally:
                pool.close()
        assert b"content-length: 31\r\n" in seen[0] and b"transfer-encoding" not in seen[0].lower()
        assert seen[0].endswith(b"\r\n\r\n--b\r\npart one part two\r\n--b--\r\n")

    asyncio.run(main())


def test_a_streamed_body_waits_for_an_upstream_that_reads_slowly() -> None:
    async def main() -> None:
        sent: list[int] = []
        reading = asyncio.Event()
        received: list[int] = []

        async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            await reading.wait()        # reads nothing of the body until told to
            left = CHUNKS * len(CHUNK)
            while left:
                piece = await reader.read(min(left, 1 << 16))
                received.append(len(piece))
                left -= len(piece)
            writer.write(OK)
            await writer.drain()

        server = await asyncio.start_server(upstream, "127.0.0.1", 0)
        pool = Http1Pool(connect_timeout_s=2)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/files"
        try:
            body = BodyStream(counted(sent, [CHUNK] * CHUNKS), CHUNKS * len(CHUNK))
            request = asyncio.create_task(pool.request("POST", url, {}, body, 30))
            for _ in range(50):
                await asyncio.sleep(0.02)
            # The upstream has read nothing: the body was taken only as far as the buffers hold, not all of it.
            assert sum(sent) < CHUNKS * len(CHUNK) // 2
            reading.set()
            resp = await request
            assert resp.status == 200 and await resp.read() == b'{"ok":true}'
        finally:
            pool.close()
            server.close()
        assert sum(sent) == sum(received) == CHUNKS * len(CHUNK)

    asyncio.run(main())


def test_a_streamed_body_through_an_http_proxy_keeps_its_length(monkeypatch) -> None:
    async def main() -> None:
        seen: list[bytes] = []
        async with recording_server(seen) as proxy_port:
            use_http_proxy(monkeypatch, proxy_port)
            client = UpstreamClient(connect_timeout_s=2)
            upstream = Upstream("openai", "openai", url="http://api.example.test")
            try:
                body = BodyStream(counted([], [b"file ", b"bytes"]), 10)
                resp = await client.forward(upstream, wire_format(upstream.dialect), "POST", "/v1/files", "", body,
                                            "sk-k", caller_headers={"content-type": "multipart/form-data; boundary=b"})
            finally:
                await client.aclose()
        assert resp.status == 200
        assert seen[0].startswith(b"POST http://api.example.test/v1/files HTTP/1.1")
        assert b"content-length: 10\r\n" in seen[0].lower() and b"transfer-encoding" not in seen[0].lower()
        assert seen[0].endswith(b"\r\n\r\nfile bytes")

    asyncio.run(main())


def test_an_unsolicited_100_continue_does_not_cut_a_streamed_body_short() -> None:
    async def main() -> None:
        received: list[bytes] = []

        async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            received.append(await reader.readexactly(3 * len(CHUNK)))
            writer.write(OK)
            await writer.drain()

        async def slowly() -> AsyncIterator[bytes]:
            for _ in range(3):
                await asyncio.sleep(0.05)       # the 100 is in before the second piece is taken
                yield CHUNK

        server = await asyncio.start_server(upstream, "127.0.0.1", 0)
        pool = Http1Pool(connect_timeout_s=2)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/files"
        try:
            resp = await pool.request("POST", url, {}, BodyStream(slowly(), 3 * len(CHUNK)), 5)
            assert resp.status == 200 and await resp.read() == b'{"ok":true}'
        finally:
            pool.close()
            server.close()
        assert received == [CHUNK * 3]

    asyncio.run(main())
