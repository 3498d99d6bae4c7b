"""Cross-dialect responses: a target's non-streamed response body -> neutral `Reply` -> the caller's shape.

Usage is normalised by the target dialect's own parser and re-emitted by the caller's, so cached and
written tokens arrive in the fields the caller's SDK reads (OpenAI `cached_tokens`, Anthropic
`cache_read_input_tokens`, Gemini `cachedContentTokenCount`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from prefixgate.dialects import dialect as dialect_module
from prefixgate.usage import Usage

# Neutral finish reasons: stop, length, tool_calls, content_filter.
FINISH_FROM = {
    "openai": {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
               "content_filter": "content_filter"},
    "anthropic": {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                  "pause_turn": "stop", "refusal": "content_filter"},
    "gemini": {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
               "OTHER": "stop"},
}
FINISH_TO = {
    "openai": {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "content_filter": "content_filter"},
    "anthropic": {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"},
    "gemini": {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP", "content_filter": "SAFETY"},
}


@dataclass
class ToolCall:
    id: str
    name: str
    args: Any


@dataclass
class Reply:
    text: str
    usage: Usage
    finish: str = "stop"
    tool_calls: list[ToolCall] = field(default_factory=list)
    id: str | None = None


def read_reply(dialect: str, body: dict) -> Reply:
    usage = dialect_module(dialect).usage_from_response(body)
    if dialect == "openai":
        choice = (body.get("choices") or [{}])[0]
        msg = choice.get("message") or {}
        calls = [ToolCall(c.get("id", ""), (c.get("function") or {}).get("name", ""),
                          _json((c.get("function") or {}).get("arguments") or "{}"))
                 for c in msg.get("tool_calls") or []]
        return Reply(msg.get("content") or "", usage, FINISH_FROM["openai"].get(choice.get("finish_reason"), "stop"),
                     calls, body.get("id"))
    if dialect == "anthropic":
        blocks = body.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        calls = [ToolCall(b.get("id", ""), b.get("name", ""), b.get("input") or {})
                 for b in blocks if b.get("type") == "tool_use"]
        return Reply(text, usage, FINISH_FROM["anthropic"].get(body.get("stop_reason"), "stop"), calls, body.get("id"))
    cand = (body.get("candidates") or [{}])[0]
    parts = (cand.get("content") or {}).get("parts") or []
    text = "".join(p.get("text", "") for p in parts if "text" in p and not p.get("thought"))
    calls = [ToolCall(p["functionCall"].get("id") or f"call_{i}", p["functionCall"].get("name", ""),
                      p["functionCall"].get("args") or {}) for i, p in enumerate(parts) if "functionCall" in p]
    finish = "tool_calls" if calls else FINISH_FROM["gemini"].get(cand.get("finishReason"), "stop")
    return Reply(text, usage, finish, calls, body.get("responseId"))


def write_reply(dialect: str, reply: Reply, model: str) -> dict:
    out = dialect_module(dialect).build_response(model, reply.text, reply.usage,
                                                 finish_reason=FINISH_TO[dialect][reply.finish])
    if not reply.tool_calls:
        return out
    if dialect == "openai":
        msg = out["choices"][0]["message"]
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.args)}}
                             for c in reply.tool_calls]
        msg["content"] = reply.text or None
    elif dialect == "anthropic":
        out["content"] += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in reply.tool_calls]
    else:
        parts = out["candidates"][0]["content"]["parts"]
        if not reply.text:
            parts.clear()
        parts += [{"functionCall": {"id": c.id, "name": c.name, "args": c.args}} for c in reply.tool_calls]
    return out


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"_raw": text}
