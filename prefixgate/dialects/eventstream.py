"""AWS event-stream framing (`application/vnd.amazon.eventstream`): Bedrock's streaming responses.

A message is a 12-byte prelude (total length, headers length, CRC32 of those 8 bytes), typed headers, the
payload, and a CRC32 of everything before it. Decoding uses botocore's parser, which checks both CRCs and
the AWS limits; a frame that fails them is the upstream's error (`EventStreamError`), never a crash or a
guess. Encoding is ours (botocore has no encoder): the gateway re-frames events for Bedrock-shaped callers
after it has read and priced them, and the mock providers frame what they stream.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from botocore.eventstream import EventStreamBuffer, ParserError

from prefixgate.dialects.sse import Framing, FramingError

CONTENT_TYPE = "application/vnd.amazon.eventstream"


class EventStreamError(FramingError):
    """A frame that is not valid event-stream (bad CRC, bad lengths, truncated at the end)."""


@dataclass(frozen=True)
class Message:
    headers: dict[str, str | bytes | int | bool]
    payload: bytes

    @property
    def kind(self) -> str:
        """`event`, `exception` or `error` (the `:message-type` header)."""
        return str(self.headers.get(":message-type", "event"))

    @property
    def name(self) -> str:
        """The event type (`chunk`, `messageStart`, ...), or the exception type for exceptions."""
        key = ":exception-type" if self.kind == "exception" else ":event-type"
        return str(self.headers.get(key) or self.headers.get(":error-code") or "")

    def json(self) -> dict:
        return json.loads(self.payload) if self.payload else {}


class Decoder:
    """Feed bytes as they arrive; iterate the messages completed so far."""

    def __init__(self) -> None:
        self._buffer = EventStreamBuffer()
        self._pending = 0

    def feed(self, data: bytes) -> Iterator[Message]:
        self._buffer.add_data(data)
        self._pending += len(data)
        try:
            for message in self._buffer:
                self._pending -= message.prelude.total_length
                yield Message(dict(message.headers), bytes(message.payload))
        except ParserError as e:
            raise EventStreamError(f"invalid event-stream frame: {e}") from None

    def close(self) -> None:
        """At the end of the body: bytes left over are a truncated frame."""
        if self._pending:
            raise EventStreamError(f"event stream ended inside a frame ({self._pending} bytes left over)")


def encode(headers: dict[str, str | bytes | bool], payload: bytes) -> bytes:
    """One event-stream message. Header values: str (type 7), bytes (type 6), bool (types 0 and 1)."""
    raw = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(raw) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + raw + payload
    return head + struct.pack(">I", zlib.crc32(head))


def event(name: str, body: dict) -> bytes:
    """A JSON event as Bedrock sends one (`chunk`, `messageStart`, `metadata`, ...)."""
    return encode({":event-type": name, ":content-type": "application/json", ":message-type": "event"},
                  json.dumps(body, separators=(",", ":")).encode())


def exception(name: str, message: str) -> bytes:
    """A modelled error mid-stream (`throttlingException`, `internalServerException`, ...)."""
    return encode({":exception-type": name, ":content-type": "application/json", ":message-type": "exception"},
                  json.dumps({"message": message}).encode())


def _header(name: str, value: str | bytes | bool) -> bytes:
    key = name.encode()
    if isinstance(value, bool):
        return bytes([len(key)]) + key + bytes([0 if value else 1])
    if isinstance(value, str):
        data, kind = value.encode(), 7
    else:
        data, kind = value, 6
    return bytes([len(key)]) + key + bytes([kind]) + struct.pack(">H", len(data)) + data


class EventStreamFraming(Framing):
    """Event-stream messages as the gateway's relay sees events: `split` cuts whole frames by their prelude's
    length (frames pass through byte for byte, CRCs intact), `payload` checks a frame's CRCs and turns it
    into the format's event object (`to_event`), `data` is its payload bytes."""

    media_type = CONTENT_TYPE

    def __init__(self, to_event: Callable[[Message], dict | None]) -> None:
        self.to_event = to_event

    def split(self, buffer: bytearray, chunk: bytes) -> list[bytes]:
        buffer += chunk
        out = []
        while len(buffer) >= 12:
            total = struct.unpack_from(">I", buffer)[0]
            if total < 16:
                raise EventStreamError(f"invalid event-stream frame: total length {total}")
            if len(buffer) < total:
                break
            out.append(bytes(buffer[:total]))
            del buffer[:total]
        return out

    def payload(self, event: bytes) -> dict | None:
        messages = list(Decoder().feed(event))
        return self.to_event(messages[0]) if messages else None

    def data(self, event: bytes) -> bytes:
        messages = list(Decoder().feed(event))
        return messages[0].payload if messages else b""
