"""A tool call as each provider sends it, whole and streamed (agent.py decides when): Chat Completions'
`tool_calls` with `finish_reason: tool_calls` and arguments streamed as string pieces under one `index`;
Messages' `tool_use` block with `stop_reason: tool_use` and `input_json_delta` pieces; Gemini's `functionCall`
part with `finishReason: STOP`, never split across chunks."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prefixgate.dialects import anthropic, gemini, openai
from prefixgate.dialects.neutral import Reply, ToolCall
from prefixgate.dialects.sse import encode_sse
from prefixgate.simulation.mock.agent import Call
from prefixgate.usage import Usage


def pieces(arguments: str, size: int = 12) -> list[str]:
    """The arguments in stream-sized pieces (providers cut them anywhere, mid-key included)."""
    return [arguments[i:i + size] for i in range(0, len(arguments), size)] or [""]


def _reply(call: Call, usage: Usage, id_prefix: str = "call_") -> Reply:
    return Reply("", usage, "tool_calls", [ToolCall(tool_use_id(call, id_prefix), call.name, call.args)])


def tool_use_id(call: Call, prefix: str) -> str:
    """The call's id as the provider spells it (Anthropic's `toolu_...`, OpenAI's `call_...`)."""
    return prefix + call.id.removeprefix("call_")


# ---- Chat Completions ---------------------------------------------------------------------------------------

def chat_body(model: str, call: Call, usage: Usage) -> dict:
    return openai.write_reply(_reply(call, usage), model)


def chat_events(model: str, call: Call, usage: Usage, include_usage: bool) -> Iterator[bytes]:
    head = {"id": openai.new_id(), "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "service_tier": "default", "system_fingerprint": None}
    tail = {"usage": None} if include_usage else {}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return encode_sse(head | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
                          | tail)

    yield chunk({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}],
        "refusal": None})
    for piece in pieces(call.arguments):
        yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls")
    if include_usage:
        yield encode_sse(head | {"choices": [], "usage": openai.usage_json(usage)})
    yield encode_sse("[DONE]")


# ---- Messages -----------------------------------------------------------------------------------------------

def messages_body(model: str, call: Call, usage: Usage) -> dict:
    return anthropic.write_reply(_reply(call, usage, "toolu_"), model)


def messages_events(model: str, call: Call, usage: Usage) -> Iterator[bytes]:
    def event(data: dict) -> bytes:
        return encode_sse(data, data["type"])

    start = anthropic.usage_json(Usage(usage.uncached_input, usage.cache_read, usage.cache_writes, min(usage.output, 1)))
    message = anthropic.build_response(model, "", Usage()) | {"stop_reason": None, "usage": start}
    yield event({"type": "message_start", "message": message})
    yield event({"type": "content_block_start", "index": 0,
                 "content_block": {"type": "tool_use", "id": tool_use_id(call, "toolu_"), "name": call.name,
                                   "input": {}}})
    yield event({"type": "ping"})
    for piece in pieces(call.arguments):
        yield event({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}})
    yield event({"type": "content_block_stop", "index": 0})
    final = anthropic.usage_json(usage)
    yield event({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                 "usage": {k: final[k] for k in ("input_tokens", "cache_creation_input_tokens",
                                                 "cache_read_input_tokens", "output_tokens")}})
    yield event({"type": "message_stop"})


# ---- Gemini -------------------------------------------------------------------------------------------------

def gemini_body(model: str, call: Call, usage: Usage, thoughts: int = 0, signature: str | None = None) -> dict:
    """The call as Gemini answers it; `thoughts` of the usage's output tokens were thinking; Gemini 3 signs the call
    (`thoughtSignature` on its part)."""
    out = gemini.write_reply(_reply(call, usage), model) | {"usageMetadata": gemini.usage_json(usage, thoughts)}
    if signature is not None:
        out["candidates"][0]["content"]["parts"][0]["thoughtSignature"] = signature
    return out


def gemini_events(model: str, call: Call, usage: Usage, thoughts: int = 0,
                  signature: str | None = None) -> Iterator[bytes]:
    yield encode_sse(gemini_body(model, call, usage, thoughts, signature))
