"""How many messages and content parts one request may carry: the gateway's work on a body (planning, prefix
keys, encoding) grows with them, so a body of a million tiny messages within the byte limit is refused before
it is planned, with a 413 in the caller's own error shape that names the limit and the setting that moves it.

Counted on the parsed request, whatever its format: each segment is a message (a turn, a Gemini content, a
Responses input item; the system prompt and the tools list count one each), each block a content part.

A file upload (`/v1/files`) is bounded the same way by bytes: the provider's per-file cap, or `max_upload_mb`
below it. The multipart body is what is counted (it is streamed upstream unparsed), so its form fields and part
headers get `FORM_ALLOWANCE` beyond the file's cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixgate.config import Settings
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation
from prefixgate.providers.files import MAX_FILE_BYTES, OPENAI, PROVIDER_NAMES

FORM_ALLOWANCE = 64 * 1024


@dataclass(frozen=True)
class BodyLimits:
    max_messages: int
    max_content_parts: int
    max_upload_bytes: int = MAX_FILE_BYTES[OPENAI]

    @classmethod
    def of(cls, settings: Settings) -> BodyLimits:
        return cls(settings.max_messages, settings.max_content_parts, settings.max_upload_mb * 1024 * 1024)

    def check_upload(self, size: int, provider: str) -> None:
        """Raise a 413 naming the limit when an upload body of `size` bytes (declared or so far) is over it."""
        cap = min(self.max_upload_bytes, MAX_FILE_BYTES[provider])
        if size > cap + FORM_ALLOWANCE:
            whose = "the gateway's (max_upload_mb, PREFIXGATE_MAX_UPLOAD_MB)" if cap < MAX_FILE_BYTES[provider] \
                else f"{PROVIDER_NAMES[provider]}'s"
            raise RequestError(f"file upload of {size} bytes is over the limit of {cap} bytes per file, {whose}",
                               field="file", status=413, kind="too_large")

    def check(self, conv: Conversation) -> None:
        """Raise a 413 naming the limit when `conv` is over one."""
        messages = len(conv.segments)
        if messages > self.max_messages:
            raise RequestError(f"request has {messages} messages, over the gateway's limit of {self.max_messages} "
                               "messages per request (max_messages, PREFIXGATE_MAX_MESSAGES)", field="messages",
                               status=413, kind="too_large")
        parts = sum(len(s.blocks) for s in conv.segments)
        if parts > self.max_content_parts:
            raise RequestError(f"request has {parts} content parts, over the gateway's limit of "
                               f"{self.max_content_parts} content parts per request (max_content_parts, "
                               "PREFIXGATE_MAX_CONTENT_PARTS)", field="messages", status=413, kind="too_large")
