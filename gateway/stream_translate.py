"""Cross-dialect streaming: a target's SSE events, re-emitted one by one as the caller's SSE events.

A reader turns each target event into neutral deltas (text, tool-call start, tool-call argument
fragment, finish); a writer turns deltas into the caller's events as they arrive, so the caller's
time to first token is the target's. Usage comes from the target dialect's `StreamUsage` and goes out
in the caller's final event (Anthropic `message_delta`, OpenAI's usage chunk, Gemini's last chunk).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.dialects.sse import encode_sse
from prefixgate.gateway.replies import FINISH_FROM, FINISH_TO
from prefixgate.usage import Usage

Delta = tuple  # ("text", str) | ("call", index, id, name) | ("args", index, str) | ("finish", reason)


def read_deltas(dialect: str, event: dict) -> list[Delta]:
    out: list[Delta] = []
    if dialect == "openai":
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
                out.append(("finish", FINISH_FROM["openai"].get(choice["finish_reason"], "stop")))
    elif dialect == "anthropic":
        etype = event.get("type")
        if etype == "content_block_start" and (event.get("content_block") or {}).get("type") == "tool_use":
            block = event["content_block"]
            out.append(("call", event.get("index", 0), block.get("id", ""), block.get("name", "")))
        elif etype == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                out.append(("text", delta.get("text", "")))
            elif delta.get("type") == "input_json_delta" and delta.get("partial_json"):
                out.append(("args", event.get("index", 0), delta["partial_json"]))
        elif etype == "message_delta" and (event.get("delta") or {}).get("stop_reason"):
            out.append(("finish", FINISH_FROM["anthropic"].get(event["delta"]["stop_reason"], "stop")))
    else:
        for cand in event.get("candidates") or []:
            for i, part in enumerate((cand.get("content") or {}).get("parts") or []):
                if "text" in part and not part.get("thought") and part["text"]:
                    out.append(("text", part["text"]))
                elif "functionCall" in part:
                    call = part["functionCall"]
                    out.append(("call", i, call.get("id") or f"call_{i}", call.get("name", "")))
                    out.append(("args", i, json.dumps(call.get("args") or {})))
            if cand.get("finishReason"):
                calls = any(d[0] == "call" for d in out)
                out.append(("finish", "tool_calls" if calls else FINISH_FROM["gemini"].get(cand["finishReason"], "stop")))
    return out


class StreamWriter:
    """The caller's events for a stream of neutral deltas; `finish` closes the stream with usage."""

    def __init__(self, dialect: str, model: str, include_usage: bool = True) -> None:
        self.dialect, self.model, self.include_usage = dialect, model, include_usage
        self.started = False
        self.finish_reason = "stop"
        self._block: tuple[str, Any] | None = None   # anthropic: the open content block (kind, source index)
        self._index = -1
        self._calls: dict[Any, dict] = {}             # gemini: tool calls buffered until complete
        self._oa_calls: dict[Any, int] = {}
        self._id = {"openai": "chatcmpl-", "anthropic": "msg_", "gemini": ""}[dialect] + uuid.uuid4().hex[:24]

    def write(self, deltas: list[Delta]) -> bytes:
        out = []
        for d in deltas:
            if d[0] == "finish":
                self.finish_reason = d[1]
                continue
            if not self.started:
                out.append(self._start())
            out.append(getattr(self, f"_{self.dialect}")(d))
        return b"".join(out)

    def finish(self, usage: Usage | None) -> bytes:
        usage = usage or Usage()
        head = b"" if self.started else self._start()
        reason = FINISH_TO[self.dialect][self.finish_reason]
        if self.dialect == "openai":
            tail = self._oa_chunk({}, reason)
            if self.include_usage:
                tail += encode_sse(self._oa_head() | {"choices": [], "usage": oa.usage_json(usage)})
            return head + tail + encode_sse("[DONE]")
        if self.dialect == "anthropic":
            u = an.usage_json(usage)
            close = self._an_close()
            delta = {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
                     "usage": {k: u[k] for k in ("input_tokens", "cache_creation_input_tokens",
                                                 "cache_read_input_tokens", "output_tokens")}}
            return head + close + _an(delta) + _an({"type": "message_stop"})
        parts = [{"functionCall": {"id": c["id"], "name": c["name"], "args": _json(c["args"])}}
                 for c in self._calls.values()] or [{"text": ""}]
        chunk = {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": reason, "index": 0}],
                 "usageMetadata": ge.usage_json(usage), "modelVersion": self.model, "responseId": self._id}
        return head + encode_sse(chunk)

    def _start(self) -> bytes:
        self.started = True
        if self.dialect == "openai":
            return self._oa_chunk({"role": "assistant", "content": ""})
        if self.dialect == "anthropic":
            message = {"id": self._id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                       "stop_reason": None, "stop_sequence": None, "usage": an.usage_json(Usage())}
            return _an({"type": "message_start", "message": message})
        return b""

    # -- openai
    def _oa_head(self) -> dict:
        return {"id": self._id, "object": "chat.completion.chunk", "created": int(time.time()), "model": self.model}

    def _oa_chunk(self, delta: dict, finish: str | None = None) -> bytes:
        return encode_sse(self._oa_head() | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def _openai(self, d: Delta) -> bytes:
        if d[0] == "text":
            return self._oa_chunk({"content": d[1]})
        if d[0] == "call":
            index = self._oa_calls.setdefault(d[1], len(self._oa_calls))
            return self._oa_chunk({"tool_calls": [{"index": index, "id": d[2], "type": "function",
                                                   "function": {"name": d[3], "arguments": ""}}]})
        return self._oa_chunk({"tool_calls": [{"index": self._oa_calls.get(d[1], 0), "function": {"arguments": d[2]}}]})

    # -- anthropic
    def _an_open(self, kind: str, source: Any, block: dict) -> bytes:
        close = self._an_close()
        self._index += 1
        self._block = (kind, source)
        return close + _an({"type": "content_block_start", "index": self._index, "content_block": block})

    def _an_close(self) -> bytes:
        if self._block is None:
            return b""
        self._block = None
        return _an({"type": "content_block_stop", "index": self._index})

    def _anthropic(self, d: Delta) -> bytes:
        if d[0] == "text":
            head = b"" if self._block and self._block[0] == "text" else self._an_open("text", None, {"type": "text", "text": ""})
            return head + _an({"type": "content_block_delta", "index": self._index,
                               "delta": {"type": "text_delta", "text": d[1]}})
        if d[0] == "call":
            return self._an_open("tool", d[1], {"type": "tool_use", "id": d[2], "name": d[3], "input": {}})
        return _an({"type": "content_block_delta", "index": self._index,
                    "delta": {"type": "input_json_delta", "partial_json": d[2]}})

    # -- gemini: text streams through; a function call is sent whole once its arguments are complete
    def _gemini(self, d: Delta) -> bytes:
        if d[0] == "text":
            return encode_sse({"candidates": [{"content": {"parts": [{"text": d[1]}], "role": "model"}, "index": 0}],
                               "modelVersion": self.model, "responseId": self._id})
        if d[0] == "call":
            self._calls[d[1]] = {"id": d[2], "name": d[3], "args": ""}
        else:
            self._calls.setdefault(d[1], {"id": "", "name": "", "args": ""})["args"] += d[2]
        return b""


def _an(data: dict) -> bytes:
    return encode_sse(data, data["type"])


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {"_raw": text}
