"""The Gemini Interactions API as a wire format (`WireFormat`): translation to and from the neutral forms,
the stream writer that answers a translated stream in Interactions events, and the adapter. The format
itself (IR, usage, interaction objects, events) is `interactions.py`.

What cannot be translated to another format, and is refused naming the field (a route falls over to a
target that can take it): `previous_interaction_id` (the earlier turns live at Google), agents
(`agent`, `agent_config`), `background`, `environment`, `continuation_token`, `cached_content`,
a structured `response_format`, and every tool but `function` (Google's built-in tools run at Google).
Thought steps are dropped with a note (only Gemini can read their signatures).
"""

from __future__ import annotations

import json
from typing import Any

from prefixgate.compact_json import compact
from prefixgate.dialects.interactions import (
    COMPLETED,
    CONTENT_KINDS,
    NAME,
    PATHS,
    StreamUsage,
    build_response,
    encode_request,
    error_event,
    error_json,
    event,
    interaction_object,
    new_id,
    output_text,
    parse_request,
    text_step,
    usage_from_response,
)
from prefixgate.dialects.neutral import (
    Chat,
    Delta,
    Part,
    Reply,
    StreamWriter,
    Tool,
    ToolCall,
    Turn,
    join_turn,
    json_or_raw,
    note_dropped,
    note_tool_options,
    put,
    refuse,
)
from prefixgate.dialects.wire import Parse, WireFormat
from prefixgate.errors import RequestError, status_named
from prefixgate.ir import Conversation
from prefixgate.usage import Usage

# Status <-> neutral finish reason (the API has no finish reason: an interaction's status says how it ended).
# google-genai's InteractionStatus: a cancelled interaction, or one over its budget, is no whole answer either.
FINISH_FROM = {"completed": "stop", "incomplete": "length", "requires_action": "tool_calls", "failed": "content_filter",
               "cancelled": "content_filter", "budget_exceeded": "content_filter"}
FINISH_TO = {"stop": "completed", "length": "incomplete", "tool_calls": "requires_action", "content_filter": "failed"}
_SERVER_STATE = ("previous_interaction_id", "agent", "agent_config", "background", "environment", "continuation_token",
                 "cached_content", "webhook_config")


# ---- translation through the neutral forms ------------------------------------------------------

def read_chat(body: dict) -> Chat:
    for name in _SERVER_STATE:
        if body.get(name) is not None and body.get(name) is not False:
            raise refuse(name, NAME)
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type", "text") == "text"):
        raise refuse("response_format", NAME)
    chat = Chat([], stream=bool(body.get("stream")))
    if body.get("system_instruction"):
        chat.turns.append(Turn("system", [Part("text", body["system_instruction"])]))
    raw = body.get("input")
    if isinstance(raw, str):
        chat.turns.append(Turn("user", [Part("text", raw)]))
    elif isinstance(raw, dict):
        chat.turns.append(Turn("user", [_read_content(raw, "input")]))
    elif isinstance(raw, list) and raw and all(isinstance(i, dict) and i.get("type") in CONTENT_KINDS for i in raw):
        chat.turns.append(Turn("user", [_read_content(c, f"input.{i}") for i, c in enumerate(raw)]))
    else:
        for i, step in enumerate(raw or []):
            _read_step(chat, step, f"input.{i}")
    for i, tool in enumerate(body.get("tools") or []):
        if tool.get("type") != "function":
            raise RequestError(f"cannot translate tools.{i} (Google's built-in tool {tool.get('type')!r}) from the "
                               f"{NAME} format for this route's target", field=f"tools.{i}")
        chat.tools.append(Tool(tool.get("name", ""), tool.get("description") or "",
                               tool.get("parameters") or Tool("").schema))
    gen = body.get("generation_config") or {}
    chat.max_tokens, chat.temperature, chat.top_p = gen.get("max_output_tokens"), gen.get("temperature"), gen.get("top_p")
    chat.stop = list(gen.get("stop_sequences") or [])
    choice = gen.get("tool_choice")
    if isinstance(choice, dict):
        allowed = (choice.get("allowed_tools") or {}).get("tools") or []
        if len(allowed) != 1:
            raise refuse("generation_config.tool_choice.allowed_tools", NAME)
        chat.tool_choice = allowed[0]
    elif choice in ("auto", "any", "none"):
        chat.tool_choice = choice
    elif choice is not None:
        raise refuse("generation_config.tool_choice", NAME)
    dropped = sorted(set(gen) - {"max_output_tokens", "temperature", "top_p", "stop_sequences", "tool_choice"})
    chat.notes += [f"dropped generation_config.{k} (no equivalent in the target format)" for k in dropped]
    note_dropped(chat, body, {"model", "input", "system_instruction", "tools", "generation_config", "stream", "store",
                              "labels", "service_tier", "safety_settings", "response_format", *_SERVER_STATE})
    return chat


def _read_step(chat: Chat, step: dict, field: str) -> None:
    kind = step.get("type") or {"user": "user_input", "model": "model_output"}.get(step.get("role", ""))
    if kind in ("user_input", "model_output"):
        content = step.get("content") or []
        parts = [Part("text", content)] if isinstance(content, str) else \
            [_read_content(c, f"{field}.content.{j}") for j, c in enumerate(content)]
        chat.turns.append(Turn("user" if kind == "user_input" else "assistant", parts))
    elif kind == "function_call":
        join_turn(chat, "assistant", Part("tool_call", call_id=step.get("id", ""), name=step.get("name", ""),
                                          args=step.get("arguments") or {}))
    elif kind == "function_result":
        result = step.get("result")
        text = result if isinstance(result, str) else compact(result)
        join_turn(chat, "tool", Part("tool_result", text, call_id=step.get("call_id", ""), name=step.get("name") or "",
                                     is_error=bool(step.get("is_error"))))
    elif kind == "thought":
        chat.notes.append(f"dropped {field} (a thought step: only Gemini can read its signature)")
    else:
        raise refuse(f"{field} ({kind} step)", NAME)


def _read_content(item: dict, field: str) -> Part:
    kind = item.get("type", "text")
    if kind == "text":
        return Part("text", item.get("text", ""))
    if kind == "image":
        return Part("image", mime=item.get("mime_type", ""), data=item.get("data", ""), url=item.get("uri", ""))
    raise refuse(f"{field} ({kind} content)", NAME)


def write_chat(chat: Chat, model: str) -> dict:
    """A neutral chat as an Interactions body, sent with `store: false`: the caller keeps its own history."""
    out: dict[str, Any] = {"model": model}
    system, turns = chat.leading_system()
    if system is not None:
        out["system_instruction"] = system
    names = chat.call_names()
    steps: list[dict] = []
    for turn in turns:
        if turn.role == "tool":
            steps += [{"type": "function_result", "call_id": p.call_id, "name": p.name or names.get(p.call_id, ""),
                       "result": p.text, **({"is_error": True} if p.is_error else {})} for p in turn.parts]
            continue
        content = [_write_content(p) for p in turn.parts if p.kind in ("text", "image")]
        if turn.role == "system":
            chat.notes.append("a system message after the first turn went as user input (the API has one instruction)")
        if content:
            steps.append({"type": "model_output" if turn.role == "assistant" else "user_input", "content": content})
        steps += [{"type": "function_call", "id": p.call_id, "name": p.name, "arguments": p.args or {}}
                  for p in turn.parts if p.kind == "tool_call"]
    out["input"] = steps
    note_tool_options(chat, "the Interactions API")
    if chat.tools:
        out["tools"] = [{"type": "function", "name": t.name, "description": t.description, "parameters": t.schema}
                        for t in chat.tools]
    gen: dict[str, Any] = {}
    put(gen, max_output_tokens=chat.max_tokens, temperature=chat.temperature, top_p=chat.top_p,
        stop_sequences=chat.stop or None, tool_choice=_tool_choice(chat.tool_choice))
    if gen:
        out["generation_config"] = gen
    if chat.stream:
        out["stream"] = True
    if any(p.checkpoint for t in chat.turns for p in t.parts) or chat.auto_cache or chat.cache_key:
        chat.notes.append("checkpoints -> Gemini implicit caching of the same prefix (the Interactions API has no markers)")
    out["store"] = False
    return out


def _tool_choice(choice: str | None) -> Any:
    if choice is None or choice in ("auto", "any", "none"):
        return choice
    return {"allowed_tools": {"mode": "any", "tools": [choice]}}


def _write_content(part: Part) -> dict:
    if part.kind == "image":
        return {"type": "image", "uri": part.url, **({"mime_type": part.mime} if part.mime else {})} if part.url \
            else {"type": "image", "data": part.data, "mime_type": part.mime}
    return {"type": "text", "text": part.text}


def read_reply(body: dict) -> Reply:
    steps = body.get("steps") or []
    start = max((i for i, s in enumerate(steps) if s.get("type") == "user_input"), default=-1) + 1
    calls = [ToolCall(s.get("id", ""), s.get("name", ""), s.get("arguments") or {})
             for s in steps[start:] if s.get("type") == "function_call"]
    finish = "tool_calls" if calls else FINISH_FROM.get(body.get("status", ""), "stop")
    return Reply(output_text(body), usage_from_response(body), finish, calls, body.get("id"), body.get("status"))


def write_reply(reply: Reply, model: str) -> dict:
    steps = [text_step(reply.text)] if reply.text or not reply.tool_calls else []
    steps += [{"type": "function_call", "id": c.id, "name": c.name, "arguments": c.args} for c in reply.tool_calls]
    return interaction_object(model, steps, reply.usage, status=FINISH_TO[reply.finish])


def read_deltas(data: dict) -> list[Delta]:
    kind = data.get("event_type")
    if kind == "step.start" and (data.get("step") or {}).get("type") == "function_call":
        step, index = data["step"], data.get("index", 0)
        out: list[Delta] = [("call", index, step.get("id", ""), step.get("name", ""))]
        if step.get("arguments"):
            out.append(("args", index, json.dumps(step["arguments"])))
        return out
    if kind == "step.start" and (data.get("step") or {}).get("type") == "model_output":
        return [("text", c["text"]) for c in data["step"].get("content") or [] if c.get("type") == "text" and c.get("text")]
    if kind == "step.delta":
        delta = data.get("delta") or {}
        if delta.get("type") == "text" and delta.get("text"):
            return [("text", delta["text"])]
        if delta.get("type") == "arguments_delta":
            return [("args", data.get("index", 0), delta.get("arguments") or "")]
    if kind == COMPLETED:
        interaction = data.get("interaction") or {}
        calls = any(s.get("type") == "function_call" for s in interaction.get("steps") or [])
        status = interaction.get("status", "")
        return [("finish", "tool_calls" if calls else FINISH_FROM.get(status, "stop"), status, interaction.get("id"))]
    return []


class InteractionWriter(StreamWriter):
    """Interactions events for neutral deltas: `interaction.created`, a model_output step opened at the first
    text, a function_call step per call (its arguments as `arguments_delta`s), each step stopped before the
    next starts, and `interaction.completed` with the steps, status and usage."""

    def __init__(self, model: str, include_usage: bool = True) -> None:
        super().__init__(model, include_usage)
        self.id = new_id()
        self.steps: list[dict] = []
        self.seq = 0
        self._open: int | None = None          # the index of the step being streamed
        self._args: dict[int, str] = {}        # a call step's index -> its arguments so far
        self._calls: dict[Any, int] = {}       # the source's call index -> our step index

    def keep_id(self, answer_id: str) -> None:
        self.id = answer_id

    def _event(self, data: dict) -> bytes:
        self.seq += 1
        return event(data, self.seq)

    def _start(self) -> bytes:
        return self._event({"event_type": "interaction.created", "interaction": {
            "id": self.id, "status": "in_progress", "model": self.model}})

    def _delta(self, d: Delta) -> bytes:
        out = b""
        if d[0] == "text":
            if self._open is None or self.steps[self._open]["type"] != "model_output":
                out += self._stop() + self._begin({"type": "model_output", "content": []})
                self.steps[-1]["content"].append({"type": "text", "text": ""})
            self.steps[self._open]["content"][0]["text"] += d[1]       # type: ignore[index]
            return out + self._event({"event_type": "step.delta", "index": self._open,
                                      "delta": {"type": "text", "text": d[1]}})
        if d[0] == "call":
            out += self._stop() + self._begin({"type": "function_call", "id": d[2] or new_id(), "name": d[3],
                                               "arguments": {}})
            self._calls[d[1]] = self._open                              # type: ignore[assignment]
            self._args[self._open] = ""                                 # type: ignore[index]
            return out
        index = self._calls.get(d[1], self._open if self._open is not None else 0)
        self._args[index] = self._args.get(index, "") + d[2]
        return out + self._event({"event_type": "step.delta", "index": index,
                                  "delta": {"type": "arguments_delta", "arguments": d[2]}})

    def _begin(self, step: dict) -> bytes:
        self.steps.append(step)
        self._open = len(self.steps) - 1
        return self._event({"event_type": "step.start", "index": self._open, "step": step})

    def _stop(self) -> bytes:
        if self._open is None:
            return b""
        index, self._open = self._open, None
        return self._event({"event_type": "step.stop", "index": index})

    def _finish(self, usage: Usage) -> bytes:
        out = self._stop()
        for index, args in self._args.items():
            self.steps[index]["arguments"] = json_or_raw(args)
        status = "requires_action" if self._args else FINISH_TO[self.finish_reason]
        return out + self._event({"event_type": COMPLETED, "interaction": interaction_object(
            self.model, self.steps, usage, status=status, id=self.id)})


# ---- the adapter ------------------------------------------------------------------------------

class GeminiInteractions(WireFormat):
    name = NAME
    planner_provider = "gemini"
    span_name = "POST /{version}/interactions"
    finish_from, finish_to = FINISH_FROM, FINISH_TO
    natural_finishes = ("completed", "requires_action")     # the interaction's status: not incomplete or failed
    usage_marks = (COMPLETED.encode(), b"interaction.status_update")
    terminal = COMPLETED.encode()
    stored_kind = "interaction"

    # This module's functions are the adapter's methods.
    encode_request, build_response, error_event = staticmethod(encode_request), staticmethod(build_response), \
        staticmethod(error_event)
    read_chat, write_chat, read_reply, write_reply, read_deltas = (
        staticmethod(read_chat), staticmethod(write_chat), staticmethod(read_reply), staticmethod(write_reply),
        staticmethod(read_deltas))
    writer = InteractionWriter

    def parser_for(self, path: str) -> Parse | None:
        return parse_request if path in PATHS else None

    def owns_path(self, path: str) -> bool:
        return path.startswith(PATHS)

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return parse_request(body)

    def usage_of(self, body: dict, conv: Conversation | None = None) -> Usage:
        return usage_from_response(body)

    def has_usage(self, body: dict) -> bool:
        return bool(body.get("usage"))

    def stream_usage(self, conv: Conversation | None = None) -> StreamUsage:
        return StreamUsage()

    def stored_id(self, body: dict) -> str | None:
        interaction = body["interaction"] if isinstance(body.get("interaction"), dict) else body
        found = interaction.get("id")
        return found if isinstance(found, str) and found else None

    def chained_id(self, conv: Conversation) -> str | None:
        found = conv.params.get("previous_interaction_id")
        return found if isinstance(found, str) else None

    def chain_not_found(self, chained: str) -> RequestError:
        # As the API answers for an interaction it does not hold (a GET, or continuing it).
        return RequestError(f"Interaction '{chained}' not found.", status=404, kind="not_found")

    def error_body(self, err: RequestError) -> dict:
        return error_json(err)

    def stream_error(self, data: dict) -> str | None:
        if data.get("event_type") == "error":
            return str((data.get("error") or {}).get("message", "stream error"))
        return None

    def stream_error_status(self, data: dict) -> int | None:
        code = (data.get("error") or {}).get("code")     # Google's status, lower case: "resource_exhausted"
        return status_named(code.upper()) if isinstance(code, str) else super().stream_error_status(data)

    def ends_stream(self, data: dict) -> bool:
        return data.get("event_type") in (COMPLETED, "error")

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        # google-genai 3.6.1 calls v1 (GA since June 2026); a base URL that names a version keeps it.
        return f"{base_url}/interactions" if base_url.endswith(("/v1", "/v1beta")) else f"{base_url}/v1/interactions"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}


WIRE = GeminiInteractions()
