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

from prefixgate.dialects import dialect as dialect_module
from prefixgate.dialects.sse import event_json
from prefixgate.usage import Usage

# A JSON body larger than this is passed on but not parsed (no generate response comes close).
MAX_JSON_BYTES = 32 * 1024 * 1024
_ZLIB = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS | 32}


class UsageTap:
    def __init__(self, dialect: str, *, sse: bool, encoding: str = "", hide_openai_usage: bool = False) -> None:
        self.dialect = dialect
        self.sse = sse
        self.hide_openai_usage = hide_openai_usage
        self.counter = dialect_module(dialect).StreamUsage()
        self.body = bytearray()
        self.first_byte = False
        self.error: str = ""
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
        self._buffer += chunk.replace(b"\r\n", b"\n")
        out = bytearray()
        while (end := self._buffer.find(b"\n\n")) >= 0:
            event = bytes(self._buffer[:end + 2])
            del self._buffer[:end + 2]
            if self._read_event(event):
                out += event
        return bytes(out)

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
        data = event_json(event)
        if data is None:
            return True
        self.counter.feed(data)
        if self.dialect == "anthropic" and data.get("type") == "error":
            self.error = str((data.get("error") or {}).get("message", "stream error"))
        elif self.dialect == "responses" and data.get("type") in ("error", "response.failed"):
            failure = data if data["type"] == "error" else (data.get("response") or {}).get("error") or {}
            self.error = str(failure.get("message", "stream error"))
        elif self.dialect != "anthropic" and isinstance(data.get("error"), dict):
            self.error = str(data["error"].get("message", "stream error"))
        return not (self.hide_openai_usage and data.get("usage") and not data.get("choices"))

    @property
    def usage(self) -> Usage | None:
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
        return dialect_module(self.dialect).usage_from_response(data) if _has_usage(self.dialect, data) else None

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


def _has_usage(dialect: str, data: dict) -> bool:
    return bool(data.get("usageMetadata" if dialect == "gemini" else "usage"))
