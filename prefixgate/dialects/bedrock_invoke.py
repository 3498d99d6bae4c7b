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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from urllib.parse import quote

from prefixgate.dialects import anthropic, eventstream, tagging
from prefixgate.dialects.bedrock import BedrockFormat, Operation
from prefixgate.dialects.neutral import Chat, Delta, StreamWriter
from prefixgate.dialects.sse import SSE_FRAMING
from prefixgate.dialects.validate import expect, load_resent
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation
from prefixgate.model_ids import ARN_MODEL, path_model
from prefixgate.usage import Usage

NAME = "bedrock_invoke"
VERSION = "bedrock-2023-05-31"


def parse_request(body: bytes | str | dict, *, model: str, stream: bool = False) -> Conversation:
    """An InvokeModel body as a Conversation; `model` and `stream` come from the path."""
    # Claude Code and other agents resend their conversation: the Anthropic parser's memo of recent bodies.
    data, resent = load_resent(body, "messages", anthropic.BODIES)
    for key in ("model", "stream"):
        if key in data:
            raise RequestError(f"{key}: not allowed in an InvokeModel body (the path names the model and whether "
                               "it streams)", field=key)
    if "anthropic_version" not in data:
        raise RequestError(f"anthropic_version: field required ({VERSION})", field="anthropic_version")
    expect(data["anthropic_version"], str, "anthropic_version")
    conv = anthropic.conversation({"model": model, **data}, resent)
    conv.params.pop("model", None)
    conv.field_order.remove("model")
    conv.dialect, conv.stream = NAME, stream
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
    """The Anthropic event inside a `chunk` frame; an exception frame becomes an Anthropic `error` event."""
    if message.kind != "event":
        detail = message.json().get("message") if message.payload else ""
        return {"type": "error", "error": {"type": message.name or message.kind, "message": detail or "no message"}}
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


class ChunkWriter(StreamWriter):
    """Anthropic's stream events for neutral deltas, each framed as a Bedrock `chunk`."""

    def __init__(self, model: str, include_usage: bool = True) -> None:
        super().__init__(model, include_usage)
        self._events = anthropic.EventWriter(model, include_usage)

    def write(self, deltas: list[Delta]) -> bytes:
        return b"".join(chunk(event) for event in _events(self._events.write(deltas)))

    def finish(self, usage: Usage | None) -> bytes:
        return b"".join(stream_frames(_events(self._events.finish(usage)), usage or Usage()))


def _events(sse: bytes) -> Iterator[dict]:
    """The Anthropic events of SSE-encoded `sse`."""
    buffer = bytearray()
    return (event for raw in SSE_FRAMING.split(buffer, sse) if (event := SSE_FRAMING.payload(raw)) is not None)


class BedrockInvoke(BedrockFormat):
    """InvokeModel with Claude: Anthropic's body and events, Bedrock's paths, framing, errors and signing."""

    name = NAME
    span_name = "POST /model/{modelId}/invoke"
    forward_headers = BedrockFormat.forward_headers
    finish_from, finish_to = anthropic.FINISH_FROM, anthropic.FINISH_TO
    natural_finishes = anthropic.NATURAL
    framing = eventstream.EventStreamFraming(lambda message: event_of(message))
    usage_marks = (b"chunk", b"exception")    # base64 payloads: every chunk is decoded

    operation = "invoke"
    mark_field = anthropic.AnthropicMessages.mark_field

    def automatic_ttl(self, conv: Conversation) -> str | None:
        return anthropic.automatic_ttl(conv)

    def tag_prompt(self, payload: dict, tag: str) -> None:
        if not tagging.first_tool(payload, tag):       # Anthropic's body
            tagging.system_blocks(payload, tag)

    def parse_path_body(self, body: bytes, op: Operation) -> Conversation:
        return parse_request(body, model=op.model, stream=op.stream)

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return parse_request(body, model=model or "")

    def encode_request(self, conv: Conversation) -> dict:
        return encode_request(conv)

    def usage_of(self, body: dict, conv: Conversation | None = None) -> Usage:
        return anthropic.usage_from_response(body)

    def has_usage(self, body: dict) -> bool:
        return bool(body.get("usage"))

    def stream_usage(self, conv: Conversation | None = None) -> anthropic.StreamUsage:
        return anthropic.StreamUsage()

    def build_response(self, model: str, text: str, usage: Usage, *, finish_reason: str | None = None,
                       id: str | None = None) -> dict:
        return anthropic.build_response(model, text, usage, finish_reason=finish_reason, id=id)

    def stream_error(self, event: dict) -> str | None:
        return anthropic.WIRE.stream_error(event)

    def ends_stream(self, event: dict) -> bool:
        return event.get("type") in ("message_stop", "error")

    def adopt(self, conv: Conversation, headers: Mapping[str, str]) -> Conversation | None:
        """An Anthropic Messages request as InvokeModel takes it: every block and marker as the caller sent it."""
        if conv.dialect != anthropic.NAME:
            return None
        params = {k: v for k, v in conv.params.items() if k not in ("model", "stream")}
        params.setdefault("anthropic_version", VERSION)
        betas = [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()]
        if betas and "anthropic_beta" not in params:
            params["anthropic_beta"] = betas      # Bedrock takes the beta header as a body field
        order = [k for k in conv.field_order if k not in ("model", "stream")]
        if "anthropic_version" not in order:
            order.insert(0, "anthropic_version")
        return replace(conv, dialect=NAME, params=params, field_order=order)

    def read_chat(self, body: dict) -> Chat:
        return anthropic.read_chat(body)

    def write_chat(self, chat: Chat, model: str) -> dict:
        body = anthropic.write_chat(chat, model)
        body.pop("model", None)
        body.pop("stream", None)
        return {"anthropic_version": VERSION, **body}

    def read_reply(self, body: dict) -> anthropic.Reply:
        return anthropic.read_reply(body)

    def write_reply(self, reply: anthropic.Reply, model: str) -> dict:
        return anthropic.write_reply(reply, model)

    def read_deltas(self, event: dict) -> list[Delta]:
        return anthropic.read_deltas(event)

    def stream_writer(self, model: str, include_usage: bool = True) -> StreamWriter:
        return ChunkWriter(model, include_usage)

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        # The SDKs quote the model id into the path (an ARN's slashes as %2F); the signature covers it.
        op = "invoke-with-response-stream" if stream else "invoke"
        return f"{base_url}/model/{quote(path_model(model, ARN_MODEL), safe='')}/{op}"


WIRE = BedrockInvoke()
