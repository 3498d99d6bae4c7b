"""Anthropic Messages API (`POST /v1/messages`) <-> IR, responses, streaming and usage.

Prefix order is tools -> system -> messages. Checkpoints are `cache_control` on content blocks;
`usage.input_tokens` counts only the uncached tokens after the last breakpoint.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from prefixgate.dialects.body import DROP, json_text, merge_native, rebuild_body, split_body
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import expect, load_body, require
from prefixgate.errors import RequestError, error_body
from prefixgate.ir import Block, BlockKind, Checkpoint, Conversation, Segment, without_markers
from prefixgate.usage import Usage

PREFIX_FIELDS = {"tools", "system", "messages"}
# A "system" message inside `messages` adds instructions without changing the cached prefix before it
# (Opus 4.8+, provider-caching.md A2; Claude Code 2.1 sends one). Its segment keeps its native message,
# which is how the encoder tells it from the top-level `system`.
ROLES = ("user", "assistant", "system")
_KINDS: dict[str, BlockKind] = {
    "text": "text", "image": "image", "document": "document", "search_result": "document",
    "tool_use": "tool_call", "server_tool_use": "tool_call", "mcp_tool_use": "tool_call",
    "tool_result": "tool_result", "web_search_tool_result": "tool_result", "mcp_tool_result": "tool_result",
    "thinking": "thinking", "redacted_thinking": "thinking", "container_upload": "file",
}
STOP_REASONS = ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal")


# ---- requests ---------------------------------------------------------------------------------

def parse_request(body: bytes | str | dict, *, count_tokens: bool = False) -> Conversation:
    """A Messages request as a Conversation; `count_tokens` parses a `/v1/messages/count_tokens` body."""
    data = load_body(body)
    model = require(data, "model", str)
    messages = require(data, "messages", list)
    if not count_tokens:
        max_tokens = require(data, "max_tokens", int)
        if max_tokens < 0:
            raise RequestError("max_tokens: must be >= 0", field="max_tokens")
    stream = expect(data.get("stream", False), bool, "stream")
    segments: list[Segment] = []
    if "tools" in data:
        tools = expect(data["tools"], list, "tools")
        blocks = [_tool_block(t, f"tools.{i}") for i, t in enumerate(tools)]
        segments.append(Segment("tools", blocks, form="list"))
    if "system" in data:
        segments.append(_content_segment("system", data["system"], "system", native=None))
    for i, msg in enumerate(messages):
        field = f"messages.{i}"
        expect(msg, dict, field)
        role = require(msg, "role", str, f"{field}.role")
        if role not in ROLES:
            raise RequestError(f"{field}.role: must be one of {', '.join(ROLES)}, got {role!r}", field=f"{field}.role")
        if "content" not in msg:
            raise RequestError(f"{field}.content: field required", field=f"{field}.content")
        segments.append(_content_segment(role, msg["content"], f"{field}.content", native=msg))
    if not messages:
        raise RequestError("messages: at least one message is required", field="messages")
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation("anthropic", model, segments, params=params, field_order=order, stream=stream)


def _tool_block(tool: Any, field: str) -> Block:
    expect(tool, dict, field)
    return Block("tool_def", tool, text=json_text(without_markers(tool)), checkpoint=_checkpoint(tool, field))


def _content_segment(role: Any, content: Any, field: str, native: dict | None) -> Segment:
    if isinstance(content, str):
        return Segment(role, [Block("text", content, text=content)], native=native, blocks_field="content", form="string")
    blocks = [_content_block(b, f"{field}.{j}") for j, b in enumerate(expect(content, (str, list), field))]
    return Segment(role, blocks, native=native, blocks_field="content", form="list")


def _content_block(block: Any, field: str) -> Block:
    expect(block, dict, field)
    btype = require(block, "type", str, f"{field}.type")
    kind = _KINDS.get(btype, "other")
    return Block(kind, block, text=_block_text(block, kind, field), checkpoint=_checkpoint(block, field))


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def _block_text(block: dict, kind: BlockKind, field: str) -> str:
    if kind == "text":
        return expect(block.get("text", ""), str, f"{field}.text")
    if kind == "thinking":
        return _as_text(block.get("thinking", "") or block.get("data", ""))
    if kind == "tool_call":
        return json_text({"name": block.get("name"), "input": block.get("input")})
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return "\n".join(_as_text(c.get("text", "")) for c in content if isinstance(c, dict))
        return content if isinstance(content, str) else json_text(content)
    if kind == "document":
        source = block.get("source") or {}
        if isinstance(source, dict) and source.get("type") == "text":
            return _as_text(source.get("data", ""))
        return json_text(block.get("content", "")) if "content" in block else ""
    return ""


def _checkpoint(block: dict, field: str) -> Checkpoint | None:
    cc = block.get("cache_control")
    if cc is None:
        return None
    expect(cc, dict, f"{field}.cache_control")
    if cc.get("type") != "ephemeral":
        raise RequestError(f"{field}.cache_control.type: must be 'ephemeral'", field=f"{field}.cache_control.type")
    ttl = cc.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        raise RequestError(f"{field}.cache_control.ttl: must be '5m' or '1h', got {ttl!r}", field=f"{field}.cache_control.ttl")
    return Checkpoint(ttl)


def encode_request(conv: Conversation) -> dict:
    """The native body; unannotated and unedited, exactly the body that was parsed."""
    encoded: dict[str, Any] = {"messages": []}
    for seg in conv.segments:
        if seg.role == "tools":
            encoded["tools"] = [_encode_block(b) for b in seg.blocks]
        elif seg.role == "system" and seg.native is None:
            encoded["system"] = _encode_content(seg)
        else:
            content = _encode_content(seg)
            native = seg.native if seg.native is not None else {"role": seg.role}
            encoded["messages"].append(merge_native(native, {"content": content}))
    for key in ("tools", "system"):
        encoded.setdefault(key, DROP)
    return rebuild_body(conv, encoded)


def _encode_content(seg: Segment) -> Any:
    only = seg.blocks[0] if len(seg.blocks) == 1 else None
    if seg.form == "string" and only is not None and only.kind == "text" and only.checkpoint is None:
        return only.text
    return [_encode_block(b) for b in seg.blocks]


def _encode_block(block: Block) -> dict:
    native = block.native if isinstance(block.native, dict) else {"type": "text", "text": block.native}
    changes: dict[str, Any] = {}
    if block.edited or not isinstance(block.native, dict):
        changes["text"] = block.text
    if _checkpoint(native, "block") != block.checkpoint:
        # Re-append so a moved checkpoint lands where the SDKs put it: last in the block.
        native = {k: v for k, v in native.items() if k != "cache_control"}
        if block.checkpoint is not None:
            changes["cache_control"] = cache_control(block.checkpoint)
    return merge_native(native, changes) if changes else native


def cache_control(cp: Checkpoint) -> dict:
    return {"type": "ephemeral"} if cp.ttl == "5m" else {"type": "ephemeral", "ttl": cp.ttl}


# ---- usage ------------------------------------------------------------------------------------

def parse_usage(usage: dict) -> Usage:
    """A native `usage` object (response, `message_start` or cumulative `message_delta`)."""
    split = usage.get("cache_creation") or {}
    written = usage.get("cache_creation_input_tokens") or 0
    writes = {
        "5m": split.get("ephemeral_5m_input_tokens") or 0,
        "1h": split.get("ephemeral_1h_input_tokens") or 0,
    }
    if sum(writes.values()) != written:
        # Older responses carry only the total; Anthropic's default TTL is 5 minutes.
        writes = {"5m": written - writes["1h"], "1h": writes["1h"]}
    return Usage(
        uncached_input=usage.get("input_tokens") or 0,
        cache_read=usage.get("cache_read_input_tokens") or 0,
        cache_writes={ttl: n for ttl, n in writes.items() if n},
        output=usage.get("output_tokens") or 0,
    )


def usage_from_response(resp: dict) -> Usage:
    return parse_usage(resp.get("usage") or {})


def usage_json(usage: Usage) -> dict:
    return {
        "input_tokens": usage.uncached_input,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_writes.get("5m", 0),
            "ephemeral_1h_input_tokens": usage.cache_writes.get("1h", 0),
        },
        "output_tokens": usage.output,
        "service_tier": "standard",
    }


class StreamUsage:
    """Usage of a streamed response. `message_delta.usage` is cumulative: the last one wins, never summed."""

    def __init__(self) -> None:
        self._fields: dict[str, Any] = {}
        self.stop_reason: str | None = None

    def feed(self, event: dict) -> None:
        etype = event.get("type")
        if etype == "message_start":
            self._fields.update((event.get("message") or {}).get("usage") or {})
        elif etype == "message_delta":
            self._fields.update(event.get("usage") or {})
            self.stop_reason = (event.get("delta") or {}).get("stop_reason", self.stop_reason)

    @property
    def usage(self) -> Usage | None:
        return parse_usage(self._fields) if self._fields else None


# ---- responses --------------------------------------------------------------------------------

def build_response(
    model: str, text: str, usage: Usage, *, finish_reason: str | None = None, id: str | None = None
) -> dict:
    return {
        "id": id or new_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}] if text else [],
        "stop_reason": finish_reason or "end_turn",
        "stop_sequence": None,
        "usage": usage_json(usage),
    }


def stream_events(
    model: str, chunks: Iterable[str], usage: Usage, *, finish_reason: str | None = None, id: str | None = None
) -> Iterator[bytes]:
    """The event sequence Anthropic streams: message_start, ping, one text block, message_delta, message_stop."""
    start_usage = usage_json(Usage(usage.uncached_input, usage.cache_read, usage.cache_writes, min(usage.output, 1)))
    message = build_response(model, "", Usage(), id=id) | {"stop_reason": None, "usage": start_usage}
    yield _event({"type": "message_start", "message": message})
    yield _event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    yield _event({"type": "ping"})
    for chunk in chunks:
        if chunk:
            yield _event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": chunk}})
    yield _event({"type": "content_block_stop", "index": 0})
    final = usage_json(usage)
    delta_usage = {k: final[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")}
    yield _event({
        "type": "message_delta",
        "delta": {"stop_reason": finish_reason or "end_turn", "stop_sequence": None},
        "usage": delta_usage,
    })
    yield _event({"type": "message_stop"})


def error_event(err: RequestError) -> bytes:
    """A mid-stream error; Anthropic sends no `message_stop` after it."""
    return encode_sse(error_body(err, "anthropic"), "error")


def _event(data: dict) -> bytes:
    return encode_sse(data, data["type"])


def new_id() -> str:
    return "msg_" + uuid.uuid4().hex[:24]
