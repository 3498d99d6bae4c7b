"""OpenAI Chat Completions (`POST /v1/chat/completions`) <-> IR, responses, streaming and usage.

Tools and structured-output schemas are injected before the messages, so they lead the prefix.
Caching is automatic; the planner steers it with `prompt_cache_key` and, on GPT-5.6+ models,
`prompt_cache_breakpoint` on content parts. `prompt_tokens` *includes* cached tokens.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import unquote

from prefixgate.compact_json import compact
from prefixgate.dialects import tagging
from prefixgate.dialects.body import DROP, encode_messages, merge_native, rebuild_body, split_body
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
    json_or_raw,
    note_dropped,
    note_error_results,
    put,
    refuse,
)
from prefixgate.dialects.resent import ResentBodies, element_segments, field_segment
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import expect, load_body, load_resent, optional, require
from prefixgate.dialects.wire import Parse, WireFormat
from prefixgate.errors import RequestError, error_body, openai_limit_headers
from prefixgate.ir import Block, BlockKind, Checkpoint, Conversation, Segment
from prefixgate.providers.compatible import writes_cache_control
from prefixgate.segment_memo import SegmentMemo
from prefixgate.usage import Usage, checked_usage

NAME = "openai"
# Parsed messages by their JSON: a chat or agent client resends all but its newest turn unchanged.
SEGMENTS = SegmentMemo()
# Recent bodies and where their messages sit, so a body that resends one is parsed from where it differs.
BODIES = ResentBodies()
PREFIX_FIELDS = {"tools", "functions", "response_format", "messages"}
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_KINDS: dict[str, BlockKind] = {
    "text": "text", "image_url": "image", "input_audio": "audio", "file": "file", "refusal": "text",
}
# GPT-5.6+ explicit breakpoints take their TTL from the request; the wire form has no TTL of its own.
BREAKPOINT = {"mode": "explicit"}
# Anthropic-style markers on content parts, as OpenRouter takes them for Claude and Gemini models
# (`cache_control: {"type": "ephemeral"}`, optionally with a ttl): a request for such a model
# (`compatible.writes_cache_control`) gets its checkpoints written this way, any other OpenAI's.
CLAUDE_TTLS = ("5m", "1h")


# ---- requests ---------------------------------------------------------------------------------

def parse_request(body: bytes | str | dict) -> Conversation:
    data, resent = load_resent(body, "messages", BODIES)
    model = require(data, "model", str)
    messages = require(data, "messages", list)
    if not messages:
        raise RequestError("messages: must contain at least one message", field="messages")
    stream = expect(data.get("stream", False), (bool, type(None)), "stream") or False
    if data.get("stream_options") is not None:      # read for the usage chunk (`caller_wants_usage`)
        expect(data["stream_options"], dict, "stream_options")
    for key in ("max_tokens", "max_completion_tokens"):
        if data.get(key) is not None and expect(data[key], int, key) < 1:
            raise RequestError(f"{key}: must be >= 1", field=key)
    segments: list[Segment] = []
    for key in ("tools", "functions"):
        if key in data:
            items = expect(data[key], list, key)
            segments.append(field_segment(resent, key, items, lambda key=key, items=items: SEGMENTS.segment(
                key, items, None, items, _tools_segment, key, items)))
    if "response_format" in data:
        rf = expect(data["response_format"], dict, "response_format")
        segments.append(Segment("schema", [Block("schema", rf, text=compact(rf))], blocks_field="response_format", form="object"))
    segments += element_segments(resent, len(messages), lambda i: SEGMENTS.segment(
        "message", messages[i], messages[i], _parts(messages[i]), _message_segment, messages[i], f"messages.{i}"))
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation(NAME, model, segments, params=params, field_order=order, stream=stream, source=resent)


def _tools_segment(key: str, items: list) -> Segment:
    blocks = [Block("tool_def", _tool(t, f"{key}.{i}"), text=compact(t)) for i, t in enumerate(items)]
    return Segment("tools", blocks, blocks_field=key, form="list")


def _parts(msg: Any) -> list:
    """What each block of a message's segment holds as its native: content parts (or the bare string),
    then tool calls; an empty list for what is not a message (its parse refuses it, and nothing is memoised)."""
    if not isinstance(msg, dict):
        return []
    content, calls = msg.get("content"), msg.get("tool_calls") or []
    parts = content if isinstance(content, list) else [content] if isinstance(content, str) else []
    return parts + calls if isinstance(calls, list) and calls else parts


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
        # A call's arguments are a JSON string: translated for another target they are parsed (a 500 otherwise).
        if call.get("function") is not None:
            fn = expect(call["function"], dict, f"{field}.tool_calls.{j}.function")
            if fn.get("arguments") is not None:
                expect(fn["arguments"], str, f"{field}.tool_calls.{j}.function.arguments")
        blocks.append(Block("tool_call", call, text=compact(call.get("function", call))))
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
    # Only an explicit breakpoint (or an ephemeral cache_control of a known TTL) is one; any other value
    # is passed through for the API to judge.
    check_cache_control(part, field)
    return Block(kind, part, text=text, checkpoint=breakpoint_of(part, field) or _claude_marker(part))


def breakpoint_of(part: dict, field: str | None = None) -> Checkpoint | None:
    """A content part's `prompt_cache_breakpoint` (`{"mode": "explicit"}`, optionally with its own `ttl`; without
    one the request's `prompt_cache_options.ttl` applies, 30m unless set) as a checkpoint, else None. Parsing a
    request (`field`: the part's), a ttl string that is no TTL (`"7d"`, `""`) is a 400 naming it."""
    marker = part.get("prompt_cache_breakpoint")
    if not isinstance(marker, dict) or marker.get("mode") != "explicit" or set(marker) - {"mode", "ttl"}:
        return None
    ttl = marker.get("ttl", "30m")
    if not isinstance(ttl, str):
        return None
    try:
        return Checkpoint(ttl)
    except ValueError:
        if field is None:
            return None
        raise RequestError(f"{field}.prompt_cache_breakpoint.ttl: {ttl[:40]!r} is not a cache TTL (e.g. '30m', '12h')",
                           field=f"{field}.prompt_cache_breakpoint.ttl") from None


def check_cache_control(part: dict, field: str) -> None:
    """A Claude-style `cache_control` on a part (what OpenAI-compatible Claude routes take) is passed through, but
    its `ttl` must be a TTL at all: translated for a Claude or Gemini target it becomes a checkpoint (a 400
    naming it, not a 500 there)."""
    cc = part.get("cache_control")
    if not isinstance(cc, dict) or "ttl" not in cc:
        return
    ttl = cc["ttl"]
    if isinstance(ttl, str):
        try:
            Checkpoint(ttl)
            return
        except ValueError:
            pass
    raise RequestError(f"{field}.cache_control.ttl: {str(ttl)[:40]!r} is not a cache TTL (e.g. '5m', '1h')",
                       field=f"{field}.cache_control.ttl")


def _claude_marker(part: dict) -> Checkpoint | None:
    cc = part.get("cache_control")
    if not isinstance(cc, dict) or cc.get("type") != "ephemeral" or cc.get("ttl", "5m") not in CLAUDE_TTLS:
        return None
    return Checkpoint(cc.get("ttl", "5m"))


def encode_request(conv: Conversation) -> dict:
    encoded: dict[str, Any] = {"messages": []}
    claude = writes_cache_control(conv.model or "")

    def encode(seg: Segment) -> dict | None:
        if seg.role == "tools":
            encoded[seg.blocks_field or "tools"] = [b.native for b in seg.blocks]
            return None
        if seg.role == "schema":
            encoded["response_format"] = seg.blocks[0].native
            return None
        return _encode_message(seg, claude)

    encoded["messages"] = encode_messages(conv.segments, encode)
    for key in ("tools", "functions", "response_format"):
        encoded.setdefault(key, DROP)
    return rebuild_body(conv, encoded)


def _encode_message(seg: Segment, claude: bool) -> dict:
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
        changes["content"] = [_encode_part(b, claude) for b in content_blocks]
    if calls or "tool_calls" in native:
        changes["tool_calls"] = calls
    return merge_native(native, changes)


def _encode_part(block: Block, claude: bool) -> dict:
    native = block.native if isinstance(block.native, dict) else {"type": "text", "text": block.native}
    changes: dict[str, Any] = {}
    if block.edited or not isinstance(block.native, dict):
        changes["text"] = block.text
    had = breakpoint_of(native) is not None or _claude_marker(native) is not None
    if had and block.checkpoint is None:
        changes.update({k: DROP for k in ("prompt_cache_breakpoint", "cache_control") if k in native})
    elif block.checkpoint is not None and not had:
        changes.update(_marker(block.checkpoint, claude))
    return merge_native(native, changes) if changes else native


def _marker(checkpoint: Checkpoint, claude: bool) -> dict[str, dict]:
    """A checkpoint as a content part's marker field: Anthropic's form (its ttl only past the default), or OpenAI's."""
    if not claude:
        return {"prompt_cache_breakpoint": dict(BREAKPOINT)}
    return {"cache_control": {"type": "ephemeral"} | ({"ttl": "1h"} if checkpoint.ttl == "1h" else {})}


# ---- usage ------------------------------------------------------------------------------------

@checked_usage()
def parse_usage(usage: dict, write_ttl: str = "30m") -> Usage:
    """`write_ttl`: the usage does not say how long written tokens live, so their price class comes
    from the request's `prompt_cache_options.ttl` (GPT-5.6+ bills a 12h write twice a 30m one)."""
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    prompt = usage.get("prompt_tokens") or 0
    if "prompt_cache_hit_tokens" in usage:
        # DeepSeek splits the prompt instead: hit + miss = prompt_tokens, no writes billed.
        cached = usage.get("prompt_cache_hit_tokens") or 0
    output = usage.get("completion_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    if reasoning and usage.get("total_tokens") == prompt + output + reasoning:
        # xAI counts reasoning outside `completion_tokens` (its total adds them); OpenAI's total does not.
        output += reasoning
    return Usage(
        uncached_input=max(prompt - cached - written, 0),
        cache_read=cached,
        cache_writes={write_ttl: written} if written else {},
        output=output,
        reported_cost=_reported_cost(usage.get("cost")),
        reasoning=reasoning,
    )


def _reported_cost(cost: object) -> Decimal | None:
    """OpenRouter's `usage.cost` (USD credits) as an exact decimal; anything else is not a cost."""
    if isinstance(cost, bool) or not isinstance(cost, int | float | str):
        return None
    try:
        value = Decimal(str(cost))
    except InvalidOperation:
        return None
    return value if value.is_finite() and value >= 0 else None


def write_ttl(body_params: dict) -> str:
    """The TTL a request's cache writes are billed at: its `prompt_cache_options.ttl`, else 30m."""
    options = body_params.get("prompt_cache_options")
    ttl = options.get("ttl") if isinstance(options, dict) else None
    return ttl if isinstance(ttl, str) and ttl else "30m"


def usage_from_response(resp: dict, write_ttl: str = "30m") -> Usage:
    # The tier that served it and the model that ran are beside the usage, not in it (every chunk of a stream
    # carries them too, but for Azure's first).
    return replace(parse_usage(resp.get("usage") or {}, write_ttl), service_tier=str(resp.get("service_tier") or ""),
                   model=_named_model(resp))


def _named_model(event: dict) -> str:
    model = event.get("model")
    return model if isinstance(model, str) else ""


def usage_json(usage: Usage) -> dict:
    details: dict[str, int] = {"cached_tokens": usage.cache_read, "audio_tokens": 0}
    if usage.cache_write:
        details["cache_write_tokens"] = usage.cache_write
    return {
        "prompt_tokens": usage.input_total,
        "completion_tokens": usage.output,
        "total_tokens": usage.input_total + usage.output,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": usage.thinking, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    }


class StreamUsage:
    """Usage of a streamed response: the one chunk with `usage` (sent before `[DONE]` when
    `stream_options.include_usage` is set); a broken stream may never deliver it."""

    def __init__(self, write_ttl: str = "30m") -> None:
        self._usage: Usage | None = None
        self.finish_reason: str | None = None
        self.write_ttl = write_ttl
        self.model = ""     # as the first chunk naming one names it (Azure's first, its prompt filter results, names none)

    def feed(self, event: dict) -> None:
        self.model = self.model or _named_model(event)
        if event.get("usage"):
            self._usage = replace(usage_from_response(event, self.write_ttl), model=self.model)
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
    usage_body: dict | None = None,
    service_tier: str = "default",
) -> Iterator[bytes]:
    """Chat completion chunks: role first, content deltas, the finish chunk, the usage chunk
    (`choices: []`, only with include_usage), then `[DONE]`. `usage_body`: the usage object as a
    compatible provider words it (DeepSeek's hit/miss, OpenRouter's cost), instead of OpenAI's."""
    head = {"id": id or new_id(), "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "service_tier": service_tier, "system_fingerprint": None}
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
        yield encode_sse(head | {"choices": [], "usage": usage_body or usage_json(usage)})
    yield encode_sse("[DONE]")


def error_event(err: RequestError) -> bytes:
    return encode_sse(error_body(err, NAME))


def error_reply(err: RequestError) -> tuple[int, dict, dict[str, str]]:
    """OpenAI's error answer: its body and, for a rate limit of the gateway's own, the x-ratelimit-* headers."""
    return err.status, error_body(err, NAME), openai_limit_headers(err)


def new_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def _tool(tool: object, field: str) -> dict:
    """A tool definition: an object, and its `function` (when given) an object too, as the API requires."""
    expect(tool, dict, field)
    if "function" in tool:
        expect(tool["function"], dict, f"{field}.function")
    return tool


# ---- translation through the neutral forms ------------------------------------------------------

def read_chat(body: dict) -> Chat:
    # The deprecated function calling: its functions were left out (the model answered without tools) and its
    # calls lost, so the results that followed answered no call.
    legacy = next((k for k in ("functions", "function_call") if body.get(k) is not None), None) or next(
        (f"messages.{i}.function_call" for i, m in enumerate(body["messages"]) if m.get("function_call")), None)
    if legacy:
        raise refuse(legacy, NAME)
    chat = Chat([], stream=bool(body.get("stream")))
    for msg in body["messages"]:
        role = {"developer": "system", "function": "tool"}.get(msg["role"], msg["role"])
        content = msg.get("content")
        parts: list[Part] = []
        if isinstance(content, str):
            parts.append(Part("text", content))
        for p in content if isinstance(content, list) else []:
            if p.get("type") in ("text", "refusal"):
                parts.append(Part("text", p.get("text") or p.get("refusal") or "", checkpoint_of(p)))
            elif p.get("type") == "image_url":
                image = expect(p.get("image_url") or {}, dict, "messages.content.image_url")
                url = expect(image.get("url", ""), str, "messages.content.image_url.url")
                inline = _data_url(url)
                parts.append(Part("image", mime=inline[0], data=inline[1], checkpoint=checkpoint_of(p)) if inline
                             else Part("image", url=url, checkpoint=checkpoint_of(p)))
            else:
                raise refuse(f"content part type {p.get('type')!r}", NAME)
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                raise refuse("tool call arguments that are not JSON", NAME) from None
            parts.append(Part("tool_call", call_id=call.get("id", ""), name=fn.get("name", ""), args=args))
        if role == "tool":
            text = "\n".join(p.text for p in parts if p.kind == "text")
            cp = next((p.checkpoint for p in parts if p.checkpoint), None)
            parts = [Part("tool_result", text, cp, call_id=msg.get("tool_call_id", ""), name=msg.get("name", ""))]
        chat.turns.append(Turn(role, parts))
    for i, t in enumerate(body.get("tools") or []):
        if t.get("type", "function") != "function":
            raise RequestError(f"cannot translate tools.{i} (a {t.get('type')!r} tool) from the {NAME} format for "
                               "this route's target", field=f"tools.{i}")
        fn = t.get("function") or {}
        chat.tools.append(Tool(fn.get("name", ""), fn.get("description", ""), fn.get("parameters") or Tool("").schema,
                               strict=fn.get("strict") is True))
    chat.max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    chat.temperature, chat.top_p = optional(body, "temperature", (int, float)), optional(body, "top_p", (int, float))
    chat.user = body.get("user")
    stop = body.get("stop")
    chat.stop = [stop] if isinstance(stop, str) else list(expect(stop or [], list, "stop"))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        # allowed_tools / custom: the neutral form has a forced function or none, so these would become `auto`.
        if choice.get("type") != "function":
            raise RequestError(f"cannot translate tool_choice (type {choice.get('type')!r}) from the {NAME} format "
                               "for this route's target", field="tool_choice")
        chat.tool_choice = expect(choice.get("function") or {}, dict, "tool_choice.function").get("name")
    elif choice is not None:
        chat.tool_choice = {"required": "any"}.get(choice, choice)
    chat.cache_key = body.get("prompt_cache_key")
    chat.parallel_calls = body.get("parallel_tool_calls")
    if body.get("n") not in (None, 1):     # null is the default, one choice
        raise refuse("n > 1", NAME)
    if body.get("response_format", {}).get("type", "text") != "text":
        raise refuse("response_format", NAME)
    if body.get("logprobs") or body.get("top_logprobs"):
        raise refuse("logprobs", NAME)      # the caller reads them from the answer; the target's carry none back
    # OpenAI's own web search and spoken answers: what the caller asked for would not happen.
    if body.get("web_search_options") is not None:
        raise refuse("web_search_options", NAME)
    if body.get("audio") is not None or "audio" in (body.get("modalities") or []):
        raise refuse("audio", NAME)
    note_dropped(chat, body, {"messages", "model", "stream", "stream_options", "tools", "max_tokens",
                              "max_completion_tokens", "temperature", "top_p", "user", "stop", "tool_choice",
                              "prompt_cache_key", "n", "response_format", "prompt_cache_options", "logprobs",
                              "top_logprobs", "parallel_tool_calls", "modalities"})
    return chat


def _data_url(url: str) -> tuple[str, str] | None:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return head, data
    return None


def write_chat(chat: Chat, model: str) -> dict:
    messages: list[dict] = []
    claude = writes_cache_control(model)
    for turn in chat.turns:
        if turn.role == "tool":
            for p in turn.parts:
                msg = {"role": "tool", "tool_call_id": p.call_id, "content": _content([Part("text", p.text, p.checkpoint)], claude)}
                messages.append(msg)
            continue
        calls = [p for p in turn.parts if p.kind == "tool_call"]
        msg: dict[str, Any] = {"role": turn.role, "content": _content([p for p in turn.parts if p.kind != "tool_call"], claude)}
        if calls:
            msg["tool_calls"] = [{"id": c.call_id, "type": "function",
                                  "function": {"name": c.name, "arguments": json.dumps(c.args)}} for c in calls]
            if not msg["content"]:
                msg["content"] = None
        messages.append(msg)
    out: dict[str, Any] = {"model": model, "messages": messages}
    note_error_results(chat, "OpenAI")
    if chat.tools:
        out["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                          "parameters": t.schema} | ({"strict": True} if t.strict else {})}
                        for t in chat.tools]
        if any(t.checkpoint for t in chat.tools):
            chat.notes.append("tool checkpoint: OpenAI caches tools automatically as the head of the prefix")
        put(out, parallel_tool_calls=chat.parallel_calls)
    put(out, max_completion_tokens=chat.max_tokens, temperature=chat.temperature, top_p=chat.top_p,
        user=chat.user, stop=chat.stop or None)
    if chat.tool_choice:
        out["tool_choice"] = ({"auto": "auto", "any": "required", "none": "none"}.get(chat.tool_choice)
                              or {"type": "function", "function": {"name": chat.tool_choice}})
    if chat.stream:
        out["stream"] = True
    if chat.cache_key:
        out["prompt_cache_key"] = chat.cache_key
    if chat.auto_cache:
        chat.notes.append("automatic cache_control -> OpenAI implicit caching of the whole prefix")
    return out


def _content(parts: list[Part], claude: bool) -> Any:
    if len(parts) == 1 and parts[0].kind == "text" and parts[0].checkpoint is None:
        return parts[0].text
    out = []
    for p in parts:
        if p.kind == "text":
            item: dict[str, Any] = {"type": "text", "text": p.text}
        elif p.kind == "image":
            item = {"type": "image_url", "image_url": {"url": p.url or f"data:{p.mime};base64,{p.data}"}}
        else:
            continue
        if p.checkpoint is not None:
            item.update(_marker(p.checkpoint, claude))
        out.append(item)
    return out


# Compatible servers add their own: vLLM ends an aborted stream with "abort" (vllm-project/vllm#57082), Together a
# failed one with "error"; neither answer is whole.
FINISH_FROM = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
               "content_filter": "content_filter", "abort": "content_filter", "error": "content_filter"}
FINISH_TO = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "content_filter": "content_filter"}


def read_reply(body: dict) -> Reply:
    choice = (body.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    calls = [ToolCall(c.get("id", ""), (c.get("function") or {}).get("name", ""),
                      json_or_raw((c.get("function") or {}).get("arguments") or "{}"))
             for c in msg.get("tool_calls") or []]
    return Reply(msg.get("content") or "", usage_from_response(body),
                 FINISH_FROM.get(choice.get("finish_reason"), "stop"), calls, body.get("id"), choice.get("finish_reason"))


def write_reply(reply: Reply, model: str) -> dict:
    out = build_response(model, reply.text, reply.usage, finish_reason=FINISH_TO[reply.finish])
    if reply.tool_calls:
        msg = out["choices"][0]["message"]
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.args)}}
                             for c in reply.tool_calls]
        msg["content"] = reply.text or None
    return out


def read_deltas(event: dict) -> list[Delta]:
    out: list[Delta] = []
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content"):
            out.append(("text", delta["content"]))
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") or {}
            if call.get("id") or fn.get("name"):
                out.append(("call", call.get("index", 0), call.get("id", ""), fn.get("name", "")))
            if fn.get("arguments"):
                out.append(("args", call.get("index", 0), fn["arguments"]))
        if choice.get("finish_reason"):
            out.append(("finish", FINISH_FROM.get(choice["finish_reason"], "stop"), choice["finish_reason"]))
    return out


class ChunkWriter(StreamWriter):
    """Chat completion chunks for neutral deltas: role first, deltas, the finish chunk, the usage chunk, `[DONE]`."""

    def __init__(self, model: str, include_usage: bool = True) -> None:
        super().__init__(model, include_usage)
        self._id = new_id()
        self._calls: dict[Any, int] = {}      # the target's call index -> ours
        self._argued: set[int] = set()         # our calls that got arguments

    def _head(self) -> dict:
        return {"id": self._id, "object": "chat.completion.chunk", "created": int(time.time()), "model": self.model}

    def _chunk(self, delta: dict, finish: str | None = None) -> bytes:
        return encode_sse(self._head() | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def _start(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def _delta(self, d: Delta) -> bytes:
        if d[0] == "text":
            return self._chunk({"content": d[1]})
        if d[0] == "call":
            index = self._calls.setdefault(d[1], len(self._calls))
            return self._chunk({"tool_calls": [{"index": index, "id": d[2], "type": "function",
                                                "function": {"name": d[3], "arguments": ""}}]})
        self._argued.add(self._calls.get(d[1], 0))
        return self._chunk({"tool_calls": [{"index": self._calls.get(d[1], 0), "function": {"arguments": d[2]}}]})

    def _finish(self, usage: Usage) -> bytes:
        # A call of a tool without parameters streams no argument text from Claude; OpenAI's own is "{}", which
        # callers parse as JSON.
        tail = b"".join(self._chunk({"tool_calls": [{"index": i, "function": {"arguments": "{}"}}]})
                        for i in self._calls.values() if i not in self._argued)
        tail += self._chunk({}, FINISH_TO[self.finish_reason])
        if self.include_usage:
            tail += encode_sse(self._head() | {"choices": [], "usage": usage_json(usage)})
        return tail + encode_sse("[DONE]")


# ---- the adapter ------------------------------------------------------------------------------

class OpenAIChat(WireFormat):
    name = NAME
    planner_provider = NAME
    span_name = "POST /v1/chat/completions"
    forward_headers = ("openai-organization", "openai-project", "openai-beta")
    finish_from, finish_to = FINISH_FROM, FINISH_TO
    natural_finishes = ("stop", "tool_calls")
    # The key alone: upstreams differ in whitespace (`"usage": {`) and key order; the parsed event decides.
    usage_marks = (b'"usage"',)

    def tag_prompt(self, payload: dict, tag: str) -> None:
        if not tagging.first_tool(payload, tag):
            tagging.system_message(payload, tag)

    def may_carry_usage(self, event: bytes) -> bool:
        # With include_usage every chunk says `"usage":null`; those need no parse. (`"usage"` with its closing
        # quote cannot occur inside a JSON string, where a quote is escaped.)
        return b'"usage"' in event and NULL_USAGE.search(event) is None
    terminal = b"[DONE]"

    # This module's functions are the adapter's methods.
    encode_request, build_response, error_event = staticmethod(encode_request), staticmethod(build_response), \
        staticmethod(error_event)
    read_chat, write_chat, read_reply, write_reply, read_deltas = (
        staticmethod(read_chat), staticmethod(write_chat), staticmethod(read_reply), staticmethod(write_reply),
        staticmethod(read_deltas))
    error_reply = staticmethod(error_reply)
    writer = ChunkWriter

    def parser_for(self, path: str) -> Parse | None:
        if path == "/v1/chat/completions":
            return parse_request
        azure = AZURE_PATH.fullmatch(path)
        return _deployment_parser(unquote(azure.group(1))) if azure else None

    def owns_path(self, path: str) -> bool:
        return True     # the registry asks it last: every path no other format claims

    def caller_wants_usage(self, conv: Conversation) -> bool:
        return not conv.stream or bool((conv.params.get("stream_options") or {}).get("include_usage"))

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return parse_request(body)

    def billable(self, conv: Conversation) -> Conversation:
        if not conv.stream:
            return conv
        # Ask for the usage chunk whatever the caller asked: a stream without usage cannot be billed.
        conv.params = {**conv.params, "stream_options": {**(conv.params.get("stream_options") or {}), "include_usage": True}}
        return conv

    def usage_of(self, body: dict, conv: Conversation | None = None) -> Usage:
        return usage_from_response(body, _write_ttl_of(conv))

    def has_usage(self, body: dict) -> bool:
        return bool(body.get("usage"))

    def stream_usage(self, conv: Conversation | None = None) -> StreamUsage:
        return StreamUsage(_write_ttl_of(conv))

    def relays(self, event: dict, include_usage: bool) -> bool:
        # The usage chunk (no choices) the gateway asked for on the caller's behalf is withheld.
        return include_usage or not event.get("usage") or bool(event.get("choices"))

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        return f"{base_url}/chat/completions" if base_url.endswith("/v1") else f"{base_url}/v1/chat/completions"


NULL_USAGE = re.compile(rb'"usage"\s*:\s*null')


# Azure OpenAI's shape (`openai.AzureOpenAI(azure_endpoint=<gateway>)`): the deployment in the path is the model
# the policy routes on; `api-version` in the query means nothing to the gateway.
AZURE_PATH = re.compile(r"/openai/deployments/([^/]+)/chat/completions")


def _deployment_parser(deployment: str) -> Parse:
    def parse(raw: bytes) -> Conversation:
        return parse_request({**load_body(raw), "model": deployment})
    return parse


def _write_ttl_of(conv: Conversation | None) -> str:
    if conv is None:
        return "30m"
    params = {**conv.params, **conv.cache_params}
    if "prompt_cache_options" not in params:
        # Anthropic-style markers (OpenRouter's Claude models): the usage gives one write count, billed
        # at the TTL of the last marker (the one that wrote the newest, and usually largest, part).
        claude = [cp.ttl for _, _, cp in conv.checkpoints() if cp.ttl in CLAUDE_TTLS]
        if claude:
            return claude[-1]
    return write_ttl(params)


WIRE = OpenAIChat()
