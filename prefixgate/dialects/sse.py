"""Server-sent events: the framing all three providers stream in."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


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
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
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
