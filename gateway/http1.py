"""A lean HTTP/1.1 client for upstream calls: keep-alive connections per origin on asyncio protocols,
responses parsed by httptools (the C parser uvicorn uses), plain TCP or TLS.

Why not aiohttp alone: against a fast upstream (a self-hosted engine next door, or the benchmark's fake
provider) aiohttp's request machinery (request and response objects, multidicts, URL objects, payload
writers, tracing hooks) was a fifth of the gateway's CPU per request, about 0.2 ms. This client does only
what the gateway needs: one request at a time per connection, content-length, chunked or close-delimited
bodies, streaming with backpressure, a connect timeout and a timeout on every wait for bytes. Requests
through an HTTP proxy still go through aiohttp (see upstream.py).

Nothing is retried here. A reused connection that the upstream closed while it sat idle is dropped when it
is taken from the pool; one that breaks after the request was written fails like any broken connection, and
the route's retry policy decides, as it does for every failure before the first byte.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools

IDLE_S = 15.0           # a pooled connection older than this is closed rather than reused
MAX_IDLE = 256          # idle connections kept per origin
HIGH_WATER = 1 << 20    # a streamed body buffered beyond this pauses reading until the caller catches up


class ConnectFailed(Exception):
    pass


class ReadTimeout(Exception):
    pass


class Broken(Exception):
    """The connection closed or sent something that is not HTTP/1.1 before the response was complete."""


class _Connection(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.parser = httptools.HttpResponseParser(self)
        self.writable: asyncio.Future | None = None      # set while the transport's write buffer is full
        self.begin()

    def begin(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        self.head_done = self.done = self.keep_alive = self.paused = self.interim = False
        self.until_close = False          # neither content-length nor chunked: the body ends with the connection
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.error: Exception | None = None
        self.waiter: asyncio.Future | None = None
        self.cut_short = False            # answered before the whole request body was sent: never reused

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(Broken(f"malformed response ({e})"))
            self.close()

    def pause_writing(self) -> None:
        self.writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    async def drain(self) -> None:
        """Until the transport takes more (a streamed request body waits for a slow upstream here)."""
        if self.writable is not None:
            await self.writable
        if self.closed:
            raise Broken("connection closed by the upstream while the request was sent")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.resume_writing()
        if self.until_close and self.head_done and not self.done:
            self.done = True            # a close-delimited body ends here
            self._wake()
        elif not self.done:
            self._fail(Broken("connection closed by the upstream"))

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # An interim answer (100 Continue, 103 Early Hints): not the response, which follows on the same
            # connection (RFC 9110 section 15.2); taken as the answer, it would cut a streamed body short.
            self.headers.clear()
            self.interim = True
            return
        self.status = status
        names = {k.lower() for k, _ in self.headers}
        self.until_close = b"content-length" not in names and b"transfer-encoding" not in names
        self.head_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None and not self.closed:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            return
        self.done = True
        self.keep_alive = self.parser.should_keep_alive()
        self._wake()

    # -- waiting
    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def wait(self, timeout_s: float) -> None:
        """Until more arrives (headers, body bytes, the end) or the connection fails."""
        if self.error is not None:
            raise self.error
        self.waiter = self.loop.create_future()
        timer = self.loop.call_later(timeout_s, self._timed_out, self.waiter)
        try:
            await self.waiter
        finally:
            timer.cancel()
            self.waiter = None
        if self.error is not None:
            raise self.error

    def _timed_out(self, waiter: asyncio.Future) -> None:
        if not waiter.done():
            waiter.set_exception(ReadTimeout())

    def take(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        self.buffered = 0
        if self.paused and self.transport is not None and not self.closed:
            self.paused = False
            self.transport.resume_reading()
        return data

    def salvage(self, spare_fd: int) -> bool:
        """After a write broke before the answer was read: the answer the upstream had already sent, read from
        `spare_fd` (a duplicate of the socket's). An upstream that answers an upload early and closes at once,
        with the body unread (uvicorn does; the providers' front ends linger), makes its kernel send a reset, and
        the next write fails on it while the answer sits unread in ours: the event loop closes the transport
        without reading it, but the kernel still hands it to a reader. True if the answer's head is in."""
        while not self.done:
            try:
                data = os.read(spare_fd, 1 << 16)
            except OSError:         # nothing more buffered, or the reset itself
                break
            if not data:
                break
            self.data_received(data)
        if self.head_done and self.until_close:
            self.done = True        # the connection is gone: a close-delimited body ends with what was read
        return self.head_done

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Http1Response:
    def __init__(self, pool: Http1Pool, origin: tuple[str, str, int], conn: _Connection, timeout_s: float) -> None:
        self._pool, self._origin, self._conn, self._timeout_s = pool, origin, conn, timeout_s
        self._released = False
        self.status = conn.status
        self.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in conn.headers]

    @property
    def done(self) -> bool:
        return self._conn.done

    async def read(self) -> bytes:
        conn, parts = self._conn, []
        try:
            while True:
                parts.append(conn.take())
                if conn.done:
                    self.release()
                    return b"".join(parts)
                await conn.wait(self._timeout_s)
        except BaseException:       # broken, timed out or cancelled: the connection is not reusable
            conn.close()
            raise

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            if conn.chunks:
                yield conn.take()
            elif conn.done:
                self.release()
                return
            else:
                await conn.wait(self._timeout_s)

    def release(self) -> None:
        """Back to the pool when the response ended cleanly on a keep-alive connection, else closed."""
        conn = self._conn
        self._released = True
        if conn.done and conn.keep_alive and not conn.closed and not conn.chunks and not conn.cut_short:
            self._pool.give_back(self._origin, conn)
        else:
            conn.close()

    def close(self) -> None:
        """Drop the connection (an upstream mid-stream must see the hang-up), unless `release` already
        handed it back to the pool: a stream's owner closes it however the stream ended, and closing a
        pooled connection would make every streamed request open a new one."""
        if not self._released:
            self._conn.close()


@dataclass
class BodyStream:
    """A request body sent as it arrives: exactly `length` bytes (its content-length) from `chunks`."""
    chunks: AsyncIterator[bytes]
    length: int


async def _send_body(conn: _Connection, body: BodyStream, timeout_s: float) -> None:
    """`body` as it arrives, at the pace the upstream reads it, until it is all sent or the upstream answers
    early (a 401, a 413 from its front end, often closing the connection before reading on): then its answer is
    what the caller gets, not the broken write."""
    chunks = body.chunks
    try:
        async for chunk in chunks:
            if conn.head_done or conn.closed:
                conn.cut_short = True
                return      # an answer is in (else `wait` raises the hang-up)
            conn.transport.write(chunk)  # type: ignore[union-attr]
            try:
                await asyncio.wait_for(conn.drain(), timeout_s)
            except TimeoutError:
                raise ReadTimeout() from None
            except Broken:
                if not conn.head_done:
                    raise
                conn.cut_short = True
                return
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


def _spare_of(conn: _Connection) -> int | None:
    """A duplicate of `conn`'s socket descriptor (for `_Connection.salvage`), None if it has none any more (a
    transport closed as the head was written): the request then fails as any broken connection does."""
    sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
    try:
        return os.dup(sock.fileno()) if sock is not None else None
    except OSError:
        return None


class Http1Pool:
    """Create inside the running event loop."""

    def __init__(self, connect_timeout_s: float) -> None:
        self.connect_timeout_s = connect_timeout_s
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._targets: dict[str, tuple[tuple[str, str, int], str, str]] = {}
        self._tls: ssl.SSLContext | None = None

    async def request(self, method: str, url: str, headers: dict[str, str], body: bytes | BodyStream | None,
                      timeout_s: float) -> Http1Response:
        """Send one request and wait for the response's headers (at most `timeout_s`); the body follows.
        A `BodyStream` is written as it arrives, at the pace the upstream reads it."""
        origin, host, target = self._target(url)
        lines = [f"{method} {target} HTTP/1.1\r\nhost: {host}\r\n"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"header {name!r} contains a line break")
            lines.append(f"{name}: {value}\r\n")
        streamed = body if isinstance(body, BodyStream) else None
        length = streamed.length if streamed is not None else len(body or b"")
        lines.append(f"content-length: {length}\r\n\r\n")
        head = "".join(lines).encode("latin-1")     # before a connection is taken: one that cannot be sent holds none
        conn = await self._connection(origin, timeout_s)
        conn.begin()
        # Head and body as two buffers (one writev): joined, a big body would be copied once more on the loop.
        conn.transport.writelines((head, body) if body and streamed is None else (head,))  # type: ignore[union-attr]
        # Plain TCP only: under TLS the bytes left in the socket are ciphertext the event loop never decrypted.
        spare = _spare_of(conn) if streamed is not None and origin[0] == "http" else None
        try:
            if streamed is not None:
                await _send_body(conn, streamed, timeout_s)
            while not conn.head_done:
                await conn.wait(timeout_s)
        except Broken:
            if spare is None or conn.head_done or not conn.salvage(spare):
                conn.close()
                raise
            conn.cut_short = True
        except BaseException:
            conn.close()
            raise
        finally:
            if spare is not None:
                os.close(spare)
        return Http1Response(self, origin, conn, timeout_s)

    def give_back(self, origin: tuple[str, str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(origin, [])
        if len(idle) >= MAX_IDLE:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()

    async def _connection(self, origin: tuple[str, str, int], timeout_s: float) -> _Connection:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()       # the most recently used: the least likely to have been closed
            if not conn.closed and not conn.transport.is_closing() and now - conn.idle_since < IDLE_S:  # type: ignore[union-attr]
                return conn
            conn.close()
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if scheme == "https" else None
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(loop), host, port, ssl=tls,
                                       server_hostname=host if tls else None),
                min(self.connect_timeout_s, timeout_s))
        except (OSError, TimeoutError, ssl.SSLError) as e:
            raise ConnectFailed(f"{type(e).__name__}: {e}") from None
        return conn

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _target(self, url: str) -> tuple[tuple[str, str, int], str, str]:
        found = self._targets.get(url)
        if found is None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http(s) URL: {url!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            default = port == (443 if parts.scheme == "https" else 80)
            name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            host = name if default else f"{name}:{port}"
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            found = ((parts.scheme, parts.hostname, port), host, target)
            if len(self._targets) < 4096:     # a few endpoints per upstream; bounded all the same
                self._targets[url] = found
        return found
