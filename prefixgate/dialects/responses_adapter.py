"""The Responses API as a wire format (`WireFormat`): translation to and from the neutral forms, the
stream writer that answers a translated stream in Responses events, and the adapter the gateway, SDK
wrapper, replay and lint hold. The format itself (IR, usage, response objects, events) is `responses.py`.
"""

from __future__ import annotations

import json
from typing import Any

from prefixgate.compact_json import compact
from prefixgate.dialects import tagging
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
    join_turn,
    json_or_raw,
    note_dropped,
    note_error_results,
    put,
    refuse,
)
from prefixgate.dialects.openai import BREAKPOINT, error_reply, write_ttl
from prefixgate.dialects.responses import (
    MIN_OUTPUT_TOKENS,
    NAME,
    TERMINAL_EVENTS,
    StreamUsage,
    build_response,
    encode_request,
    error_event,
    finish_reason,
    function_call_item,
    input_items,
    message_item,
    output_text,
    parse_request,
    response_object,
    usage_from_response,
    usage_json,
)
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import optional
from prefixgate.dialects.wire import Parse, WireFormat
from prefixgate.errors import RequestError, status_named
from prefixgate.ir import Conversation
from prefixgate.usage import Usage

# ---- translation through the neutral forms ------------------------------------------------------

def read_chat(body: dict) -> Chat:
    """A Responses body as a neutral chat. What only OpenAI's stored state or hosted tools can serve
    (`previous_response_id`, `conversation`, item references, hosted-tool items and tools) is refused,
    naming the field; reasoning items are opaque to every other model and are dropped with a note."""
    for name in ("previous_response_id", "conversation", "prompt"):
        if body.get(name) is not None:
            raise refuse(name, NAME)
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type", "text") != "text":
        raise refuse("text.format", NAME)
    chat = Chat([], stream=bool(body.get("stream")))
    if body.get("instructions"):
        chat.turns.append(Turn("system", [Part("text", body["instructions"])]))
    for i, item in enumerate(input_items(body)):
        _read_item(chat, item, f"input.{i}")
    for i, tool in enumerate(body.get("tools") or []):
        if tool.get("type") != "function":
            raise refuse(f"tools.{i}", NAME) if tool.get("type") is None else \
                RequestError(f"cannot translate tools.{i} (server tool {tool['type']!r}) from the {NAME} format for "
                             "this route's target", field=f"tools.{i}")
        chat.tools.append(Tool(tool.get("name", ""), tool.get("description") or "",
                               tool.get("parameters") or Tool("").schema, strict=tool.get("strict") is True))
    chat.max_tokens = body.get("max_output_tokens")
    chat.temperature, chat.top_p = optional(body, "temperature", (int, float)), optional(body, "top_p", (int, float))
    chat.user = body.get("user") or body.get("safety_identifier")
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        chat.tool_choice = choice.get("name") if choice.get("type") == "function" else None
        if choice.get("type") != "function":
            raise refuse("tool_choice", NAME)
    elif choice is not None:
        chat.tool_choice = {"required": "any"}.get(choice, choice)
    chat.cache_key = body.get("prompt_cache_key")
    chat.parallel_calls = body.get("parallel_tool_calls")
    note_dropped(chat, body, {"model", "input", "instructions", "tools", "stream", "max_output_tokens", "temperature",
                              "top_p", "user", "safety_identifier", "tool_choice", "prompt_cache_key", "text", "store",
                              "parallel_tool_calls", "prompt_cache_retention", "include", "metadata"})
    return chat


def _read_item(chat: Chat, item: dict, field: str) -> None:
    kind = item.get("type", "message")
    if kind == "message":
        role = {"developer": "system"}.get(item["role"], item["role"])
        content = item["content"]
        parts = [Part("text", content)] if isinstance(content, str) else [_read_part(p, f"{field}.content.{j}")
                                                                          for j, p in enumerate(content)]
        chat.turns.append(Turn(role, parts))
    elif kind == "function_call":
        join_turn(chat, "assistant", Part("tool_call", call_id=item["call_id"], name=item["name"],
                                          args=json_or_raw(item.get("arguments", ""))))
    elif kind == "function_call_output":
        join_turn(chat, "tool", Part("tool_result", _output_text(item["output"], f"{field}.output"), call_id=item["call_id"]))
    elif kind == "reasoning":
        chat.notes.append(f"dropped {field} (a reasoning item: only OpenAI can read it)")
    else:
        raise refuse(f"{field} ({kind} item)", NAME)


def _output_text(output: Any, field: str) -> str:
    """A function call's output as text: a string, or the text of its content parts (the other formats' tool results
    hold text; an image or file in them is refused rather than sent to the model as its JSON)."""
    if isinstance(output, str):
        return output
    if not isinstance(output, list):
        return compact(output)
    for j, p in enumerate(output):
        if not isinstance(p, dict) or p.get("type") != "input_text":
            raise refuse(f"{field}.{j} ({p.get('type') if isinstance(p, dict) else p!r} part)", NAME)
    return "\n".join(p.get("text", "") for p in output)


def _read_part(part: dict, field: str) -> Part:
    ptype = part["type"]
    if ptype in ("input_text", "output_text"):
        return Part("text", part.get("text", ""), checkpoint_of(part))
    if ptype == "refusal":
        return Part("text", part.get("refusal", ""))
    if ptype == "input_image" and isinstance(part.get("image_url"), str):
        url = part["image_url"]
        if url.startswith("data:") and ";base64," in url:
            mime, data = url[5:].split(";base64,", 1)
            return Part("image", mime=mime, data=data, checkpoint=checkpoint_of(part))
        return Part("image", url=url, checkpoint=checkpoint_of(part))
    raise refuse(f"{field} ({ptype} part)", NAME)


def write_chat(chat: Chat, model: str) -> dict:
    """A neutral chat as a Responses body. It is sent with `store: false`: the caller keeps its own history."""
    out: dict[str, Any] = {"model": model}
    system, turns = chat.leading_system()
    if system is not None:
        out["instructions"] = system
    items: list[dict] = []
    for turn in turns:
        if turn.role == "tool":
            items += [{"type": "function_call_output", "call_id": p.call_id, "output": p.text} for p in turn.parts]
            continue
        role = "developer" if turn.role == "system" else turn.role
        content = [_write_part(p, role) for p in turn.parts if p.kind in ("text", "image")]
        if content:
            items.append({"role": role, "content": content})
        items += [{"type": "function_call", "call_id": p.call_id, "name": p.name, "arguments": json.dumps(p.args)}
                  for p in turn.parts if p.kind == "tool_call"]
    out["input"] = items
    note_error_results(chat, "Responses")
    if chat.tools:
        # Said either way: the Responses API makes a tool without `strict` strict, where the caller's API did not.
        out["tools"] = [{"type": "function", "name": t.name, "description": t.description, "parameters": t.schema,
                         "strict": t.strict} for t in chat.tools]
        put(out, parallel_tool_calls=chat.parallel_calls)
    if chat.max_tokens is not None and chat.max_tokens < MIN_OUTPUT_TOKENS:
        chat.notes.append(f"max_output_tokens raised to {MIN_OUTPUT_TOKENS} from {chat.max_tokens} (the API's minimum)")
    put(out, max_output_tokens=max(chat.max_tokens, MIN_OUTPUT_TOKENS) if chat.max_tokens is not None else None,
        temperature=chat.temperature, top_p=chat.top_p, user=chat.user)
    if chat.stop:       # an agent that stops at "Observation:" would get the model's own observations
        raise RequestError("cannot translate stop sequences for this route's target (the Responses API has none)",
                           field="stop")
    if chat.tool_choice:
        out["tool_choice"] = ({"auto": "auto", "any": "required", "none": "none"}.get(chat.tool_choice)
                              or {"type": "function", "name": chat.tool_choice})
    if chat.stream:
        out["stream"] = True
    if chat.cache_key:
        out["prompt_cache_key"] = chat.cache_key
    out["store"] = False
    return out


def _write_part(part: Part, role: str) -> dict:
    if part.kind == "image":
        item: dict[str, Any] = {"type": "input_image", "image_url": part.url or f"data:{part.mime};base64,{part.data}"}
    else:
        item = {"type": "output_text" if role == "assistant" else "input_text", "text": part.text}
    if part.checkpoint is not None and role != "assistant":
        item["prompt_cache_breakpoint"] = dict(BREAKPOINT)
    return item


FINISH_TO = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "content_filter": "content_filter"}


def read_reply(body: dict) -> Reply:
    calls = [ToolCall(i.get("call_id", ""), i.get("name", ""), json_or_raw(i.get("arguments") or ""))
             for i in body.get("output") or [] if i.get("type") == "function_call"]
    return Reply(output_text(body), usage_from_response(body), finish_reason(body), calls, body.get("id"), body.get("status"))


def write_reply(reply: Reply, model: str) -> dict:
    output = [message_item(reply.text)] if reply.text or not reply.tool_calls else []
    output += [function_call_item(c.name, json.dumps(c.args), call_id=c.id) for c in reply.tool_calls]
    incomplete = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(reply.finish)
    return response_object(model, output, reply.usage, status="incomplete" if incomplete else "completed",
                           incomplete_reason=incomplete)


def read_deltas(event: dict) -> list[Delta]:
    kind = event.get("type")
    if kind == "response.output_text.delta":
        return [("text", event.get("delta", ""))]
    if kind == "response.output_item.added" and (event.get("item") or {}).get("type") == "function_call":
        item = event["item"]
        return [("call", event.get("output_index", 0), item.get("call_id", ""), item.get("name", ""))]
    if kind == "response.function_call_arguments.delta":
        return [("args", event.get("output_index", 0), event.get("delta", ""))]
    if kind in TERMINAL_EVENTS:
        response = event.get("response") or {}
        return [("finish", finish_reason(response), response.get("status"), response.get("id"))]
    return []


class ResponsesStreamWriter(StreamWriter):
    """Responses events for neutral deltas, each with its `sequence_number`: `response.created` and
    `.in_progress` first, a message item opened at the first text and closed before a function call
    starts, each call's argument deltas, and at the end the `.done` events and the terminal event with
    the whole response and its usage."""

    def __init__(self, model: str, include_usage: bool = True, response: dict | None = None) -> None:
        super().__init__(model, include_usage)
        # The response as it will be without its output and usage (the local engine passes the echoed settings).
        self.response = response or response_object(model, [], None)
        self.output: list[dict] = []
        self.seq = 0
        self._text: list[str] | None = None        # the open message item's text pieces
        self._calls: dict[Any, int] = {}            # the source's call index -> our output index

    def keep_id(self, answer_id: str) -> None:
        self.response = {**self.response, "id": answer_id}

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return encode_sse(data, kind)

    def _start(self) -> bytes:
        pending = {**self.response, "status": "in_progress", "completed_at": None, "output": [], "usage": None}
        return self._event("response.created", response=pending) + self._event("response.in_progress", response=pending)

    def _delta(self, d: Delta) -> bytes:
        out = b""
        if d[0] == "text":
            if self._text is None:
                out += self._open_message()
            self._text.append(d[1])     # type: ignore[union-attr]
            item = self.output[-1]
            return out + self._event("response.output_text.delta", item_id=item["id"], output_index=len(self.output) - 1,
                                     content_index=0, delta=d[1], logprobs=[])
        out += self._close_message()
        if d[0] == "call":
            self.output.append(function_call_item(d[3], "", call_id=d[2] or None))
            self._calls[d[1]] = len(self.output) - 1
            item = self.output[-1]
            return out + self._event("response.output_item.added", output_index=len(self.output) - 1,
                                     item={**item, "status": "in_progress"})
        index = self._calls.get(d[1], len(self.output) - 1)
        self.output[index]["arguments"] += d[2]
        return out + self._event("response.function_call_arguments.delta", item_id=self.output[index]["id"],
                                 output_index=index, delta=d[2])

    def _open_message(self) -> bytes:
        self._text = []
        self.output.append(message_item(""))
        item, index = self.output[-1], len(self.output) - 1
        return (self._event("response.output_item.added", output_index=index,
                            item={**item, "status": "in_progress", "content": []})
                + self._event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                              part={"type": "output_text", "text": "", "annotations": [], "logprobs": []}))

    def _close_message(self) -> bytes:
        if self._text is None:
            return b""
        text, self._text = "".join(self._text), None
        index = next(i for i in range(len(self.output) - 1, -1, -1) if self.output[i]["type"] == "message")
        item = self.output[index] = message_item(text, id=self.output[index]["id"])
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return (self._event("response.output_text.done", **where, text=text, logprobs=[])
                + self._event("response.content_part.done", **where, part=item["content"][0])
                + self._event("response.output_item.done", output_index=index, item=item))

    def _finish(self, usage: Usage) -> bytes:
        out = self._close_message()
        for index in self._calls.values():
            item = self.output[index]
            item["arguments"] = item["arguments"] or "{}"       # a tool without parameters, from Claude: no argument text
            out += self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                               name=item["name"], arguments=item["arguments"])
            out += self._event("response.output_item.done", output_index=index, item=item)
        incomplete = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(self.finish_reason)
        status = "incomplete" if incomplete else "completed"
        self.response = {**self.response, "status": status, "output": self.output, "usage": usage_json(usage),
                         "incomplete_details": {"reason": incomplete} if incomplete else None}
        return out + self._event(f"response.{status}", response=self.response)


# ---- the adapter ------------------------------------------------------------------------------

class ResponsesDiagnosis(MissDiagnosis):
    """OpenAI Responses (GPT-5.6+, the models that take explicit caching options):
    `prompt_cache_options.comparison_response_id` on continuing turns; the answer's `prompt_cache_diagnostics`."""

    per_model = True

    def fields(self, previous: str | None, sent: Conversation) -> dict[str, Any]:
        if previous is None:
            return {}
        options = sent.cache_params.get("prompt_cache_options") or sent.params.get("prompt_cache_options") or {}
        return {"prompt_cache_options": {**options, "comparison_response_id": previous}}

    def callers_own(self, params: dict[str, Any]) -> bool:
        options = params.get("prompt_cache_options")
        return isinstance(options, dict) and "comparison_response_id" in options

    def answer(self, data: dict) -> dict | None:
        response = data.get("response") if isinstance(data.get("response"), dict) else data
        if response.get("object") != "response" or response.get("status") in ("in_progress", "queued"):
            return None
        return response

    def verdict(self, answer: dict) -> ProviderVerdict | None:
        diag = answer.get("prompt_cache_diagnostics")
        if not isinstance(diag, dict):
            return None
        if diag.get("type") == "cache_miss":
            tokens = diag.get("cache_missed_tokens")
            return ProviderVerdict(str(diag.get("reason", "unavailable")), tokens if isinstance(tokens, int) else None)
        return ProviderVerdict(str(diag.get("type", "unavailable")), None)


# Azure OpenAI's Responses paths: `openai.AzureOpenAI(azure_endpoint=<gateway>)`'s (`api-version` in the query, which
# means nothing to the gateway) and an OpenAI client's on Azure's v1 base URL. The body's `model` is the deployment.
AZURE_PATHS = ("/openai/responses", "/openai/v1/responses")


class OpenAIResponses(WireFormat):
    miss_diagnosis = ResponsesDiagnosis()
    name = NAME
    planner_provider = "openai"
    span_name = "POST /v1/responses"
    forward_headers = ("openai-organization", "openai-project", "openai-beta")
    finish_from = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "content_filter": "content_filter"}
    natural_finishes = ("completed",)      # the response object's status: not incomplete, failed or cancelled
    finish_to = FINISH_TO
    # Only the terminal events carry usage; their type names appear in their `event:` line and payload.
    # `terminal` is the usual one; `ends_stream` also ends on `response.incomplete` and `response.failed`.
    usage_marks = tuple(kind.encode() for kind in TERMINAL_EVENTS)
    terminal = b'"type":"response.completed"'
    # Its id and owner are known from the first event: a background stream is cancelled, or resumed after a
    # hang-up, by that id before the stream ends.
    stored_mark = b'"type":"response.created"'

    # This module's functions are the adapter's methods.
    encode_request, build_response, error_event = staticmethod(encode_request), staticmethod(build_response), \
        staticmethod(error_event)
    read_chat, write_chat, read_reply, write_reply, read_deltas = (
        staticmethod(read_chat), staticmethod(write_chat), staticmethod(read_reply), staticmethod(write_reply),
        staticmethod(read_deltas))
    error_reply = staticmethod(error_reply)     # Chat Completions' error body and headers
    writer = ResponsesStreamWriter

    def tag_prompt(self, payload: dict, tag: str) -> None:
        if not tagging.first_tool(payload, tag):
            payload["instructions"] = f"{tag}\n{payload['instructions']}" if payload.get("instructions") else tag

    def parser_for(self, path: str) -> Parse | None:
        return parse_request if path in ("/v1/responses", *AZURE_PATHS) else None

    def owns_path(self, path: str) -> bool:
        return path.startswith(("/v1/responses", *AZURE_PATHS))

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return parse_request(body)

    def usage_of(self, body: dict, conv: Conversation | None = None) -> Usage:
        return usage_from_response(body, _write_ttl_of(conv))

    def has_usage(self, body: dict) -> bool:
        return bool(body.get("usage"))

    def stream_usage(self, conv: Conversation | None = None) -> StreamUsage:
        return StreamUsage(_write_ttl_of(conv))

    def stored_id(self, body: dict) -> str | None:
        response = body["response"] if isinstance(body.get("response"), dict) else body
        if response.get("object") != "response" or response.get("store") is False:
            return None
        return response.get("id") if isinstance(response.get("id"), str) else None

    def chained_id(self, conv: Conversation) -> str | None:
        found = conv.params.get("previous_response_id")
        return found if isinstance(found, str) else None

    def chain_not_found(self, chained: str) -> RequestError:
        # OpenAI's: a 400 naming the field, with its own code (clients that recover from it match the code).
        return RequestError(f"Previous response with id '{chained}' not found.", field="previous_response_id",
                            code="previous_response_not_found")

    def stream_error(self, event: dict) -> str | None:
        if event.get("type") == "error":
            return str(event.get("message", "stream error"))
        if event.get("type") == "response.failed":
            return str(((event.get("response") or {}).get("error") or {}).get("message", "response failed"))
        return None

    def stream_error_status(self, event: dict) -> int | None:
        if event.get("type") == "response.failed":     # its `response.error`, as a whole answer's error is read
            return super().stream_error_status(event.get("response") or {})
        return status_named(event.get("code")) if event.get("type") == "error" else None

    def ends_stream(self, event: dict) -> bool:
        return event.get("type") in TERMINAL_EVENTS

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        return f"{base_url}/responses" if base_url.endswith("/v1") else f"{base_url}/v1/responses"


def _write_ttl_of(conv: Conversation | None) -> str:
    return write_ttl({**conv.params, **conv.cache_params}) if conv is not None else "30m"


WIRE = OpenAIResponses()
