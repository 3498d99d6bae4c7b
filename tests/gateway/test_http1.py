"""The lean upstream client against a raw socket server that answers exactly what each test scripts, and the
gateway's upstream connections kept alive across streamed requests."""

from __future__ import annotations

import asyncio
import select
import socket
import threading
from collections.abc import AsyncIterator

import httpx
import pytest
import uvloop

from prefixgate.dialects import wire_format
from prefixgate.gateway.app import create_app
from prefixgate.gateway.http1 import BodyStream, Broken, ConnectFailed, Http1Pool, ReadTimeout
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import settings_for
from tests.gateway.support_raw_http import read_request, recording_server, use_http_proxy
from tests.support_services import ServerThread, refusing_port


def run(script, body) -> None:  # noqa: ANN001 - script: async (reader, writer, seen) -> None per connection
    async def main() -> None:
        seen: list[bytes] = []
        connections = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections.append(writer)
            try:
                await script(reader, writer, seen)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions?x=1"
        pool = Http1Pool(connect_timeout_s=2)
        try:
            await body(pool, url, seen, connections)
        finally:
            pool.close()
            server.close()

    asyncio.run(main())


def test_keep_alive_reuses_one_connection_and_the_request_is_well_formed() -> None:
    async def script(reader, writer, seen):
        while True:
            seen.append(await read_request(reader))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-request-id: r1\r\n"
                         b"content-length: 11\r\n\r\n{\"ok\":true}")

    async def body(pool, url, seen, connections):
        for _ in range(3):
            resp = await pool.request("POST", url, {"authorization": "Bearer k"}, b'{"a":1}', 5)
            assert resp.status == 200 and ("x-request-id", "r1") in resp.headers
            assert await resp.read() == b'{"ok":true}'
        assert len(connections) == 1
        assert seen[0].startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 127.0.0.1:")
        assert b"authorization: Bearer k\r\n" in seen[0] and seen[0].endswith(b'content-length: 7\r\n\r\n{"a":1}')

    run(script, body)


def test_a_chunked_stream_arrives_piece_by_piece() -> None:
    async def script(reader, writer, seen):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for piece in (b"data: 1\n\n", b"data: 2\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.write(b"0\r\n\r\n")

    async def body(pool, url, seen, connections):
        resp = await pool.request("POST", url, {}, b"{}", 5)
        assert [chunk async for chunk in resp.iter_chunks()] == [b"data: 1\n\n", b"data: 2\n\n"]

    run(script, body)


def test_a_stream_read_to_its_end_goes_back_to_the_pool_though_its_owner_closes_it() -> None:
    # The relay closes every stream's response however it ended (a hang-up must reach the upstream); a
    # stream that ended cleanly was already handed back, and closing it then would cost every streamed
    # request a new connection (and, against a real provider, a new TLS handshake).
    async def script(reader, writer, seen):
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n0\r\n\r\n")

    async def body(pool, url, seen, connections):
        for _ in range(3):
            resp = await pool.request("POST", url, {}, b"{}", 5)
            assert [chunk async for chunk in resp.iter_chunks()] == [b"data: 1\n\n"]
            resp.close()
        assert len(connections) == 1
        cut = await pool.request("POST", url, {}, b"{}", 5)
        cut.close()                         # closed before its end: that connection is dropped
        resp = await pool.request("POST", url, {}, b"{}", 5)
        assert [chunk async for chunk in resp.iter_chunks()] == [b"data: 1\n\n"]
        assert len(connections) == 2

    run(script, body)


def test_a_body_without_length_ends_with_the_connection() -> None:
    async def script(reader, writer, seen):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nall of it")
        writer.close()

    async def body(pool, url, seen, connections):
        resp = await pool.request("POST", url, {}, b"{}", 5)
        assert await resp.read() == b"all of it"

    run(script, body)


def test_a_connection_the_upstream_closed_while_idle_is_not_reused() -> None:
    async def script(reader, writer, seen):
        seen.append(await read_request(reader))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()              # like a server's keep-alive timeout

    async def body(pool, url, seen, connections):
        assert await (await pool.request("POST", url, {}, b"{}", 5)).read() == b"ok"

        async def upstream_close_seen() -> None:   # the condition, not a guess at how long it takes
            while not all(conn.closed for idle in pool._idle.values() for conn in idle):
                await asyncio.sleep(0.01)
        await asyncio.wait_for(upstream_close_seen(), 30)
        assert await (await pool.request("POST", url, {}, b"{}", 5)).read() == b"ok"
        assert len(connections) == 2 and len(seen) == 2

    run(script, body)


def test_a_response_cut_off_mid_body_is_broken_and_silence_times_out() -> None:
    async def script(reader, writer, seen):
        request = await read_request(reader)
        if b"cut" in request:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial")
            await writer.drain()
            writer.close()
        else:
            await asyncio.sleep(5)

    async def body(pool, url, seen, connections):
        resp = await pool.request("POST", url, {}, b'"cut"', 5)
        with pytest.raises(Broken):
            await resp.read()
        with pytest.raises(ReadTimeout):
            await pool.request("POST", url, {}, b'"wait"', 0.2)

    run(script, body)


def test_a_head_that_cannot_be_sent_takes_no_connection() -> None:
    """A header value HTTP/1.1 cannot carry (outside latin-1) is refused before a connection is opened or taken:
    one opened first was left open, counted nowhere."""
    async def script(reader, writer, seen):
        seen.append(await read_request(reader))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")

    async def body(pool, url, seen, connections):
        with pytest.raises(UnicodeEncodeError):
            await pool.request("POST", url, {"x-note": "snow \u2603"}, b"{}", 5)
        await asyncio.sleep(0.05)
        assert connections == []

    run(script, body)


def test_unreachable_upstream_and_header_injection_are_refused() -> None:
    async def main() -> None:
        pool = Http1Pool(connect_timeout_s=1)
        with refusing_port() as port:
            with pytest.raises(ConnectFailed):
                await pool.request("POST", f"http://127.0.0.1:{port}/v1", {}, b"{}", 1)
            with pytest.raises(ValueError, match="line break"):
                await pool.request("POST", f"http://127.0.0.1:{port}/v1", {"x-a": "1\r\nx-b: 2"}, b"{}", 1)

    asyncio.run(main())


def test_an_upstream_behind_an_http_proxy_is_reached_through_the_proxy(monkeypatch) -> None:
    from prefixgate.gateway.upstream import UpstreamClient
    from prefixgate.policies.schema import Upstream

    async def main() -> None:
        seen: list[bytes] = []
        async with recording_server(seen) as proxy_port:
            use_http_proxy(monkeypatch, proxy_port)
            client = UpstreamClient(connect_timeout_s=2)
            try:
                upstream = Upstream("openai", "openai", url="http://api.example.test")
                resp = await client.send(upstream, wire_format(upstream.dialect), "gpt-5.4", b"{}", False, {}, "sk-k", 5)
            finally:
                await client.aclose()
        assert resp.status == 200 and resp.body == b'{"ok":true}'
        # Absolute-form request line: the proxy was asked for the upstream's URL.
        assert seen[0].startswith(b"POST http://api.example.test/v1/chat/completions HTTP/1.1")

    asyncio.run(main())


def test_streamed_requests_through_the_gateway_reuse_one_upstream_connection(tmp_path) -> None:
    ports: list[int] = []
    mock = mock_app(MockContext())

    async def upstream(scope, receive, send):  # noqa: ANN001, ANN202 - ASGI
        if scope["type"] == "http":
            ports.append(scope["client"][1])
        await mock(scope, receive, send)

    with ServerThread(upstream, log_level="critical") as up, \
            ServerThread(create_app(settings_for(up.url, tmp_path))) as gateway, httpx.Client() as client:
        for stream in (True, True, False, True):
            answer = client.post(gateway.url + "/v1/messages", headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
                                 json={"model": "claude-sonnet-4-6", "max_tokens": 8, "stream": stream,
                                       "messages": [{"role": "user", "content": "hello"}]})
            assert answer.status_code == 200
    assert len(ports) == 4 and len(set(ports)) == 1


def test_an_interim_103_is_skipped_and_the_answer_after_it_is_the_response() -> None:
    async def script(reader, writer, seen):
        while True:
            seen.append(await read_request(reader))
            writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.02)
            writer.write(b"HTTP/1.1 201 Created\r\nx-request-id: r2\r\ncontent-length: 11\r\n\r\n{\"ok\":true}")

    async def body(pool, url, seen, connections):
        for _ in range(2):
            resp = await pool.request("POST", url, {}, b"{}", 5)
            assert resp.status == 201 and resp.headers == [("x-request-id", "r2"), ("content-length", "11")]
            assert await resp.read() == b'{"ok":true}'
        assert len(connections) == 1

    run(script, body)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_an_early_answer_the_upstream_reset_the_connection_after_is_still_the_response(loop: str) -> None:
    # An upstream that answers an upload before reading it and closes at once (uvicorn does so) leaves the body
    # unread, so its kernel resets the connection: the next write fails while the answer sits unread here.
    # The gateway must relay the answer, not a broken connection (the caller would get a 502 for its 401).
    server = socket.create_server(("127.0.0.1", 0))
    answered = threading.Event()

    def upstream() -> None:
        conn, _ = server.accept()
        conn.recv(16)           # the request line's start: the rest of the head stays unread
        conn.sendall(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 6\r\nconnection: close\r\n\r\nno key")
        conn.close()            # the body unread: a reset
        answered.set()

    threading.Thread(target=upstream, daemon=True).start()
    taken: list = []

    async def main() -> None:
        pool = Http1Pool(connect_timeout_s=2)
        connection = pool._connection

        async def taking(origin, timeout_s):  # noqa: ANN001, ANN202
            taken.append(await connection(origin, timeout_s))
            return taken[-1]
        pool._connection = taking   # type: ignore[method-assign]

        async def chunks() -> AsyncIterator[bytes]:
            # Block the event loop (no await) until the answer and the reset are in, so the loop cannot read the
            # answer before the body's writes meet the reset: the race a busy gateway loses now and then.
            assert answered.wait(30)
            select.select([taken[0].transport.get_extra_info("socket").fileno()], [], [], 30)
            for _ in range(64):
                yield b"x" * 65536

        try:
            resp = await pool.request("POST", f"http://127.0.0.1:{server.getsockname()[1]}/v1/files", {},
                                      BodyStream(chunks(), 64 * 65536), 10)
            assert resp.status == 401 and await resp.read() == b"no key"
            assert not pool._idle.get(("http", "127.0.0.1", server.getsockname()[1]))     # never reused
        finally:
            pool.close()
            server.close()

    uvloop.run(main()) if loop == "uvloop" else asyncio.run(main())
