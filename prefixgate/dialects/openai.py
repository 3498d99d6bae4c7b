"""OpenAI Chat Completions (`POST /v1/chat/completions`) <-> IR, responses, streaming and usage.

Tools and structured-output schemas are injected before the messages, so they lead the prefix.
Caching is automatic; the planner steers it with `prompt_cache_key` and, on GPT-5.6+ models,
`prompt_cache_breakpoint` on content parts. `prompt_tokens` *includes* cached tokens.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from prefixgate.dialects.body import DROP, json_text, merge_native, rebuild_body, split_body
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import expect, load_body, require
from prefixgate.errors import RequestError, error_body
from prefixgate.ir import Block, BlockKind, Checkpoint, Conversation, Segment
from prefixgate.usage import Usage

PREFIX_FIELDS = {"tools", "functions", "response_format", "messages"}
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_KINDS: dict[str, BlockKind] = {
    "text": "text", "image_url": "image", "input_audio": "audio", "file": "file", "refusal": "text",
}
# GPT-5.6+ explicit breakpoints take their TTL from the request; the wire form has no TTL of its own.
BREAKPOINT = {"mode": "explicit"}


# ---- requests ---------------------------------------------------------------------------------

def parse_request(body: bytes | str | dict) -> Conversation:
    data = load_body(body)
    model = require(data, "model", str)
    messages = require(data, "messages", list)
    if not messages:
        raise RequestError("messages: must contain at least one message", field="messages")
    stream = expect(data.get("stream", False), (bool, type(None)), "stream") or False
    for key in ("max_tokens", "max_completion_tokens"):
        if data.get(key) is not None and expect(data[key], int, key) < 1:
            raise RequestError(f"{key}: must be >= 1", field=key)
    segments: list[Segment] = []
    for key in ("tools", "functions"):
        if key in data:
            items = expect(data[key], list, key)
            blocks = [Block("tool_def", _tool(t, f"{key}.{i}"), text=json_text(t)) for i, t in enumerate(items)]
            segments.append(Segment("tools", blocks, blocks_field=key, form="list"))
    if "response_format" in data:
        rf = expect(data["response_format"], dict, "response_format")
        segments.append(Segment("schema", [Block("schema", rf, text=json_text(rf))], blocks_field="response_format", form="object"))
    for i, msg in enumerate(messages):
        segments.append(_message_segment(msg, f"messages.{i}"))
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation("openai", model, segments, params=params, field_order=order, stream=stream)


def _message_segment(msg: Any, field: str) -> Segment:
    expect(msg, dict, field)
    role = require(msg, "role", str, f"{field}.role")
    if role not in ROLES:
        raise RequestError(f"{field}.role: must be one of {', '.join(ROLES)}, got {role!r}", field=f"{field}.role")
    content = msg.get("content")
    if "content" not in msg and role != "assistant":
        raise RequestError(f"{field}.content: field required", field=f"{field}.content")
    if isinstance(content, str):
        blocks, form = [Block("text", content, text=content)], "string"
    elif isinstance(content, list):
        blocks = [_part_block(p, f"{field}.content.{j}") for j, p in enumerate(content)]
        form = "list"
    elif content is None:
        if role != "assistant":
            raise RequestError(f"{field}.content: must not be null for role {role!r}", field=f"{field}.content")
        blocks, form = [], "null" if "content" in msg else "absent"
    else:
        raise RequestError(f"{field}.content: expected a string or an array of content parts", field=f"{field}.content")
    for j, call in enumerate(expect(msg.get("tool_calls") or [], list, f"{field}.tool_calls")):
        expect(call, dict, f"{field}.tool_calls.{j}")
        blocks.append(Block("tool_call", call, text=json_text(call.get("function", call))))
    seg = Segment(role, blocks, native=msg, blocks_field="content", form=form)
    if role in ("tool", "function"):
        for b in seg.blocks:
            b.kind = "tool_result" if b.kind == "text" else b.kind
    return seg


def _part_block(part: Any, field: str) -> Block:
    expect(part, dict, field)
    ptype = require(part, "type", str, f"{field}.type")
    kind = _KINDS.get(ptype, "other")
    text = expect(part.get(ptype, ""), str, f"{field}.{ptype}") if ptype in ("text", "refusal") else ""
    # Only an explicit breakpoint is one; any other value is passed through for the API to judge.
    checkpoint = Checkpoint("30m") if part.get("prompt_cache_breakpoint") == BREAKPOINT else None
    return Block(kind, part, text=text, checkpoint=checkpoint)


def encode_request(conv: Conversation) -> dict:
    encoded: dict[str, Any] = {"messages": []}
    for seg in conv.segments:
        if seg.role == "tools":
            encoded[seg.blocks_field or "tools"] = [b.native for b in seg.blocks]
        elif seg.role == "schema":
            encoded["response_format"] = seg.blocks[0].native
        else:
            encoded["messages"].append(_encode_message(seg))
    for key in ("tools", "functions", "response_format"):
        encoded.setdefault(key, DROP)
    return rebuild_body(conv, encoded)


def _encode_message(seg: Segment) -> dict:
    native = seg.native if seg.native is not None else {"role": seg.role}
    content_blocks = [b for b in seg.blocks if b.kind != "tool_call"]
    calls = [b.native for b in seg.blocks if b.kind == "tool_call"]
    changes: dict[str, Any] = {}
    only = content_blocks[0] if len(content_blocks) == 1 else None
    if seg.form == "string" and only is not None and only.checkpoint is None and only.kind in ("text", "tool_result"):
        changes["content"] = only.text
    elif seg.form in ("null", "absent") and not content_blocks:
        changes["content"] = None if seg.form == "null" else DROP
    else:
        changes["content"] = [_encode_part(b) for b in content_blocks]
    if calls or "tool_calls" in native:
        changes["tool_calls"] = calls
    return merge_native(native, changes)


def _encode_part(block: Block) -> dict:
    native = block.native if isinstance(block.native, dict) else {"type": "text", "text": block.native}
    changes: dict[str, Any] = {}
    if block.edited or not isinstance(block.native, dict):
        changes["text"] = block.text
    had = native.get("prompt_cache_breakpoint") == BREAKPOINT
    if had != (block.checkpoint is not None):
        changes["prompt_cache_breakpoint"] = dict(BREAKPOINT) if block.checkpoint is not None else DROP
    return merge_native(native, changes) if changes else native


# ---- usage ------------------------------------------------------------------------------------

def parse_usage(usage: dict, write_ttl: str = "30m") -> Usage:
    """`write_ttl`: the usage does not say how long written tokens live, so their price class comes
    from the request's `prompt_cache_options.ttl` (GPT-5.6+ bills a 12h write twice a 30m one)."""
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    prompt = usage.get("prompt_tokens") or 0
    return Usage(
        uncached_input=max(prompt - cached - written, 0),
        cache_read=cached,
        cache_writes={write_ttl: written} if written else {},
        output=usage.get("completion_tokens") or 0,
    )


def write_ttl(body_params: dict) -> str:
    """The TTL a request's cache writes are billed at: its `prompt_cache_options.ttl`, else 30m."""
    options = body_params.get("prompt_cache_options")
    ttl = options.get("ttl") if isinstance(options, dict) else None
    return ttl if isinstance(ttl, str) and ttl else "30m"


def usage_from_response(resp: dict, write_ttl: str = "30m") -> Usage:
    return parse_usage(resp.get("usage") or {}, write_ttl)


def usage_json(usage: Usage) -> dict:
    details: dict[str, int] = {"cached_tokens": usage.cache_read, "audio_tokens": 0}
    if usage.cache_write:
        details["cache_write_tokens"] = usage.cache_write
    return {
        "prompt_tokens": usage.input_total,
        "completion_tokens": usage.output,
        "total_tokens": usage.input_total + usage.output,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    }


class StreamUsage:
    """Usage of a streamed response: the one chunk with `usage` (sent before `[DONE]` when
    `stream_options.include_usage` is set); a broken stream may never deliver it."""

    def __init__(self, write_ttl: str = "30m") -> None:
        self._usage: Usage | None = None
        self.finish_reason: str | None = None
        self.write_ttl = write_ttl

    def feed(self, event: dict) -> None:
        if event.get("usage"):
            self._usage = parse_usage(event["usage"], self.write_ttl)
        for choice in event.get("choices") or []:
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

    @property
    def usage(self) -> Usage | None:
        return self._usage


# ---- responses --------------------------------------------------------------------------------

def build_response(
    model: str, text: str, usage: Usage, *, finish_reason: str | None = None, id: str | None = None
) -> dict:
    return {
        "id": id or new_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": None, "annotations": []},
            "logprobs": None,
            "finish_reason": finish_reason or "stop",
        }],
        "usage": usage_json(usage),
        "service_tier": "default",
        "system_fingerprint": None,
    }


def stream_events(
    model: str,
    chunks: Iterable[str],
    usage: Usage,
    *,
    finish_reason: str | None = None,
    id: str | None = None,
    include_usage: bool = True,
) -> Iterator[bytes]:
    """Chat completion chunks: role first, content deltas, the finish chunk, the usage chunk
    (`choices: []`, only with include_usage), then `[DONE]`."""
    head = {"id": id or new_id(), "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "service_tier": "default", "system_fingerprint": None}
    tail = {"usage": None} if include_usage else {}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return encode_sse(head | {"choices": [choice]} | tail)

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for text in chunks:
        if text:
            yield chunk({"content": text})
    yield chunk({}, finish_reason or "stop")
    if include_usage:
        yield encode_sse(head | {"choices": [], "usage": usage_json(usage)})
    yield encode_sse("[DONE]")


def error_event(err: RequestError) -> bytes:
    return encode_sse(error_body(err, "openai"))


def new_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def _tool(tool: object, field: str) -> dict:
    """A tool definition: an object, and its `function` (when given) an object too, as the API requires."""
    expect(tool, dict, field)
    if "function" in tool:
        expect(tool["function"], dict, f"{field}.function")
    return tool
