"""Reading usage off a response body as the SDK consumes it, without changing what the SDK sees.

A tap gets the body's raw bytes chunk by chunk and hands back the bytes to pass on. Server-sent
events are split into whole events and fed to the dialect's `StreamUsage` (which knows which events
carry usage and which are cumulative, so a stream is counted once); any other body is kept and parsed
when it ends. The one edit ever made: an OpenAI usage chunk the caller did not ask for (the wrapper
asks for it to price the stream) is withheld, exactly as the gateway does.
"""

from __future__ import annotations

import json
import zlib

from prefixgate.dialects import wire_format
from prefixgate.dialects.sse import event_json, split_events
from prefixgate.usage import Usage

# A JSON body larger than this is passed on but not parsed (no generate response comes close).
MAX_JSON_BYTES = 32 * 1024 * 1024
_ZLIB = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS | 32}


class UsageTap:
    def __init__(self, dialect: str, *, sse: bool, encoding: str = "", withhold_usage: bool = False) -> None:
        self.dialect = dialect
        self.wire = wire_format(dialect)
        self.sse = sse
        self.withhold_usage = withhold_usage
        self.counter = self.wire.stream_usage()
        self.body = bytearray()
        self.first_byte = False
        self.error: str = ""
        self.unreadable: str = ""     # why usage could not be read (the body still reaches the caller as sent)
        # The stream's last event was seen (OpenAI's `[DONE]`, Anthropic's `message_stop`, ...): an SDK that
        # closes the body right after it (the openai SDK stops at `[DONE]`) did not cut the stream short.
        self.ended = False
        self.events = 0     # events with data seen: a cut stream's output is at least one token an event
        self.model = ""     # the model the stream names (Azure's first chunk names none)
        self._terminal: bytes | None = getattr(self.wire, "terminal", None)
        self._buffer = bytearray()
        self._too_big = False
        encoding = encoding.strip().lower()
        # The wrapper asks for `identity`; a server that compresses anyway is decoded here (and the
        # response's content-encoding header dropped by the caller), or left alone if we cannot.
        self._inflate = zlib.decompressobj(_ZLIB[encoding]) if encoding in _ZLIB else None
        self.readable = encoding in ("", "identity") or self._inflate is not None

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to pass on for `chunk`."""
        self.first_byte = True
        if not self.readable:
            return chunk
        if self._inflate is not None:
            chunk = self._inflate.decompress(chunk)
        if not self.sse:
            if len(self.body) + len(chunk) <= MAX_JSON_BYTES:
                self.body += chunk
            else:
                self._too_big = True
            return chunk
        return b"".join(event for event in split_events(self._buffer, chunk) if self._read_event(event))

    def flush(self) -> bytes:
        """Whatever is left when the body ends (a last event without its blank line)."""
        rest = b""
        if self._inflate is not None and self.readable:
            rest = self._inflate.flush()
            if not self.sse:
                self.body += rest
                return rest
        if not self.sse:
            return rest
        self._buffer += rest
        event, self._buffer = bytes(self._buffer), bytearray()
        return event if event and self._read_event(event) else b""

    def _read_event(self, event: bytes) -> bool:
        """Feed one event to the usage counter; False to withhold it."""
        if self._terminal is not None and self._terminal in event:
            self.ended = True
        data = event_json(event)
        if data is None:
            return True
        self.events += 1
        self.model = self.model or named_model(data)
        try:
            self.ended = self.ended or self.wire.ends_stream(data)
            self.counter.feed(data)
            self.error = self.wire.stream_error(data) or self.error
            return self.wire.relays(data, include_usage=not self.withhold_usage)
        except Exception as e:  # an event we cannot read is still the caller's: pass it on, uncounted
            self.unreadable = self.unreadable or f"usage: unreadable event ({type(e).__name__}: {e})"
            return True

    @property
    def usage(self) -> Usage | None:
        try:
            usage = self._usage()
        except Exception as e:
            self.unreadable = self.unreadable or f"usage: unreadable ({type(e).__name__}: {e})"
            return None
        if usage is not None and usage.unreadable:    # impossible counts (usage.impossible_usage)
            self.unreadable = self.unreadable or f"usage: unreadable ({usage.unreadable})"
            return None
        return usage

    def _usage(self) -> Usage | None:
        if self.sse:
            return self.counter.usage
        if not self.body or self._too_big:
            return None
        try:
            data = json.loads(self.body)
        except ValueError:
            return None
        if isinstance(data, list):
            # Gemini's streamGenerateContent without alt=sse answers one JSON array of chunks.
            for item in data:
                if isinstance(item, dict):
                    self.counter.feed(item)
            return self.counter.usage
        if not isinstance(data, dict):
            return None
        return self.wire.usage_of(data) if self.wire.has_usage(data) else None

    def error_message(self) -> str:
        """The provider's error message from an error body, for the ledger."""
        if self.error:
            return self.error
        try:
            data = json.loads(self.body)
        except ValueError:
            return bytes(self.body[:200]).decode(errors="replace")
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict):
            return str(err.get("message", ""))
        return str(err or "")


def named_model(data: object) -> str:
    """The model an OpenAI-format answer or event names: its own `model`, or its `response`'s (Responses events)."""
    for obj in (data, data.get("response") if isinstance(data, dict) else None):
        model = obj.get("model") if isinstance(obj, dict) else None
        if isinstance(model, str) and model:
            return model
    return ""
