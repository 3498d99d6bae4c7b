"""The local engine's `/v1/responses`: the Responses API over the chat front end.

The subset a small local model can honour: text input and output (instructions, messages, and function
call items rendered as text), `store: true` keeping responses in a bounded in-memory store so
`previous_response_id`, GET and DELETE work, streaming with the full event sequence. Tools, non-text
parts and the like are refused with a 400 naming the field; reasoning items from another model are
opaque to this one and are left out of its prompt.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from prefixgate.dialects import openai as chat_dialect
from prefixgate.dialects import responses as rs
from prefixgate.dialects.responses_adapter import ResponsesStreamWriter
from prefixgate.dialects.sse import event_json
from prefixgate.errors import RequestError
from prefixgate.local_backend.frontend import Frontend
from prefixgate.providers.response_store import ResponseStore, StoredResponse

MAX_STORED = 1000
_UNSUPPORTED = ("tools", "text", "reasoning", "background", "conversation", "prompt")


class ResponsesAPI:
    def __init__(self, frontend: Frontend, store: ResponseStore | None = None) -> None:
        self.frontend = frontend
        self.store = store or ResponseStore(MAX_STORED)

    async def create(self, body: Any, tenant: str = "local") -> dict | AsyncIterator[bytes]:
        conv = rs.parse_request(body if isinstance(body, dict) else {})
        for name in _UNSUPPORTED:
            if body.get(name) not in (None, [], {}, False) and not (name == "text" and body[name] == {"format": {"type": "text"}}):
                raise RequestError(f"{name}: not supported by the local engine", field=name)
        previous = body.get("previous_response_id")
        context = self.store.get(tenant, previous, "previous_response_id").conversation if previous else []
        new_input = rs.input_items(body)
        messages = chat_messages(body.get("instructions"), [*context, *new_input])
        chat = {"model": self.frontend.model, "messages": messages, "max_tokens": body.get("max_output_tokens"),
                "temperature": body.get("temperature"), "top_p": body.get("top_p"), "stream": conv.stream,
                "stream_options": {"include_usage": True} if conv.stream else None}
        answer = await self.frontend.serve({k: v for k, v in chat.items() if v is not None}, chat=True)
        pending = rs.response_object(self.frontend.model, [], None, request={**body, "model": self.frontend.model})
        keep = body.get("store", True) is not False
        if isinstance(answer, dict):
            usage = chat_dialect.usage_from_response(answer)
            choice = answer["choices"][0]
            truncated = choice.get("finish_reason") == "length"
            response = {**pending, "output": [rs.message_item(choice["message"]["content"] or "")],
                        "usage": rs.usage_json(usage), "status": "incomplete" if truncated else "completed",
                        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None}
            if keep:
                self.store.put(tenant, StoredResponse(response, context, new_input))
            return response
        writer = ResponsesStreamWriter(self.frontend.model, response=pending)
        return self._events(answer, writer, context, new_input, tenant if keep else None)

    async def _events(self, chunks: AsyncIterator[bytes], writer: ResponsesStreamWriter, context: list[dict],
                      new_input: list[dict], tenant: str | None) -> AsyncIterator[bytes]:
        usage = chat_dialect.StreamUsage()
        async for raw in chunks:
            chunk = event_json(raw)
            if chunk is None:
                continue
            if "error" in chunk:
                err = chunk["error"]
                yield rs.error_event(RequestError(err.get("message", "error"), field=err.get("param")))
                return
            usage.feed(chunk)
            text = "".join((choice.get("delta") or {}).get("content") or "" for choice in chunk.get("choices") or [])
            if text:
                yield writer.write([("text", text)])
        yield writer.write([("finish", "length" if usage.finish_reason == "length" else "stop")])
        yield writer.finish(usage.usage)
        if tenant is not None:
            self.store.put(tenant, StoredResponse(writer.response, context, new_input))


def chat_messages(instructions: str | None, items: list[dict]) -> list[dict[str, str]]:
    """The conversation as chat messages for the model's template; function calls and their outputs as text."""
    out = [{"role": "system", "content": instructions}] if instructions else []
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            role = "system" if item["role"] == "developer" else item["role"]
            out.append({"role": role, "content": _text(item["content"], f"input.{i}.content")})
        elif kind == "function_call":
            out.append({"role": "assistant", "content": f"Call {item['name']}({item.get('arguments', '')})"})
        elif kind == "function_call_output":
            output = item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
            out.append({"role": "user", "content": f"Result of {item['call_id']}: {output}"})
        elif kind != "reasoning":
            raise RequestError(f"input.{i}.type: {kind!r} items are not supported by the local engine",
                               field=f"input.{i}.type")
    return out


def _text(content: str | list, field: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(content):
        if part.get("type") not in ("input_text", "output_text"):
            raise RequestError(f"{field}.{j}.type: only text parts are supported by the local engine",
                               field=f"{field}.{j}.type")
        texts.append(part["text"])
    return "".join(texts)
