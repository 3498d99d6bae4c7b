"""An error reported partway through a stream the provider began with a 200: what the fault `stream_error=STATUS`
injects (after `stream_error_after` events, 2 unless told), each API's own mid-stream error.

- Anthropic (Messages, and Claude on Vertex AI): `event: error` whose data is the error body a refusal with that
  status carries, `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}` for a 529,
  and no `message_stop` after it (docs.claude.com, Messages streaming: "Error events").
- OpenAI Chat Completions: a `data:` chunk holding the error object, `{"error": {"message", "type", "param",
  "code"}}`, and no `[DONE]` (the openai SDK raises on any chunk with an `error`).
- OpenAI Responses: `event: error`, `{"type": "error", "code", "message", "param", "sequence_number"}`; its code one
  of the Responses error codes, `rate_limit_exceeded` for a 429, else `server_error` (platform.openai.com, streaming
  events: `error`; ResponseError's codes).
- Gemini (`alt=sse`): a `data:` chunk holding Google's error, `{"error": {"code": 503, "message", "status":
  "UNAVAILABLE"}}` (google-genai raises ClientError or ServerError from its `code`).
- Bedrock (ConverseStream, InvokeModelWithResponseStream): an event-stream `exception` frame named by the stream's
  member for it (bedrock-runtime's service model): `throttlingException` for a 429, `serviceUnavailableException`
  for a 503, `validationException` for a 400, else `internalServerException`; its payload `{"message"}`.
"""

from __future__ import annotations

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import eventstream
from prefixgate.errors import RequestError, error_body

SPEAKERS = ("anthropic", "openai", "responses", "gemini", "bedrock")
_BEDROCK_MEMBERS = {429: "throttlingException", 503: "serviceUnavailableException", 400: "validationException"}


def stream_error_event(speaks: str, err: RequestError, sequence_number: int) -> bytes:
    """`err` as the API `speaks` (one of SPEAKERS) reports it mid-stream; `sequence_number`: the events before it."""
    if speaks == "bedrock":
        return eventstream.exception(_BEDROCK_MEMBERS.get(err.status, "internalServerException"), err.message)
    if speaks == "responses":
        code = "rate_limit_exceeded" if err.status == 429 else "server_error"
        data = {"type": "error", "code": code, "message": err.message, "param": None, "sequence_number": sequence_number}
        return b"event: error\ndata: " + compact_bytes(data) + b"\n\n"
    body = compact_bytes(error_body(err, speaks))
    return (b"event: error\n" if speaks == "anthropic" else b"") + b"data: " + body + b"\n\n"
