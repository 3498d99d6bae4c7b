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
from urllib.parse import quote

from prefixgate.compact_json import compact
from prefixgate.dialects import eventstream
from prefixgate.dialects.bedrock import BedrockFormat, Operation
from prefixgate.dialects.body import DROP, merge_native, rebuild_body, split_body
from prefixgate.dialects.neutral import (
    Chat,
    Delta,
    Part,
    Reply,
    StreamWriter,
    Tool,
    ToolCall,
    Turn,
    non_empty_parts,
    note_dropped,
    note_tool_options,
    put,
    refuse,
)
from prefixgate.dialects.output_limit import within_claude_limit
from prefixgate.dialects.sampling import put_sampling
from prefixgate.dialects.validate import expect, load_body, optional, require
from prefixgate.errors import RequestError
from prefixgate.ir import Block, BlockKind, Checkpoint, Conversation, Segment
from prefixgate.model_ids import ARN_MODEL, path_model
from prefixgate.usage import Usage, checked_usage

NAME = "bedrock_converse"
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
    return Conversation(NAME, model, segments, params=params, field_order=order, stream=stream)


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
        blocks.append(Block(kind, item, text=_text(kind, value, where, next(iter(item)))))
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


def _text(kind: BlockKind, value: Any, where: str, key: str = "text") -> str:
    if kind == "text":
        if isinstance(value, dict):   # guardContent / citationsContent wrap their text
            inner = value.get("text")
            if not isinstance(inner, dict):
                return compact(value)
            return expect(inner.get("text", ""), str, f"{where}.{key}.text.text")
        return expect(value, str, where + ".text")
    if kind == "tool_result":
        parts = expect(expect(value, dict, where + ".toolResult").get("content") or [], list,
                       where + ".toolResult.content")
        return "\n".join(p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str) else compact(p)
                         for p in parts)
    if kind == "thinking":
        text = (value.get("reasoningText") or {}).get("text", "") if isinstance(value, dict) else ""
        return text if isinstance(text, str) else ""
    if kind in ("tool_def", "tool_call", "document"):
        return compact(value)
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

@checked_usage()
def parse_usage(usage: dict) -> Usage:
    """A Converse `usage` (TokenUsage): `inputTokens` excludes cache reads and writes."""
    writes: dict[str, int] = {}
    for detail in usage.get("cacheDetails") or []:
        if isinstance(detail, dict) and detail.get("inputTokens"):
            ttl = str(detail.get("ttl", "5m"))
            writes[ttl] = writes.get(ttl, 0) + int(detail["inputTokens"])
    # A split without the total (null or absent) is the total: never a negative 5m remainder.
    written = usage.get("cacheWriteInputTokens")
    written = sum(writes.values()) if written is None else written
    if sum(writes.values()) != written:
        # No split reported: Bedrock's default TTL is 5 minutes.
        writes = {"5m": max(written - writes.get("1h", 0), 0), "1h": writes.get("1h", 0)}
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
    """Usage of a ConverseStream: carried by its `metadata` event; the stop reason by `messageStop`.
    Events are `{type: body}` (see `event_of`)."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.stop_reason: str | None = None

    def feed(self, event: dict) -> None:
        metadata = event.get("metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("usage"), dict):
            self.usage = parse_usage(metadata["usage"])
        elif isinstance(event.get("messageStop"), dict):
            self.stop_reason = event["messageStop"].get("stopReason", self.stop_reason)


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


# ---- translation through the neutral forms ------------------------------------------------------

# Shortest TTL Bedrock offers that is at least as long as the one asked for.
_TTL_AT_LEAST = {"5m": "5m", "30m": "1h", "1h": "1h", "24h": "1h"}
FINISH_FROM = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
               "guardrail_intervened": "content_filter", "content_filtered": "content_filter",
               # A failed answer is not a whole one: content_filter, as for Gemini's MALFORMED_FUNCTION_CALL.
               "malformed_model_output": "content_filter", "malformed_tool_use": "content_filter",
               "model_context_window_exceeded": "length"}
FINISH_TO = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "content_filtered"}


def read_chat(body: dict) -> Chat:
    chat = Chat([])
    system = [b for b in body.get("system") or [] if isinstance(b, dict)]
    if system:
        chat.turns.append(Turn("system", _parts(system, "system", chat)))
    for msg in body.get("messages") or []:
        parts = _parts(msg.get("content") or [], msg.get("role", "user"), chat)
        results = [p for p in parts if p.kind == "tool_result"]
        if results:
            chat.turns.append(Turn("tool", results))
        rest = [p for p in parts if p.kind != "tool_result"]
        if rest or not results:
            chat.turns.append(Turn(msg.get("role", "user"), rest))
    for item in (body.get("toolConfig") or {}).get("tools") or []:
        if "cachePoint" in item:
            if chat.tools:
                chat.tools[-1].checkpoint = Checkpoint(item["cachePoint"].get("ttl", "5m"))
            continue
        spec = item.get("toolSpec")
        if spec is None:
            raise refuse(f"tool {next(iter(item), '')!r}", NAME)
        expect(spec, dict, "toolConfig.tools.toolSpec")
        schema = expect(spec.get("inputSchema") or {}, dict, "toolConfig.tools.toolSpec.inputSchema")
        chat.tools.append(Tool(spec.get("name", ""), spec.get("description", ""),
                               schema.get("json") or {"type": "object", "properties": {}},
                               strict=spec.get("strict") is True))
    config = body.get("inferenceConfig") or {}
    chat.max_tokens = config.get("maxTokens")
    chat.temperature = optional(config, "temperature", (int, float), "inferenceConfig.temperature")
    chat.top_p = optional(config, "topP", (int, float), "inferenceConfig.topP")
    chat.stop = list(expect(config.get("stopSequences") or [], list, "inferenceConfig.stopSequences"))
    choice = (body.get("toolConfig") or {}).get("toolChoice") or {}
    chat.tool_choice = (expect(choice["tool"], dict, "toolConfig.toolChoice.tool").get("name") if "tool" in choice
                        else next(iter(choice), None))
    note_dropped(chat, body, {"messages", "system", "toolConfig", "inferenceConfig"})
    return chat


def _parts(blocks: list, role: str, chat: Chat) -> list[Part]:
    parts: list[Part] = []
    for b in blocks:
        if "cachePoint" in b:
            if parts:
                parts[-1].checkpoint = Checkpoint(b["cachePoint"].get("ttl", "5m"))
        elif "text" in b:
            parts.append(Part("text", b["text"]))
        elif "image" in b:
            image = expect(b["image"], dict, "messages.content.image")
            source = expect(image.get("source") or {}, dict, "messages.content.image.source")
            parts.append(Part("image", mime=f"image/{image.get('format', 'png')}", data=source.get("bytes", "")))
        elif "toolUse" in b:
            use = expect(b["toolUse"], dict, "messages.content.toolUse")
            parts.append(Part("tool_call", call_id=use.get("toolUseId", ""), name=use.get("name", ""),
                              args=use.get("input") or {}))
        elif "toolResult" in b:
            result = b["toolResult"]
            text = "\n".join(c["text"] if "text" in c else compact(c.get("json")) for c in result.get("content") or []
                             if isinstance(c, dict))
            parts.append(Part("tool_result", text, call_id=result.get("toolUseId", ""),
                              is_error=result.get("status") == "error"))
        elif "reasoningContent" in b:
            chat.notes.append("dropped a reasoning block (only the model that wrote it reads it back)")
        else:
            raise refuse(f"content block {next(iter(b), '')!r}", NAME)
    return parts


def _block(part: Part) -> dict:
    if part.kind == "text":
        return {"text": part.text}
    if part.kind == "image":
        if not part.data:
            raise refuse("an image by URL (Converse takes image bytes only)", NAME)
        return {"image": {"format": part.mime.removeprefix("image/") or "png", "source": {"bytes": part.data}}}
    if part.kind == "tool_call":
        return {"toolUse": {"toolUseId": part.call_id, "name": part.name, "input": part.args or {}}}
    return {"toolResult": {"toolUseId": part.call_id, "content": [{"text": part.text}],
                           **({"status": "error"} if part.is_error else {})}}


def _with_point(out: list[dict], cp: Checkpoint | None) -> None:
    if cp is not None:
        out.append(cache_point(Checkpoint(_TTL_AT_LEAST.get(cp.ttl, "1h"))))


def write_chat(chat: Chat, model: str) -> dict:
    system: list[dict] = []
    messages: list[dict] = []
    for turn in chat.turns:
        # "The text field in the ContentBlock object at messages.0.content.0 is blank."; an empty turn is refused too.
        parts = non_empty_parts(chat, turn, "Converse")
        if turn.role == "system" and not messages:
            for p in parts:
                system.append({"text": p.text})
                _with_point(system, p.checkpoint)
            continue
        if not parts:
            continue
        role = "assistant" if turn.role == "assistant" else "user"
        if turn.role == "system":
            chat.notes.append("a system message after the first turn became user text")
        blocks: list[dict] = []
        for p in parts:
            blocks.append(_block(p))
            _with_point(blocks, p.checkpoint)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)      # Converse wants roles to alternate
        else:
            messages.append({"role": role, "content": blocks})
    if chat.auto_cache is not None and messages and "cachePoint" not in messages[-1]["content"][-1]:
        _with_point(messages[-1]["content"], chat.auto_cache)   # Converse has no automatic caching
    if chat.cache_key:
        chat.notes.append("dropped the cache key (Bedrock has none)")
    out: dict[str, Any] = {"messages": messages}
    if system:
        out["system"] = system
    note_tool_options(chat, "Converse", takes_strict=True)     # toolSpec.strict: Bedrock's structured tool use
    if chat.tools:
        tools: list[dict] = []
        for t in chat.tools:
            spec = {"name": t.name, "description": t.description, "inputSchema": {"json": t.schema}}
            tools.append({"toolSpec": spec | ({"strict": True} if t.strict else {})})
            _with_point(tools, t.checkpoint)
        config: dict[str, Any] = {"tools": tools}
        if chat.tool_choice in ("auto", "any"):
            config["toolChoice"] = {chat.tool_choice: {}}
        elif chat.tool_choice == "none":    # Converse has no "none": the model would be free to call the tools
            raise RequestError("cannot translate tool_choice none for this route's target (Converse cannot forbid "
                               "tool calls)", field="tool_choice")
        elif chat.tool_choice:
            config["toolChoice"] = {"tool": {"name": chat.tool_choice}}
        out["toolConfig"] = config
    inference: dict[str, Any] = {}
    put(inference, maxTokens=within_claude_limit(chat, model), stopSequences=chat.stop or None)
    put_sampling(inference, chat, model, "temperature", "topP")
    if inference:
        out["inferenceConfig"] = inference
    return out


def read_reply(body: dict) -> Reply:
    blocks = ((body.get("output") or {}).get("message") or {}).get("content") or []
    text = "".join(b["text"] for b in blocks if isinstance(b.get("text"), str))
    calls = [ToolCall(b["toolUse"].get("toolUseId", ""), b["toolUse"].get("name", ""), b["toolUse"].get("input") or {})
             for b in blocks if "toolUse" in b]
    return Reply(text, parse_usage(body.get("usage") or {}), FINISH_FROM.get(body.get("stopReason"), "stop"), calls,
                 native_finish=body.get("stopReason"))


def write_reply(reply: Reply, model: str) -> dict:
    out = build_response(reply.text, reply.usage, stop_reason=FINISH_TO[reply.finish])
    out["output"]["message"]["content"] += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.args}}
                                            for c in reply.tool_calls]
    return out


def read_deltas(event: dict) -> list[Delta]:
    if "contentBlockStart" in event:
        start = event["contentBlockStart"]
        use = (start.get("start") or {}).get("toolUse")
        if use:
            return [("call", start.get("contentBlockIndex", 0), use.get("toolUseId", ""), use.get("name", ""))]
    if "contentBlockDelta" in event:
        body = event["contentBlockDelta"]
        delta = body.get("delta") or {}
        if isinstance(delta.get("text"), str):
            return [("text", delta["text"])]
        if "toolUse" in delta:
            return [("args", body.get("contentBlockIndex", 0), delta["toolUse"].get("input", ""))]
    if "messageStop" in event:
        reason = event["messageStop"].get("stopReason")
        return [("finish", FINISH_FROM.get(reason, "stop"), reason)]
    return []


class FrameWriter(StreamWriter):
    """ConverseStream frames for neutral deltas: messageStart, a block per text run or tool call,
    messageStop, then metadata with the usage."""

    def __init__(self, model: str, include_usage: bool = True) -> None:
        super().__init__(model, include_usage)
        self._open: str | None = None
        self._index = -1
        self._started = time.monotonic()

    def _start(self) -> bytes:
        return eventstream.event("messageStart", {"role": "assistant"})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return eventstream.event("contentBlockStop", {"contentBlockIndex": self._index})

    def _delta(self, d: Delta) -> bytes:
        if d[0] == "text":
            head = b""
            if self._open != "text":
                head, self._open = self._close(), "text"
                self._index += 1
            return head + eventstream.event("contentBlockDelta", {"delta": {"text": d[1]}, "contentBlockIndex": self._index})
        if d[0] == "call":
            head = self._close()
            self._open, self._index = "tool", self._index + 1
            return head + eventstream.event("contentBlockStart", {
                "start": {"toolUse": {"toolUseId": d[2], "name": d[3]}}, "contentBlockIndex": self._index})
        return eventstream.event("contentBlockDelta", {"delta": {"toolUse": {"input": d[2]}},
                                                       "contentBlockIndex": self._index})

    def _finish(self, usage: Usage) -> bytes:
        latency = int((time.monotonic() - self._started) * 1000)
        return (self._close() + eventstream.event("messageStop", {"stopReason": FINISH_TO[self.finish_reason]})
                + eventstream.event("metadata", {"usage": usage_json(usage), "metrics": {"latencyMs": latency}}))


def event_of(message: eventstream.Message) -> dict:
    """A ConverseStream frame as `{event type: body}` (the type is in the frame's headers, not its JSON)."""
    if message.kind != "event":
        detail = message.json().get("message") if message.payload else ""
        return {"error": {"type": message.name or message.kind, "message": detail or "no message"}}
    return {message.name: message.json()}


class BedrockConverse(BedrockFormat):
    """Converse / ConverseStream: Bedrock's own message format, cache points as blocks."""

    name = NAME
    span_name = "POST /model/{modelId}/converse"
    mark_field = "cachePoint"       # a block of its own, the checkpoint of the block before it
    finish_from, finish_to = FINISH_FROM, FINISH_TO
    natural_finishes = ("end_turn", "stop_sequence", "tool_use")
    framing = eventstream.EventStreamFraming(event_of)
    usage_marks = (b"metadata", b"exception")

    operation = "converse"

    def tag_prompt(self, payload: dict, tag: str) -> None:
        payload["system"] = [{"text": tag}, *(payload.get("system") or [])]

    def parse_path_body(self, body: bytes, op: Operation) -> Conversation:
        return parse_request(body, model=op.model, stream=op.stream)

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return parse_request(body, model=model or "")

    def encode_request(self, conv: Conversation) -> dict:
        return encode_request(conv)

    def usage_of(self, body: dict, conv: Conversation | None = None) -> Usage:
        return parse_usage(body.get("usage") or {})

    def has_usage(self, body: dict) -> bool:
        return bool(body.get("usage"))

    def stream_usage(self, conv: Conversation | None = None) -> StreamUsage:
        return StreamUsage()

    def build_response(self, model: str, text: str, usage: Usage, *, finish_reason: str | None = None,
                       id: str | None = None) -> dict:
        return build_response(text, usage, stop_reason=finish_reason or "end_turn")

    def ends_stream(self, event: dict) -> bool:
        return "metadata" in event or "error" in event

    def read_chat(self, body: dict) -> Chat:
        return read_chat(body)

    def write_chat(self, chat: Chat, model: str) -> dict:
        return write_chat(chat, model)

    def read_reply(self, body: dict) -> Reply:
        return read_reply(body)

    def write_reply(self, reply: Reply, model: str) -> dict:
        return write_reply(reply, model)

    def read_deltas(self, event: dict) -> list[Delta]:
        return read_deltas(event)

    def stream_writer(self, model: str, include_usage: bool = True) -> StreamWriter:
        return FrameWriter(model, include_usage)

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        return f"{base_url}/model/{quote(path_model(model, ARN_MODEL), safe='')}/{'converse-stream' if stream else 'converse'}"


WIRE = BedrockConverse()
