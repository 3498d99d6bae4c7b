"""Server-sent events: the framing OpenAI, Anthropic and Gemini stream in, and the `Framing` interface
a wire format with another framing (AWS event-stream's binary frames) implements instead."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prefixgate.compact_json import compact


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def parse_sse(lines: Iterable[str | bytes]) -> Iterator[SSEEvent]:
    """Events from a stream of lines (with or without their newlines), per the WHATWG rules we need:
    multi-line `data:`, `event:`, comments (`:` lines) and a blank line ending each event."""
    data: list[str] = []
    event: str | None = None
    for raw in lines:
        line = raw.decode() if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if not line:
            if data:
                yield SSEEvent("\n".join(data), event)
            data, event = [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield SSEEvent("\n".join(data), event)


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Lines from arbitrary byte chunks (network reads split events anywhere)."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        yield from lines
    if buf:
        yield buf


def encode_sse(data: Any, event: str | None = None) -> bytes:
    """One event; dicts are sent as compact JSON, strings (e.g. OpenAI's `[DONE]`) as they are."""
    payload = data if isinstance(data, str) else compact(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def event_data(event: bytes) -> bytes:
    """One raw event's `data:` payload (its lines joined by newlines); empty for a comment-only event."""
    return b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))


def event_json(event: bytes) -> dict | None:
    """The JSON object in one raw event's `data:` lines; None for comments, `[DONE]` or non-objects."""
    data = event_data(event)
    if not data:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def split_events(buffer: bytearray, chunk: bytes) -> list[bytes]:
    """Whole SSE events (each with its blank-line terminator) completed by `chunk`; the rest stays in
    `buffer` (network reads split events anywhere)."""
    buffer += chunk.replace(b"\r\n", b"\n")
    out = []
    while (end := buffer.find(b"\n\n")) >= 0:
        out.append(bytes(buffer[:end + 2]))
        del buffer[:end + 2]
    return out


class FramingError(ValueError):
    """Bytes that cannot be events of the stream's framing (a bad checksum, an impossible length)."""


class Framing:
    """How a stream's events are delimited on the wire: `split` cuts whole events out of arriving bytes
    (keeping a partial one in `buffer`), `payload` is one event's JSON object (None for comments and
    sentinels), `data` its payload bytes as they were sent."""

    media_type: str

    def split(self, buffer: bytearray, chunk: bytes) -> list[bytes]:
        raise NotImplementedError

    def payload(self, event: bytes) -> dict | None:
        raise NotImplementedError

    def data(self, event: bytes) -> bytes:
        raise NotImplementedError


class SSEFraming(Framing):
    media_type = "text/event-stream"
    def split(self, buffer: bytearray, chunk: bytes) -> list[bytes]:
        return split_events(buffer, chunk)

    def payload(self, event: bytes) -> dict | None:
        return event_json(event)

    def data(self, event: bytes) -> bytes:
        return event_data(event)


SSE_FRAMING = SSEFraming()
