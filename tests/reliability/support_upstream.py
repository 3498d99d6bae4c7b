"""Reliability harness: the real mock providers behind a tap that counts what each request got, an
upstream that resets every connection, and clients that ask in each dialect and note what they saw.

Every prompt carries a nonce, so a request can be followed from the client through the gateway (its
ledger record, by request id) to the upstream (its attempts, by nonce) whatever dialect it became.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import httpx

from prefixgate.dialects import wire_format
from prefixgate.dialects.sse import event_json, split_events
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext, create_app
from prefixgate.usage import Usage

NONCE = re.compile(rb"nonce-[0-9a-f]{16}")
MODEL_PATHS = ("/v1/chat/completions", "/v1/messages", "/v1beta/models/")


def nonce() -> str:
    return "nonce-" + uuid.uuid4().hex[:16]


@dataclass
class Tap:
    """What the upstream answered, per nonce: statuses of every attempt and whether the body finished."""

    answers: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    finished: Counter = field(default_factory=Counter)
    active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wrap(self, app):
        async def tapped(scope, receive, send):
            if scope["type"] != "http" or not scope["path"].startswith(MODEL_PATHS):
                return await app(scope, receive, send)
            seen = {"nonce": "", "status": 0}

            async def recv():
                message = await receive()
                if message["type"] == "http.request" and not seen["nonce"]:
                    found = NONCE.search(message.get("body", b""))
                    seen["nonce"] = found.group().decode() if found else ""
                return message

            async def snd(message):
                if message["type"] == "http.response.start":
                    seen["status"] = message["status"]
                    with self.lock:
                        self.answers[seen["nonce"]].append(message["status"])
                await send(message)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    with self.lock:
                        self.finished[seen["nonce"]] += 1

            with self.lock:
                self.active += 1
            try:
                await app(scope, recv, snd)
            finally:
                with self.lock:
                    self.active -= 1
        return tapped


def mock_upstream(faults: dict, tap: Tap):
    """The mock providers app with standing fault rules, behind `tap`."""
    return tap.wrap(create_app(MockContext(faults=FaultPlan.from_config(faults))))


class ResettingUpstream:
    """Accepts each connection and resets it (RST, no answer): a provider's load balancer dropping us."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.settimeout(1)
            try:
                conn.recv(65536)
            except OSError:
                pass
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def __enter__(self) -> ResettingUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@dataclass
class Seen:
    """What one client saw."""

    nonce: str
    dialect: str
    stream: bool
    behaviour: str
    status: int = 0
    request_id: str = ""
    usage: Usage | None = None
    completed: bool = False           # a whole answer: a 200 body, or a stream through its terminal event
    error_shape_ok: bool = False      # an error answered in the caller's dialect
    stream_error: bool = False        # a 200 stream that ended in the dialect's error event
    hung_up: bool = False             # the client left on purpose


def request_for(dialect: str, model: str, text: str, stream: bool) -> tuple[str, dict]:
    if dialect == "openai":
        body = {"model": model, "messages": [{"role": "user", "content": text}], "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return "/v1/chat/completions", body
    if dialect == "anthropic":
        return "/v1/messages", {"model": model, "max_tokens": 64, "stream": stream,
                                "messages": [{"role": "user", "content": text}]}
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{model}:{action}", {"contents": [{"role": "user", "parts": [{"text": text}]}]}


def error_shape_ok(dialect: str, data: object) -> bool:
    if not isinstance(data, dict):
        return False
    err = data.get("error")
    if dialect == "anthropic":
        return data.get("type") == "error" and isinstance(err, dict) and bool(err.get("type") and err.get("message"))
    if dialect == "gemini":
        return isinstance(err, dict) and bool(err.get("status") and err.get("message") and err.get("code"))
    return isinstance(err, dict) and bool(err.get("type") and err.get("message"))


async def ask(client: httpx.AsyncClient, dialect: str, model: str, stream: bool, behaviour: str = "normal",
              key: str = "caller-key") -> Seen:
    """One request; `behaviour` is normal, slow (reads a stream slowly) or hangup (leaves mid-answer:
    after the first stream chunk, or 0.1 s into waiting for a non-streamed answer)."""
    import asyncio

    seen = Seen(nonce(), dialect, stream, behaviour)
    path, body = request_for(dialect, model, f"Say something about {seen.nonce}.", stream)
    headers = {"authorization": f"Bearer {key}", "x-api-key": key, "x-goog-api-key": key}
    try:
        timeout = httpx.Timeout(30, read=0.1) if behaviour == "hangup" and not stream else httpx.USE_CLIENT_DEFAULT
        async with client.stream("POST", path, json=body, headers=headers, timeout=timeout) as resp:
            seen.status = resp.status_code
            seen.request_id = resp.headers.get("x-prefixgate-request-id", "")
            if resp.status_code != 200:
                seen.error_shape_ok = error_shape_ok(dialect, json.loads(await resp.aread()))
                return seen
            if not stream:
                if behaviour == "hangup":
                    seen.hung_up = True
                    return seen
                data = json.loads(await resp.aread())
                seen.usage = wire_format(dialect).usage_of(data)
                seen.completed = True
                return seen
            counter = wire_format(dialect).stream_usage()
            buffer = bytearray()
            async for chunk in resp.aiter_raw():
                for ev in split_events(buffer, chunk):
                    parsed = event_json(ev)
                    if parsed is not None and (parsed.get("error") or parsed.get("type") == "error"):
                        seen.stream_error = error_shape_ok(dialect, parsed)
                    elif parsed is not None:
                        counter.feed(parsed)
                    if wire_format(dialect).terminal in ev and not seen.stream_error:
                        seen.completed = True
                if behaviour == "hangup":
                    seen.hung_up = True
                    seen.usage = counter.usage
                    return seen
                if behaviour == "slow":
                    await asyncio.sleep(0.05)
            seen.usage = counter.usage
            return seen
    except httpx.ReadTimeout:
        if behaviour != "hangup":
            raise
        seen.hung_up = True
        return seen
