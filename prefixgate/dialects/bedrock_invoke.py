"""Amazon Bedrock InvokeModel / InvokeModelWithResponseStream with Claude: the Anthropic Messages body as
Bedrock takes it, and its stream as Bedrock frames it.

The body is Anthropic's without `model` and `stream` (the path names the model and the operation) and with
`anthropic_version: bedrock-2023-05-31` (plus `anthropic_beta` as a body array where the API has a header).
Cache markers are Anthropic's `cache_control`. A streamed answer is Anthropic's event sequence, each event's
JSON base64-encoded in the `bytes` of an event-stream `chunk`; the `message_stop` chunk also carries
`amazon-bedrock-invocationMetrics`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator

from prefixgate.dialects import anthropic, eventstream
from prefixgate.dialects.validate import expect, load_body
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation
from prefixgate.usage import Usage

VERSION = "bedrock-2023-05-31"


def parse_request(body: bytes | str | dict, *, model: str, stream: bool = False) -> Conversation:
    """An InvokeModel body as a Conversation; `model` and `stream` come from the path."""
    data = load_body(body)
    for key in ("model", "stream"):
        if key in data:
            raise RequestError(f"{key}: not allowed in an InvokeModel body (the path names the model and whether "
                               "it streams)", field=key)
    if "anthropic_version" not in data:
        raise RequestError(f"anthropic_version: field required ({VERSION})", field="anthropic_version")
    expect(data["anthropic_version"], str, "anthropic_version")
    conv = anthropic.parse_request({"model": model, **data})
    conv.params.pop("model", None)
    conv.field_order.remove("model")
    conv.stream = stream
    return conv


def encode_request(conv: Conversation) -> dict:
    """The InvokeModel body: Anthropic's encoding, without the model (it goes in the path)."""
    body = anthropic.encode_request(conv)
    body.pop("model", None)
    body.pop("stream", None)
    return body


def chunk(event: dict) -> bytes:
    """One Anthropic stream event as Bedrock's event-stream `chunk`."""
    data = json.dumps(event, separators=(",", ":")).encode()
    return eventstream.event("chunk", {"bytes": base64.b64encode(data).decode()})


def event_of(message: eventstream.Message) -> dict:
    """The Anthropic event inside a `chunk` frame; an exception frame is the upstream's error."""
    if message.kind != "event":
        detail = message.json().get("message") if message.payload else ""
        raise RequestError(f"Bedrock stream: {message.name or message.kind}: {detail or 'no message'}",
                           status=502, kind="server")
    if message.name != "chunk":
        return {}
    try:
        return json.loads(base64.b64decode(message.json()["bytes"]))
    except (KeyError, ValueError, TypeError) as e:
        raise RequestError(f"Bedrock stream: a chunk without a valid base64 JSON event ({e})", status=502,
                           kind="server") from None


def stream_frames(events: Iterable[dict], usage: Usage) -> Iterator[bytes]:
    """`chunk` frames for Anthropic events, with Bedrock's invocation metrics on `message_stop`."""
    for event in events:
        if event.get("type") == "message_stop":
            event = {**event, "amazon-bedrock-invocationMetrics": {
                "inputTokenCount": usage.uncached_input, "outputTokenCount": usage.output,
                "invocationLatency": 0, "firstByteLatency": 0,
                "cacheReadInputTokenCount": usage.cache_read, "cacheWriteInputTokenCount": usage.cache_write}}
        yield chunk(event)
