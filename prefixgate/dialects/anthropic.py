"""Anthropic Messages API (`POST /v1/messages`) <-> IR, responses, streaming and usage.

Prefix order is tools -> system -> messages. Checkpoints are `cache_control` on content blocks;
`usage.input_tokens` counts only the uncached tokens after the last breakpoint.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from prefixgate.compact_json import compact
from prefixgate.dialects import tagging
from prefixgate.dialects.body import DROP, encode_messages, merge_native, rebuild_body, split_body
from prefixgate.dialects.diagnosis import MissDiagnosis, ProviderVerdict
from prefixgate.dialects.neutral import (
    Chat,
    Delta,
    Part,
    Reply,
    StreamWriter,
    Tool,
    ToolCall,
    Turn,
    checkpoint_of,
    non_empty_parts,
    note_dropped,
    put,
    refuse,
)
from prefixgate.dialects.output_limit import max_tokens_for
from prefixgate.dialects.resent import Body, ResentBodies, element_segments, field_segment
from prefixgate.dialects.sampling import put_sampling
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import expect, load_resent, optional, require
from prefixgate.dialects.wire import Parse, WireFormat
from prefixgate.errors import RequestError, anthropic_limit_headers, error_body
from prefixgate.ir import Block, BlockKind, Checkpoint, Conversation, Segment, without_markers
from prefixgate.segment_memo import SegmentMemo
from prefixgate.usage import Usage, checked_usage

NAME = "anthropic"
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
# Parsed tools, system prompts and messages by their JSON: an agent resends all but its newest turn unchanged.
SEGMENTS = SegmentMemo()
# Recent bodies and where their messages sit, so a body that resends one is parsed from where it differs.
BODIES = ResentBodies()
# The usage fields a `message_delta` carries (cumulative counts).
_DELTA_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
STOP_REASONS = ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal")


# ---- requests ---------------------------------------------------------------------------------

def parse_request(body: bytes | str | dict, *, count_tokens: bool = False) -> Conversation:
    """A Messages request as a Conversation; `count_tokens` parses a `/v1/messages/count_tokens` body."""
    data, resent = load_resent(body, "messages", BODIES)
    return conversation(data, resent, count_tokens=count_tokens)


def conversation(data: dict, resent: Body | None, *, count_tokens: bool = False) -> Conversation:
    """A Messages body already read (`load_resent`: with the body it resends, if any) as a Conversation;
    for the formats that carry Anthropic's body (Vertex rawPredict, Bedrock InvokeModel)."""
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
        segments.append(field_segment(resent, "tools", tools, lambda: SEGMENTS.segment(
            "tools", tools, None, tools, _tools_segment, tools)))
    if "system" in data:
        system = data["system"]
        segments.append(field_segment(resent, "system", system, lambda: SEGMENTS.segment(
            "system", system, None, _parts(system), _content_segment, "system", system, "system", None)))

    def message(i: int) -> Segment:
        msg = messages[i]
        parts = _parts(msg.get("content") if isinstance(msg, dict) else None)
        return SEGMENTS.segment("message", msg, msg, parts, _message_segment, msg, i)

    segments += element_segments(resent, len(messages), message)
    if not messages:
        raise RequestError("messages: at least one message is required", field="messages")
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation(NAME, model, segments, params=params, field_order=order, stream=stream, source=resent)


def _message_segment(msg: Any, i: int) -> Segment:
    field = f"messages.{i}"
    expect(msg, dict, field)
    role = require(msg, "role", str, f"{field}.role")
    if role not in ROLES:
        raise RequestError(f"{field}.role: must be one of {', '.join(ROLES)}, got {role!r}", field=f"{field}.role")
    if "content" not in msg:
        raise RequestError(f"{field}.content: field required", field=f"{field}.content")
    return _content_segment(role, msg["content"], f"{field}.content", native=msg)


def _tools_segment(tools: list) -> Segment:
    return Segment("tools", [_tool_block(t, f"tools.{i}") for i, t in enumerate(tools)], form="list")


def _parts(content: Any) -> list:
    """What each block of a content segment holds as its native: a list's items, or the bare string."""
    return content if isinstance(content, list) else [content]


def _tool_block(tool: Any, field: str) -> Block:
    expect(tool, dict, field)
    return Block("tool_def", tool, text=compact(without_markers(tool)), checkpoint=_checkpoint(tool, field))


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
    return value if isinstance(value, str) else compact(value)


def _block_text(block: dict, kind: BlockKind, field: str) -> str:
    if kind == "text":
        return expect(block.get("text", ""), str, f"{field}.text")
    if kind == "thinking":
        return _as_text(block.get("thinking", "") or block.get("data", ""))
    if kind == "tool_call":
        return compact({"name": block.get("name"), "input": block.get("input")})
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return "\n".join(_as_text(c.get("text", "")) for c in content if isinstance(c, dict))
        return content if isinstance(content, str) else compact(content)
    if kind == "document":
        source = expect(block.get("source") or {}, dict, f"{field}.source")
        if source.get("type") == "text":
            return _as_text(source.get("data", ""))
        return compact(block.get("content", "")) if "content" in block else ""
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

    def encode(seg: Segment) -> dict | None:
        if seg.role == "tools":
            encoded["tools"] = [_encode_block(b) for b in seg.blocks]
            return None
        if seg.role == "system" and seg.native is None:
            encoded["system"] = _encode_content(seg)
            return None
        content = _encode_content(seg)
        native = seg.native if seg.native is not None else {"role": seg.role}
        # The caller's own message when its content is unchanged, not a rebuilt one.
        sent = native.get("content")
        same = sent is content or (type(sent) is str and sent == content) or _same_items(sent, content)
        return native if same else merge_native(native, {"content": content})

    encoded["messages"] = encode_messages(conv.segments, encode)
    for key in ("tools", "system"):
        encoded.setdefault(key, DROP)
    return rebuild_body(conv, encoded)


def _encode_content(seg: Segment) -> Any:
    only = seg.blocks[0] if len(seg.blocks) == 1 else None
    if seg.form == "string" and only is not None and only.kind == "text" and only.checkpoint is None:
        return only.text
    return [_encode_block(b) for b in seg.blocks]


def _same_items(old: Any, new: Any) -> bool:
    return type(old) is list and type(new) is list and len(old) == len(new) and all(map(operator.is_, old, new))


def _encode_block(block: Block) -> dict:
    if not block.edited and block.checkpoint is None and type(block.native) is dict and "cache_control" not in block.native:
        return block.native     # the common case, decided without the marker's validation below
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


def automatic_ttl(conv: Conversation) -> str | None:
    """The TTL the top-level automatic `cache_control` asks for ("" where it cannot be read); None without one."""
    cc = conv.params.get("cache_control")
    if cc is None:
        return None
    ttl = cc.get("ttl", "5m") if isinstance(cc, dict) else ""
    return ttl if isinstance(ttl, str) else ""


def cache_control(cp: Checkpoint) -> dict:
    return {"type": "ephemeral"} if cp.ttl == "5m" else {"type": "ephemeral", "ttl": cp.ttl}


# ---- usage ------------------------------------------------------------------------------------

@checked_usage()
def parse_usage(usage: dict) -> Usage:
    """A native `usage` object (response, `message_start` or cumulative `message_delta`)."""
    split = usage.get("cache_creation") or {}
    writes = {
        "5m": split.get("ephemeral_5m_input_tokens") or 0,
        "1h": split.get("ephemeral_1h_input_tokens") or 0,
    }
    # A split without the flat total (null or absent) is the total: never a negative 5m remainder.
    written = usage.get("cache_creation_input_tokens")
    written = sum(writes.values()) if written is None else written
    if sum(writes.values()) != written:
        # Older responses carry only the total; Anthropic's default TTL is 5 minutes.
        writes = {"5m": max(written - writes["1h"], 0), "1h": writes["1h"]}
    return Usage(
        uncached_input=usage.get("input_tokens") or 0,
        cache_read=usage.get("cache_read_input_tokens") or 0,
        cache_writes={ttl: n for ttl, n in writes.items() if n},
        output=usage.get("output_tokens") or 0,
        web_searches=int((usage.get("server_tool_use") or {}).get("web_search_requests") or 0),
        service_tier=str(usage.get("service_tier") or ""),
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
        # The tier that served it, in Anthropic's words (standard, priority, batch); standard where none.
        "service_tier": usage.service_tier if usage.service_tier in ("priority", "batch") else "standard",
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
            # Its fields are optional (MessageDeltaUsage): a null one leaves message_start's count standing, as
            # the SDKs' accumulators do; only a value replaces it.
            self._fields.update((k, v) for k, v in (event.get("usage") or {}).items() if v is not None)
            self.stop_reason = (event.get("delta") or {}).get("stop_reason", self.stop_reason)

    @property
    def usage(self) -> Usage | None:
        return parse_usage(self._fields) if self._fields else None


# ---- responses --------------------------------------------------------------------------------

def build_response(
    model: str, text: str, usage: Usage, *, finish_reason: str | None = None, id: str | None = None,
    extra: dict | None = None
) -> dict:
    return (extra or {}) | {
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
    model: str, chunks: Iterable[str], usage: Usage, *, finish_reason: str | None = None, id: str | None = None,
    extra: dict | None = None
) -> Iterator[bytes]:
    """The event sequence Anthropic streams: message_start, ping, one text block, message_delta, message_stop.
    `extra` fields of the message (`diagnostics`) ride on message_start, the only event carrying a Message."""
    start_usage = usage_json(Usage(usage.uncached_input, usage.cache_read, usage.cache_writes, min(usage.output, 1)))
    message = build_response(model, "", Usage(), id=id, extra=extra) | {"stop_reason": None, "usage": start_usage}
    yield _event({"type": "message_start", "message": message})
    yield _event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    yield _event({"type": "ping"})
    for chunk in chunks:
        if chunk:
            yield _event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": chunk}})
    yield _event({"type": "content_block_stop", "index": 0})
    final = usage_json(usage)
    delta_usage = {k: final[k] for k in _DELTA_USAGE}
    yield _event({
        "type": "message_delta",
        "delta": {"stop_reason": finish_reason or "end_turn", "stop_sequence": None},
        "usage": delta_usage,
    })
    yield _event({"type": "message_stop"})


def error_event(err: RequestError) -> bytes:
    """A mid-stream error; Anthropic sends no `message_stop` after it."""
    return encode_sse(error_body(err, NAME), "error")


def _event(data: dict) -> bytes:
    return encode_sse(data, data["type"])


def new_id() -> str:
    return "msg_" + uuid.uuid4().hex[:24]


# ---- translation through the neutral forms ------------------------------------------------------

# Shortest TTL Anthropic offers that is at least as long as the one asked for.
_TTL_AT_LEAST = {"5m": "5m", "30m": "1h", "1h": "1h", "24h": "1h"}


def read_chat(body: dict) -> Chat:
    chat = Chat([], stream=bool(body.get("stream")))
    system = body.get("system")
    if isinstance(system, str):
        chat.turns.append(Turn("system", [Part("text", system)]))
    elif isinstance(system, list):
        chat.turns.append(Turn("system", [Part("text", b.get("text", ""), checkpoint_of(b)) for b in system]))
    for msg in body["messages"]:
        content = msg["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        parts, results = [], []
        for b in blocks:
            kind = b.get("type")
            if kind == "text":
                parts.append(Part("text", b.get("text", ""), checkpoint_of(b)))
            elif kind == "image":
                src = expect(b.get("source") or {}, dict, "messages.content.source")
                parts.append(Part("image", mime=src.get("media_type", ""), data=src.get("data", ""),
                                  url=src.get("url", ""), checkpoint=checkpoint_of(b)))
            elif kind == "document" and expect(b.get("source") or {}, dict, "messages.content.source").get("type") == "text":
                parts.append(Part("text", b["source"].get("data", ""), checkpoint_of(b)))
            elif kind == "tool_use":
                parts.append(Part("tool_call", call_id=b.get("id", ""), name=b.get("name", ""), args=b.get("input") or {}))
            elif kind == "tool_result":
                inner = expect(b.get("content", ""), (str, list), "messages.content.tool_result.content")
                kinds = [c.get("type") if isinstance(c, dict) else c for c in ([] if isinstance(inner, str) else inner)]
                if any(k != "text" for k in kinds):     # a screenshot the model must see: other formats' results are text
                    raise refuse(f"tool_result content of type {next(k for k in kinds if k != 'text')!r}", NAME)
                text = inner if isinstance(inner, str) else "\n".join(c.get("text", "") for c in inner)
                results.append(Part("tool_result", text, checkpoint_of(b), call_id=b.get("tool_use_id", ""),
                                    is_error=bool(b.get("is_error"))))
            elif kind in ("thinking", "redacted_thinking"):
                chat.notes.append("dropped a thinking block (only Anthropic models read them back)")
            else:
                raise refuse(f"content block type {kind!r}", NAME)
        if results:
            chat.turns.append(Turn("tool", results))
        if parts or not results:
            chat.turns.append(Turn(msg["role"], parts))
    for t in body.get("tools") or []:
        if "input_schema" not in t:
            raise refuse(f"server tool {t.get('type') or t.get('name')!r}", NAME)
        chat.tools.append(Tool(t.get("name", ""), t.get("description", ""), t["input_schema"], checkpoint_of(t),
                               strict=t.get("strict") is True))
    chat.max_tokens = body.get("max_tokens")
    chat.temperature, chat.top_p = optional(body, "temperature", (int, float)), optional(body, "top_p", (int, float))
    chat.stop = list(expect(body.get("stop_sequences") or [], list, "stop_sequences"))
    choice = expect(body.get("tool_choice") or {}, dict, "tool_choice")
    chat.tool_choice = choice.get("name") if choice.get("type") == "tool" else choice.get("type")
    if choice.get("disable_parallel_tool_use"):
        chat.parallel_calls = False
    chat.user = expect(body.get("metadata") or {}, dict, "metadata").get("user_id")
    if isinstance(body.get("cache_control"), dict):
        chat.auto_cache = Checkpoint(body["cache_control"].get("ttl", "5m"))
    if isinstance(body.get("output_config"), dict) and body["output_config"].get("format"):
        raise refuse("output_config.format", NAME)      # structured output, as OpenAI's response_format
    note_dropped(chat, body, {"messages", "model", "stream", "system", "tools", "max_tokens", "temperature",
                              "top_p", "stop_sequences", "tool_choice", "metadata", "cache_control"})
    return chat


def write_chat(chat: Chat, model: str) -> dict:
    system: list[dict] = []
    messages: list[dict] = []
    for turn in chat.turns:
        # "messages: text content blocks must be non-empty"; a turn left empty is refused too.
        parts = non_empty_parts(chat, turn, "Anthropic")
        if turn.role == "system" and not messages:
            system.extend(_neutral_block(p) for p in parts)
            continue
        if not parts:
            continue
        role = "assistant" if turn.role == "assistant" else "user"
        blocks = [_neutral_block(p) for p in parts]
        if turn.role == "system":
            chat.notes.append("a system message after the first turn became user text")
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)      # Anthropic merges consecutive turns; keep them explicit
        else:
            messages.append({"role": role, "content": blocks})
    out: dict[str, Any] = {"model": model, "max_tokens": max_tokens_for(chat, model)}
    if system:
        out["system"] = system
    out["messages"] = messages
    if chat.tools:
        out["tools"] = [_with_cp({"name": t.name, "description": t.description, "input_schema": t.schema}
                                 | ({"strict": True} if t.strict else {}), t.checkpoint) for t in chat.tools]
    put(out, stop_sequences=chat.stop or None)
    put_sampling(out, chat, model, "temperature", "top_p")
    if chat.tool_choice:
        out["tool_choice"] = ({"type": chat.tool_choice} if chat.tool_choice in ("auto", "any", "none")
                              else {"type": "tool", "name": chat.tool_choice})
    if chat.parallel_calls is False and chat.tools and chat.tool_choice != "none":
        out["tool_choice"] = out.get("tool_choice", {"type": "auto"}) | {"disable_parallel_tool_use": True}
    if chat.user:
        out["metadata"] = {"user_id": chat.user}
    if chat.stream:
        out["stream"] = True
    marked = any(p.checkpoint for t in chat.turns for p in t.parts) or any(t.checkpoint for t in chat.tools)
    if chat.auto_cache or (chat.cache_key and not marked):
        # A cache key says "these requests share a prefix": Anthropic's automatic caching is that intent.
        out["cache_control"] = _translated_cc(chat.auto_cache or Checkpoint("5m"))
        if chat.cache_key:
            chat.notes.append("prompt_cache_key -> automatic cache_control")
    return out


def _neutral_block(p: Part) -> dict:
    if p.kind == "text":
        block: dict[str, Any] = {"type": "text", "text": p.text}
    elif p.kind == "image":
        source = {"type": "url", "url": p.url} if p.url else {"type": "base64", "media_type": p.mime, "data": p.data}
        block = {"type": "image", "source": source}
    elif p.kind == "tool_call":
        block = {"type": "tool_use", "id": p.call_id, "name": p.name, "input": p.args or {}}
    else:
        block = {"type": "tool_result", "tool_use_id": p.call_id, "content": p.text}
        if p.is_error:
            block["is_error"] = True
    return _with_cp(block, p.checkpoint)


def _with_cp(block: dict, cp: Checkpoint | None) -> dict:
    if cp is not None:
        block["cache_control"] = _translated_cc(cp)
    return block


def _translated_cc(cp: Checkpoint) -> dict:
    return cache_control(Checkpoint(_TTL_AT_LEAST.get(cp.ttl, "1h")))


FINISH_FROM = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
               "pause_turn": "stop", "refusal": "content_filter", "model_context_window_exceeded": "length"}
# pause_turn (a long server-tool turn paused, to be sent back) and refusal are not answers that ended by themselves.
NATURAL = ("end_turn", "stop_sequence", "tool_use")
FINISH_TO = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}


def read_reply(body: dict) -> Reply:
    blocks = body.get("content") or []
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = [ToolCall(b.get("id", ""), b.get("name", ""), b.get("input") or {})
             for b in blocks if b.get("type") == "tool_use"]
    return Reply(text, usage_from_response(body), FINISH_FROM.get(body.get("stop_reason"), "stop"), calls, body.get("id"),
                 body.get("stop_reason"))


def write_reply(reply: Reply, model: str) -> dict:
    out = build_response(model, reply.text, reply.usage, finish_reason=FINISH_TO[reply.finish])
    out["content"] += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in reply.tool_calls]
    return out


def read_deltas(event: dict) -> list[Delta]:
    etype = event.get("type")
    if etype == "content_block_start" and (event.get("content_block") or {}).get("type") == "tool_use":
        block = event["content_block"]
        return [("call", event.get("index", 0), block.get("id", ""), block.get("name", ""))]
    if etype == "content_block_delta":
        delta = event.get("delta") or {}
        if delta.get("type") == "text_delta":
            return [("text", delta.get("text", ""))]
        if delta.get("type") == "input_json_delta" and delta.get("partial_json"):
            return [("args", event.get("index", 0), delta["partial_json"])]
    elif etype == "message_delta" and (event.get("delta") or {}).get("stop_reason"):
        return [("finish", FINISH_FROM.get(event["delta"]["stop_reason"], "stop"), event["delta"]["stop_reason"])]
    return []


class EventWriter(StreamWriter):
    """Messages stream events for neutral deltas: message_start, one content block per text run or tool
    call, message_delta with usage, message_stop."""

    def __init__(self, model: str, include_usage: bool = True) -> None:
        super().__init__(model, include_usage)
        self._id = new_id()
        self._block: tuple[str, Any] | None = None   # the open content block (kind, the target's index)
        self._index = -1

    def _start(self) -> bytes:
        message = {"id": self._id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                   "stop_reason": None, "stop_sequence": None, "usage": usage_json(Usage())}
        return _event({"type": "message_start", "message": message})

    def _open(self, kind: str, source: Any, block: dict) -> bytes:
        close = self._close()
        self._index += 1
        self._block = (kind, source)
        return close + _event({"type": "content_block_start", "index": self._index, "content_block": block})

    def _close(self) -> bytes:
        if self._block is None:
            return b""
        self._block = None
        return _event({"type": "content_block_stop", "index": self._index})

    def _delta(self, d: Delta) -> bytes:
        if d[0] == "text":
            head = b"" if self._block and self._block[0] == "text" else self._open("text", None, {"type": "text", "text": ""})
            return head + _event({"type": "content_block_delta", "index": self._index,
                                  "delta": {"type": "text_delta", "text": d[1]}})
        if d[0] == "call":
            return self._open("tool", d[1], {"type": "tool_use", "id": d[2], "name": d[3], "input": {}})
        return _event({"type": "content_block_delta", "index": self._index,
                       "delta": {"type": "input_json_delta", "partial_json": d[2]}})

    def _finish(self, usage: Usage) -> bytes:
        u = usage_json(usage)
        delta = {"type": "message_delta", "delta": {"stop_reason": FINISH_TO[self.finish_reason], "stop_sequence": None},
                 "usage": {k: u[k] for k in _DELTA_USAGE}}
        return self._close() + _event(delta) + _event({"type": "message_stop"})


# ---- the adapter ------------------------------------------------------------------------------

class MessagesDiagnosis(MissDiagnosis):
    """Anthropic's `diagnostics: {"previous_message_id": ...}` on every turn (the first with null: Anthropic keeps
    fingerprints only of requests carrying the object); the answer's `diagnostics.cache_miss_reason`."""

    def fields(self, previous: str | None, sent: Conversation) -> dict[str, Any]:
        return {"diagnostics": {"previous_message_id": previous}}

    def callers_own(self, params: dict[str, Any]) -> bool:
        return "diagnostics" in params

    def answer(self, data: dict) -> dict | None:
        message = data.get("message") if data.get("type") == "message_start" else data
        return message if isinstance(message, dict) and message.get("type") == "message" else None

    def verdict(self, answer: dict) -> ProviderVerdict | None:
        diag = answer.get("diagnostics")
        if not isinstance(diag, dict):
            return None
        reason = diag.get("cache_miss_reason")
        if not isinstance(reason, dict):
            return ProviderVerdict("pending", None)       # the answer was serialised before the comparison ended
        tokens = reason.get("cache_missed_input_tokens")
        return ProviderVerdict(str(reason.get("type", "unavailable")), tokens if isinstance(tokens, int) else None)


def reply_blocks(response: Any) -> list | None:
    """An answer's content as the caller sends it back, when that is plain text blocks (at least one with text);
    None for anything else: a tool call needs its result next, thinking and citations are not re-sent as such."""
    if not isinstance(response, dict) or response.get("type", "message") != "message":
        return None
    content = response.get("content")
    if not isinstance(content, list) or not content or not all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and not b.get("citations")
            for b in content):
        return None
    return [{"type": "text", "text": b["text"]} for b in content if b["text"]] or None


class ReplyBlocks:
    """An answer's text blocks, whole or as its stream's events arrive (`WireFormat.reply_collector`)."""

    def __init__(self) -> None:
        self.blocks: list[list[str]] = []
        self.plain = True
        self.answer: dict | None = None

    def whole(self, body: dict) -> None:
        self.answer = body

    def feed(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") != "text" or block.get("citations") or event.get("index") != len(self.blocks):
                self.plain = False
            self.blocks.append([block.get("text") or ""])
        elif kind == "content_block_delta":
            delta, index = event.get("delta") or {}, event.get("index")
            if delta.get("type") != "text_delta" or not isinstance(index, int) or not 0 <= index < len(self.blocks):
                self.plain = False
            else:
                self.blocks[index].append(delta.get("text") or "")

    def content(self) -> list | None:
        if self.answer is not None:
            return reply_blocks(self.answer)
        if not self.plain:
            return None
        return reply_blocks({"content": [{"type": "text", "text": "".join(b)} for b in self.blocks]})


class AnthropicMessages(WireFormat):
    miss_diagnosis = MessagesDiagnosis()
    resends_replies = True
    reply_collector = ReplyBlocks
    name = NAME
    planner_provider = NAME
    span_name = "POST /v1/messages"
    forward_headers = ("anthropic-version", "anthropic-beta")
    mark_field = "cache_control"
    finish_from, finish_to = FINISH_FROM, FINISH_TO
    natural_finishes = NATURAL
    # The events the relay parses: usage, the container (message_start, message_delta), and the files code
    # execution wrote (a server tool result arrives whole in its content_block_start), which are the tenant's.
    usage_marks = (b"message_start", b"message_delta", b"code_execution_tool_result")
    terminal = b"message_stop"
    upstream_headers = {"anthropic-version": "2023-06-01"}

    # This module's functions are the adapter's methods.
    encode_request, build_response, error_event = staticmethod(encode_request), staticmethod(build_response), \
        staticmethod(error_event)
    read_chat, write_chat, read_reply, write_reply, read_deltas = (
        staticmethod(read_chat), staticmethod(write_chat), staticmethod(read_reply), staticmethod(write_reply),
        staticmethod(read_deltas))
    writer = EventWriter

    def error_reply(self, err: RequestError) -> tuple[int, dict, dict[str, str]]:
        """Anthropic's error answer: its body and, for a rate limit of the gateway's own, anthropic-ratelimit-*."""
        return err.status, self.error_body(err), anthropic_limit_headers(err)

    def tag_prompt(self, payload: dict, tag: str) -> None:
        if not tagging.first_tool(payload, tag):
            tagging.system_blocks(payload, tag)

    def parser_for(self, path: str) -> Parse | None:
        return parse_request if path == "/v1/messages" else None

    def owns_path(self, path: str) -> bool:
        return path.startswith("/v1/messages")

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return parse_request(body)

    def usage_of(self, body: dict, conv: Conversation | None = None) -> Usage:
        return usage_from_response(body)

    def has_usage(self, body: dict) -> bool:
        return bool(body.get("usage"))

    def automatic_ttl(self, conv: Conversation) -> str | None:
        return automatic_ttl(conv)

    def stream_usage(self, conv: Conversation | None = None) -> StreamUsage:
        return StreamUsage()

    def stream_error(self, event: dict) -> str | None:
        if event.get("type") != "error":
            return None
        return str((event.get("error") or {}).get("message", "stream error"))

    def ends_stream(self, event: dict) -> bool:
        return event.get("type") == "error"     # Anthropic sends no message_stop after an error event

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        return f"{base_url}/v1/messages"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key}


WIRE = AnthropicMessages()
