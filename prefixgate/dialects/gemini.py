"""Gemini generateContent (`POST /v1beta/models/{model}:generateContent`) <-> IR, responses, streaming, usage.

Prefix order is system instruction, tools, contents. Caching is implicit, or explicit through a
`cachedContent` resource that then must hold the system instruction, tools and tool config.
The REST API accepts camelCase and snake_case field names; we keep whichever the caller sent.
`promptTokenCount` includes `cachedContentTokenCount`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from prefixgate.dialects.body import DROP, json_text, merge_native, rebuild_body, split_body
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import expect, load_body
from prefixgate.errors import RequestError, error_body
from prefixgate.ir import Block, BlockKind, Conversation, Segment
from prefixgate.usage import Usage

SYSTEM_KEYS = ("systemInstruction", "system_instruction")
PREFIX_FIELDS = {"contents", "tools", *SYSTEM_KEYS}
ROLES = ("user", "model", "function")
_KINDS: dict[str, BlockKind] = {
    "text": "text", "inlineData": "image", "inline_data": "image", "fileData": "file", "file_data": "file",
    "functionCall": "tool_call", "function_call": "tool_call",
    "functionResponse": "tool_result", "function_response": "tool_result",
    "executableCode": "tool_call", "executable_code": "tool_call",
    "codeExecutionResult": "tool_result", "code_execution_result": "tool_result",
}
FINISH_REASONS = ("STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER")


# ---- requests ---------------------------------------------------------------------------------

def parse_request(body: bytes | str | dict, model: str | None = None) -> Conversation:
    """A generateContent body; the model comes from the URL path (`models/{model}:generateContent`)."""
    data = load_body(body)
    if "contents" not in data:
        raise RequestError("contents: field required", field="contents")
    contents = expect(data["contents"], list, "contents")
    if not contents:
        raise RequestError("contents: must not be empty", field="contents")
    segments: list[Segment] = []
    for key in SYSTEM_KEYS:
        if key in data:
            segments.append(_content_segment(data[key], key, default_role="system"))
    if "tools" in data:
        tools = expect(data["tools"], list, "tools")
        blocks = [Block("tool_def", expect(t, dict, f"tools.{i}"), text=json_text(t)) for i, t in enumerate(tools)]
        segments.append(Segment("tools", blocks, form="list"))
    for i, content in enumerate(contents):
        segments.append(_content_segment(content, f"contents.{i}", default_role="user"))
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation("gemini", model, segments, params=params, field_order=order)


def _content_segment(content: Any, field: str, default_role: str) -> Segment:
    expect(content, dict, field)
    role = content.get("role") or default_role
    if default_role == "system":
        role = "system"
    elif role not in ROLES:
        raise RequestError(f"{field}.role: must be one of {', '.join(ROLES)}, got {role!r}", field=f"{field}.role")
    parts = expect(content.get("parts", []), list, f"{field}.parts")
    blocks = [_part_block(p, f"{field}.parts.{j}") for j, p in enumerate(parts)]
    # Gemini's assistant role is "model"; the IR keeps the wire name (roles are per dialect).
    return Segment(role, blocks, native=content, blocks_field="parts", form="object")


def _part_block(part: Any, field: str) -> Block:
    expect(part, dict, field)
    if part.get("thought") is True:
        return Block("thinking", part, text=expect(part.get("text", ""), str, f"{field}.text"))
    kind = next((_KINDS[k] for k in part if k in _KINDS), "other")
    if kind == "text":
        text = expect(part["text"], str, f"{field}.text")
    elif kind in ("tool_call", "tool_result"):
        text = json_text(next(part[k] for k in part if k in _KINDS))
    else:
        text = ""
    return Block(kind, part, text=text)


def encode_request(conv: Conversation) -> dict:
    encoded: dict[str, Any] = {"contents": []}
    for seg in conv.segments:
        if seg.role == "tools":
            encoded["tools"] = [b.native for b in seg.blocks]
        elif seg.role == "system":
            key = next((k for k in SYSTEM_KEYS if k in conv.field_order), "systemInstruction")
            encoded[key] = encode_content(seg)
        else:
            encoded["contents"].append(encode_content(seg))
    for key in ("tools", *SYSTEM_KEYS):
        encoded.setdefault(key, DROP)
    return rebuild_body(conv, encoded)


def encode_content(seg: Segment) -> dict:
    """One Content (a turn or the system instruction) in its native shape."""
    native = seg.native if seg.native is not None else ({} if seg.role == "system" else {"role": seg.role})
    parts = [merge_native(b.native, {"text": b.text}) if b.edited else b.native for b in seg.blocks]
    return merge_native(native, {"parts": parts})


# ---- usage ------------------------------------------------------------------------------------

def parse_usage(meta: dict) -> Usage:
    """`usageMetadata`; thoughts are billed as output."""
    prompt = meta.get("promptTokenCount") or 0
    cached = meta.get("cachedContentTokenCount") or 0
    return Usage(
        uncached_input=max(prompt - cached, 0),
        cache_read=cached,
        output=(meta.get("candidatesTokenCount") or 0) + (meta.get("thoughtsTokenCount") or 0),
    )


def usage_from_response(resp: dict) -> Usage:
    return parse_usage(resp.get("usageMetadata") or {})


def usage_json(usage: Usage) -> dict:
    prompt = usage.input_total
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": usage.output,
        "totalTokenCount": prompt + usage.output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if usage.cache_read:
        out["cachedContentTokenCount"] = usage.cache_read
        out["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage.cache_read}]
    return out


class StreamUsage:
    """Usage of a streamed response: each chunk may carry `usageMetadata`; the last one is final."""

    def __init__(self) -> None:
        self._usage: Usage | None = None
        self.finish_reason: str | None = None

    def feed(self, event: dict) -> None:
        if event.get("usageMetadata"):
            self._usage = parse_usage(event["usageMetadata"])
        for cand in event.get("candidates") or []:
            self.finish_reason = cand.get("finishReason") or self.finish_reason

    @property
    def usage(self) -> Usage | None:
        return self._usage


# ---- responses --------------------------------------------------------------------------------

def build_response(
    model: str, text: str, usage: Usage, *, finish_reason: str | None = None, id: str | None = None
) -> dict:
    return {
        "candidates": [{
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": finish_reason or "STOP",
            "index": 0,
        }],
        "usageMetadata": usage_json(usage),
        "modelVersion": model,
        "responseId": id or new_id(),
    }


def stream_events(
    model: str, chunks: Iterable[str], usage: Usage, *, finish_reason: str | None = None, id: str | None = None
) -> Iterator[bytes]:
    """`alt=sse` chunks: each a GenerateContentResponse; the last carries finishReason and final usage."""
    rid = id or new_id()
    pending: str | None = None
    for text in chunks:
        if not text:
            continue
        if pending is not None:
            yield encode_sse(_chunk(model, pending, rid, None))
        pending = text
    last = _chunk(model, pending or "", rid, finish_reason or "STOP")
    last["usageMetadata"] = usage_json(usage)
    yield encode_sse(last)


def _chunk(model: str, text: str, rid: str, finish: str | None) -> dict:
    cand: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": model, "responseId": rid}


def error_event(err: RequestError) -> bytes:
    return encode_sse(error_body(err, "gemini"))


def new_id() -> str:
    return uuid.uuid4().hex[:22]
