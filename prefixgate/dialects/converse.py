"""Amazon Bedrock Converse / ConverseStream <-> the IR, usage, responses and stream events.

Converse names the model in the URL (`/model/{modelId}/converse`), writes content blocks as one-key unions
(`{"text": ...}`, `{"toolUse": {...}}`), and marks cache prefixes with separate `{"cachePoint": {...}}` blocks
after the block they close, in `toolConfig.tools`, `system` and `messages[].content`, processed in that
order. In the IR a cache point is the checkpoint of the block before it, as Anthropic's `cache_control` is;
encoding writes it back as a cache point after that block (5-minute points without `ttl`, Bedrock's default).

Usage (`usage` in a response, `metadata.usage` in a stream) counts `inputTokens` without the cached ones, as
Anthropic does, with `cacheDetails` splitting writes by TTL.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from prefixgate.dialects import eventstream
from prefixgate.dialects.body import DROP, json_text, merge_native, rebuild_body, split_body
from prefixgate.dialects.validate import expect, load_body, require
from prefixgate.errors import RequestError
from prefixgate.ir import Block, BlockKind, Checkpoint, Conversation, Segment
from prefixgate.usage import Usage

PREFIX_FIELDS = {"toolConfig", "system", "messages"}
ROLES = ("user", "assistant")
# The ContentBlock union (and SystemContentBlock's members) the API documents; anything else is a 400.
_KINDS: dict[str, BlockKind] = {
    "text": "text", "image": "image", "document": "document", "video": "file", "audio": "audio",
    "toolUse": "tool_call", "toolResult": "tool_result", "reasoningContent": "thinking",
    "guardContent": "text", "citationsContent": "text", "searchResult": "document",
    "toolAddition": "other", "toolRemoval": "other",
}
_TOOL_KINDS = ("toolSpec", "systemTool")
STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "stop_sequence", "guardrail_intervened", "content_filtered",
                "malformed_model_output", "malformed_tool_use", "model_context_window_exceeded")
TTLS = ("5m", "1h")


# ---- requests ---------------------------------------------------------------------------------

def parse_request(body: bytes | str | dict, *, model: str, stream: bool = False) -> Conversation:
    """A Converse body as a Conversation; `model` and `stream` come from the path."""
    data = load_body(body)
    messages = require(data, "messages", list)
    if not messages:
        raise RequestError("messages: at least one message is required", field="messages")
    config = data.get("inferenceConfig")
    if config is not None:
        expect(config, dict, "inferenceConfig")
        if "maxTokens" in config and expect(config["maxTokens"], int, "inferenceConfig.maxTokens") < 1:
            raise RequestError("inferenceConfig.maxTokens: must be >= 1", field="inferenceConfig.maxTokens")
    segments: list[Segment] = []
    if "toolConfig" in data:
        tool_config = expect(data["toolConfig"], dict, "toolConfig")
        tools = require(tool_config, "tools", list, "toolConfig.tools")
        blocks = _blocks(tools, "toolConfig.tools", _tool_kind)
        segments.append(Segment("tools", blocks, native=tool_config, blocks_field="tools", form="list"))
    if "system" in data:
        segments.append(Segment("system", _blocks(expect(data["system"], list, "system"), "system", _content_kind)))
    for i, msg in enumerate(messages):
        field = f"messages.{i}"
        expect(msg, dict, field)
        role = require(msg, "role", str, f"{field}.role")
        if role not in ROLES:
            raise RequestError(f"{field}.role: must be one of {', '.join(ROLES)}, got {role!r}", field=f"{field}.role")
        content = require(msg, "content", list, f"{field}.content")
        segments.append(Segment(role, _blocks(content, f"{field}.content", _content_kind), native=msg,
                                blocks_field="content", form="list"))
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation("converse", model, segments, params=params, field_order=order, stream=stream)


def _blocks(items: list, field: str, kind_of: Any) -> list[Block]:
    """Content blocks, each cache point folded into the block before it as its checkpoint."""
    blocks: list[Block] = []
    for j, item in enumerate(items):
        where = f"{field}.{j}"
        expect(item, dict, where)
        if "cachePoint" in item:
            if not blocks:
                raise RequestError(f"{where}.cachePoint: a cache point must follow a content block", field=where)
            if blocks[-1].checkpoint is not None:
                raise RequestError(f"{where}.cachePoint: two cache points in a row", field=where)
            blocks[-1].checkpoint = _checkpoint(item["cachePoint"], f"{where}.cachePoint")
            continue
        kind, value = kind_of(item, where)
        blocks.append(Block(kind, item, text=_text(kind, value, where)))
    return blocks


def _member(item: dict, where: str, allowed: Iterable[str]) -> str:
    keys = [k for k in item if k in allowed]
    if len(keys) != 1 or len(item) != 1:
        known = ", ".join(sorted(allowed))
        raise RequestError(f"{where}: a content block has exactly one of {known}; got {', '.join(item) or 'none'}",
                           field=where)
    return keys[0]


def _content_kind(item: dict, where: str) -> tuple[BlockKind, Any]:
    key = _member(item, where, _KINDS)
    return _KINDS[key], item[key]


def _tool_kind(item: dict, where: str) -> tuple[BlockKind, Any]:
    key = _member(item, where, _TOOL_KINDS)
    return "tool_def", item[key]


def _text(kind: BlockKind, value: Any, where: str) -> str:
    if kind == "text":
        if isinstance(value, dict):   # guardContent / citationsContent wrap their text
            inner = value.get("text")
            return inner.get("text", "") if isinstance(inner, dict) else json_text(value)
        return expect(value, str, where + ".text")
    if kind == "tool_result":
        parts = expect(value, dict, where + ".toolResult").get("content") or []
        return "\n".join(p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str) else json_text(p)
                         for p in parts)
    if kind == "thinking":
        text = (value.get("reasoningText") or {}).get("text", "") if isinstance(value, dict) else ""
        return text if isinstance(text, str) else ""
    if kind in ("tool_def", "tool_call", "document"):
        return json_text(value)
    return ""


def _checkpoint(point: Any, field: str) -> Checkpoint:
    expect(point, dict, field)
    if point.get("type") != "default":
        raise RequestError(f"{field}.type: must be 'default'", field=f"{field}.type")
    ttl = point.get("ttl", "5m")
    if ttl not in TTLS:
        raise RequestError(f"{field}.ttl: must be '5m' or '1h', got {ttl!r}", field=f"{field}.ttl")
    return Checkpoint(ttl)


def cache_point(cp: Checkpoint) -> dict:
    return {"cachePoint": {"type": "default"} if cp.ttl == "5m" else {"type": "default", "ttl": cp.ttl}}


def encode_request(conv: Conversation) -> dict:
    """The native body (without the model, which goes in the path)."""
    encoded: dict[str, Any] = {"messages": []}
    for seg in conv.segments:
        if seg.role == "tools":
            encoded["toolConfig"] = merge_native(seg.native or {}, {"tools": _encode_blocks(seg)})
        elif seg.role == "system":
            encoded["system"] = _encode_blocks(seg)
        else:
            native = seg.native if seg.native is not None else {"role": seg.role}
            encoded["messages"].append(merge_native(native, {"content": _encode_blocks(seg)}))
    for key in ("toolConfig", "system"):
        encoded.setdefault(key, DROP)
    return rebuild_body(conv, encoded)


def _encode_blocks(seg: Segment) -> list[dict]:
    out: list[dict] = []
    for block in seg.blocks:
        native = block.native if isinstance(block.native, dict) else {"text": block.native}
        out.append({"text": block.text} if block.edited and "text" in native else native)
        if block.checkpoint is not None:
            out.append(cache_point(block.checkpoint))
    return out


# ---- usage ------------------------------------------------------------------------------------

def parse_usage(usage: dict) -> Usage:
    """A Converse `usage` (TokenUsage): `inputTokens` excludes cache reads and writes."""
    written = usage.get("cacheWriteInputTokens") or 0
    writes: dict[str, int] = {}
    for detail in usage.get("cacheDetails") or []:
        if isinstance(detail, dict) and detail.get("inputTokens"):
            ttl = str(detail.get("ttl", "5m"))
            writes[ttl] = writes.get(ttl, 0) + int(detail["inputTokens"])
    if sum(writes.values()) != written:
        # No split reported: Bedrock's default TTL is 5 minutes.
        writes = {"5m": written - writes.get("1h", 0), "1h": writes.get("1h", 0)}
    return Usage(uncached_input=usage.get("inputTokens") or 0, cache_read=usage.get("cacheReadInputTokens") or 0,
                 cache_writes={ttl: n for ttl, n in writes.items() if n}, output=usage.get("outputTokens") or 0)


def usage_json(usage: Usage) -> dict:
    out = {"inputTokens": usage.uncached_input, "outputTokens": usage.output,
           "totalTokens": usage.input_total + usage.output, "cacheReadInputTokens": usage.cache_read,
           "cacheWriteInputTokens": usage.cache_write}
    details = [{"ttl": ttl, "inputTokens": usage.cache_writes[ttl]} for ttl in ("1h", "5m") if usage.cache_writes.get(ttl)]
    if details:
        out["cacheDetails"] = details
    return out


class StreamUsage:
    """Usage of a ConverseStream: carried by its `metadata` event; the stop reason by `messageStop`."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.stop_reason: str | None = None

    def feed(self, name: str, event: dict) -> None:
        if name == "metadata" and isinstance(event.get("usage"), dict):
            self.usage = parse_usage(event["usage"])
        elif name == "messageStop":
            self.stop_reason = event.get("stopReason", self.stop_reason)


# ---- responses --------------------------------------------------------------------------------

def build_response(text: str, usage: Usage, *, stop_reason: str = "end_turn", latency_ms: int = 0) -> dict:
    return {"output": {"message": {"role": "assistant", "content": [{"text": text}] if text else []}},
            "stopReason": stop_reason, "usage": usage_json(usage), "metrics": {"latencyMs": latency_ms}}


def stream_events(chunks: Iterable[str], usage: Usage, *, stop_reason: str = "end_turn",
                  started: float | None = None) -> Iterator[bytes]:
    """ConverseStream's frames: messageStart, text deltas, contentBlockStop, messageStop, metadata."""
    yield eventstream.event("messageStart", {"role": "assistant"})
    for chunk in chunks:
        if chunk:
            yield eventstream.event("contentBlockDelta", {"delta": {"text": chunk}, "contentBlockIndex": 0})
    yield eventstream.event("contentBlockStop", {"contentBlockIndex": 0})
    yield eventstream.event("messageStop", {"stopReason": stop_reason})
    latency = int((time.monotonic() - started) * 1000) if started is not None else 0
    yield eventstream.event("metadata", {"usage": usage_json(usage), "metrics": {"latencyMs": latency}})
