"""Gemini generateContent (`POST /v1beta/models/{model}:generateContent`) <-> IR, responses, streaming, usage.

Prefix order is system instruction, tools, contents. Caching is implicit, or explicit through a
`cachedContent` resource that then must hold the system instruction, tools and tool config.
The REST API accepts camelCase and snake_case field names; we keep whichever the caller sent (one field in both
is refused: proto_json).
`promptTokenCount` includes `cachedContentTokenCount`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from prefixgate.compact_json import compact
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
    json_or_raw,
    note_dropped,
    note_tool_options,
    put,
    refuse,
)
from prefixgate.dialects.output_limit import within_gemini_limit
from prefixgate.dialects.proto_json import camel, field, one_spelling
from prefixgate.dialects.resent import ResentBodies, element_segments, field_segment
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import expect, load_body, load_resent, optional
from prefixgate.dialects.wire import Parse, WireFormat
from prefixgate.errors import RequestError, error_body
from prefixgate.ir import Block, BlockKind, Conversation, Segment
from prefixgate.model_ids import path_model
from prefixgate.usage import Usage, checked_usage

NAME = "gemini"
SYSTEM_KEYS = ("systemInstruction", "system_instruction")
PREFIX_FIELDS = {"contents", "tools", *SYSTEM_KEYS}
ROLES = ("user", "model", "function")
BODIES = ResentBodies()     # Gemini API and Vertex bodies (one format): a chat resends its whole history each turn
_KINDS: dict[str, BlockKind] = {
    "text": "text", "inlineData": "image", "inline_data": "image", "fileData": "file", "file_data": "file",
    "functionCall": "tool_call", "function_call": "tool_call",
    "functionResponse": "tool_result", "function_response": "tool_result",
    "executableCode": "tool_call", "executable_code": "tool_call",
    "codeExecutionResult": "tool_result", "code_execution_result": "tool_result",
}
FINISH_REASONS = ("STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER")


# ---- requests ---------------------------------------------------------------------------------

def counted_request(body: bytes | str | dict) -> dict:
    """The generateContent body a Gemini API countTokens body counts: its `generateContentRequest` where it sends
    one (the way to count a system instruction and tools: ai.google.dev/api/tokens), else its own `contents`."""
    data = load_body(body)
    one_spelling(data, body if not isinstance(body, dict) else None)
    wrapped = data.get("generateContentRequest", data.get("generate_content_request"))
    if wrapped is None:
        return data
    return {k: v for k, v in expect(wrapped, dict, "generateContentRequest").items() if k != "model"}


def parse_request(body: bytes | str | dict, model: str | None = None) -> Conversation:
    """A generateContent body; the model comes from the URL path (`models/{model}:generateContent`)."""
    data, resent = load_resent(body, "contents", BODIES)
    if not isinstance(body, dict):      # a dict is a body the gateway built itself (a countTokens body's, checked)
        one_spelling(data, body)
    if "contents" not in data:
        raise RequestError("contents: field required", field="contents")
    contents = expect(data["contents"], list, "contents")
    if not contents:
        raise RequestError("contents: must not be empty", field="contents")
    segments: list[Segment] = []
    for key in SYSTEM_KEYS:
        if key in data:
            value = data[key]
            segments.append(field_segment(resent, key, value, lambda key=key, value=value: _content_segment(
                value, key, default_role="system")))
    if "tools" in data:
        tools = data["tools"]
        segments.append(field_segment(resent, "tools", tools, lambda: _tools_segment(tools)))
    segments += element_segments(resent, len(contents), lambda i: _content_segment(
        contents[i], f"contents.{i}", default_role="user"))
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation(NAME, model, segments, params=params, field_order=order, source=resent)


def _tools_segment(tools: Any) -> Segment:
    blocks = [Block("tool_def", expect(t, dict, f"tools.{i}"), text=compact(t))
              for i, t in enumerate(expect(tools, list, "tools"))]
    return Segment("tools", blocks, form="list")


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
        text = compact(next(part[k] for k in part if k in _KINDS))
    else:
        text = ""
    if kind == "file":      # Google refuses a FileData of the wrong shape (proto3 JSON: fileUri, mimeType strings)
        file_data = expect(part.get("fileData", part.get("file_data")), dict, f"{field}.fileData")
        for key in ("fileUri", "mimeType"):
            _typed(file_data, key, str, f"{field}.fileData.")
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

@checked_usage("usageMetadata")
def parse_usage(meta: dict) -> Usage:
    """`usageMetadata`; thoughts are billed as output, tool-use prompt tokens (outside `promptTokenCount`) as input."""
    prompt = meta.get("promptTokenCount") or 0
    cached = meta.get("cachedContentTokenCount") or 0
    return Usage(
        uncached_input=max(prompt - cached, 0) + (meta.get("toolUsePromptTokenCount") or 0),
        cache_read=cached,
        output=(meta.get("candidatesTokenCount") or 0) + (meta.get("thoughtsTokenCount") or 0),
        reasoning=meta.get("thoughtsTokenCount") or 0,
    )


def usage_from_response(resp: dict) -> Usage:
    # The model that ran is beside the usage (`modelVersion`, on every chunk of a stream too): a shut-down model's
    # call runs, and is billed, as the replacement Google routes it to (providers/routed.py).
    return replace(parse_usage(resp.get("usageMetadata") or {}), model=_model_version(resp))


def _model_version(event: dict) -> str:
    version = event.get("modelVersion")
    return version if isinstance(version, str) else ""


def usage_json(usage: Usage, thoughts: int = 0) -> dict:
    """`usageMetadata` for `usage`, of whose output `thoughts` tokens were thinking (`thoughtsTokenCount`)."""
    prompt = usage.input_total
    thoughts = thoughts or usage.thinking
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": usage.output - thoughts,
        "totalTokenCount": prompt + usage.output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if thoughts:
        out["thoughtsTokenCount"] = thoughts
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
            self._usage = usage_from_response(event)
        for cand in event.get("candidates") or []:
            self.finish_reason = cand.get("finishReason") or self.finish_reason

    @property
    def usage(self) -> Usage | None:
        return self._usage


# ---- responses --------------------------------------------------------------------------------

def build_response(
    model: str, text: str, usage: Usage, *, finish_reason: str | None = None, id: str | None = None, thoughts: int = 0
) -> dict:
    return {
        "candidates": [{
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": finish_reason or "STOP",
            "index": 0,
        }],
        "usageMetadata": usage_json(usage, thoughts),
        "modelVersion": model,
        "responseId": id or new_id(),
    }


def stream_events(
    model: str, chunks: Iterable[str], usage: Usage, *, finish_reason: str | None = None, id: str | None = None,
    thoughts: int = 0,
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
    last["usageMetadata"] = usage_json(usage, thoughts)
    yield encode_sse(last)


def _chunk(model: str, text: str, rid: str, finish: str | None) -> dict:
    cand: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": model, "responseId": rid}


def error_event(err: RequestError) -> bytes:
    return encode_sse(error_body(err, NAME))


def new_id() -> str:
    return uuid.uuid4().hex[:22]


# ---- translation through the neutral forms ------------------------------------------------------

def read_chat(body: dict) -> Chat:
    chat = Chat([])
    if body.get("cachedContent") or body.get("cached_content"):
        raise refuse("cachedContent (a Gemini cache only Gemini can read)", NAME)
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        chat.turns.append(Turn("system", [Part("text", p.get("text", "")) for p in system.get("parts", [])]))
    for content in body["contents"]:
        role = {"model": "assistant"}.get(content.get("role", "user"), "user")
        parts, results = [], []
        seen: dict[str, int] = {}      # calls (or answers) of each name so far in this content
        for p in content.get("parts", []):
            inline = _object(p, "inlineData", "contents.parts.")
            call = _object(p, "functionCall", "contents.parts.")
            answer = _object(p, "functionResponse", "contents.parts.")
            if "text" in p and not p.get("thought"):
                parts.append(Part("text", p["text"]))
            elif p.get("thought"):
                chat.notes.append("dropped a thought part")
            elif inline:
                parts.append(Part("image", mime=inline.get("mimeType") or inline.get("mime_type", ""),
                                  data=inline.get("data", "")))
            elif call:
                call_id = call.get("id") or _call_id_by_place(call.get("name", ""), len(chat.turns), seen)
                parts.append(Part("tool_call", call_id=call_id, name=call.get("name", ""), args=call.get("args") or {}))
            elif answer:
                resp = answer.get("response")
                call_id = answer.get("id") or _call_id_by_place(answer.get("name", ""), len(chat.turns) - 1, seen)
                results.append(Part("tool_result", json.dumps(resp) if not isinstance(resp, str) else resp,
                                    call_id=call_id, name=answer.get("name", "")))
            else:
                raise refuse(f"part with keys {sorted(p)}", NAME)
        if results:
            chat.turns.append(Turn("tool", results))
        if parts or not results:
            chat.turns.append(Turn(role, parts))
    for tool in body.get("tools") or []:
        decls = tool.get("functionDeclarations") or tool.get("function_declarations")
        if decls is None:
            raise refuse(f"tool {sorted(tool)}", NAME)
        for d in expect(decls, list, "tools.functionDeclarations"):
            expect(d, dict, "tools.functionDeclarations[]")
            chat.tools.append(Tool(d.get("name", ""), d.get("description", ""),
                                   d.get("parameters") or d.get("parametersJsonSchema") or Tool("").schema))
    gen = {camel(k): v for k, v in _object(body, "generationConfig").items()}
    chat.max_tokens = _typed(gen, "maxOutputTokens", int) or None
    chat.temperature, chat.top_p = _typed(gen, "temperature", (int, float)), _typed(gen, "topP", (int, float))
    chat.stop = [expect(s, str, "generationConfig.stopSequences[]") for s in _typed(gen, "stopSequences", list) or ()]
    _read_generation_config(chat, gen)
    chat.tool_choice = _tool_choice(_object(body, "toolConfig"), chat.tools)
    note_dropped(chat, body, {"contents", "systemInstruction", "system_instruction", "tools", "generationConfig",
                              "generation_config", "toolConfig", "tool_config"})
    return chat


def _tool_choice(config: dict, tools: list[Tool]) -> str | None:
    """`toolConfig.functionCallingConfig` as the neutral tool choice: AUTO, NONE (no calls), ANY (some call), ANY of
    one function (that one). ANY of some but not all functions has no equivalent elsewhere: refused, not widened."""
    calling = {camel(k): v for k, v in _object(config, "functionCallingConfig", "toolConfig.").items()}
    mode = _typed(calling, "mode", str, "toolConfig.functionCallingConfig.") or "MODE_UNSPECIFIED"
    if mode in ("AUTO", "MODE_UNSPECIFIED"):
        return None if mode == "MODE_UNSPECIFIED" else "auto"
    if mode == "NONE":
        return "none"
    if mode != "ANY":
        raise refuse(f"toolConfig.functionCallingConfig.mode {mode}", NAME)
    allowed = [expect(name, str, "toolConfig.functionCallingConfig.allowedFunctionNames[]")
               for name in _typed(calling, "allowedFunctionNames", list, "toolConfig.functionCallingConfig.") or ()]
    if len(allowed) == 1:
        return allowed[0]
    if allowed and set(allowed) != {t.name for t in tools}:
        raise refuse("toolConfig.functionCallingConfig.allowedFunctionNames (some of the tools)", NAME)
    return "any"


def _object(body: dict, key: str, within: str = "") -> dict:
    """The object under `key` (or its snake_case spelling) of a translated request, {} where absent: anything
    else is the caller's 400 naming the field, not a crash reading it."""
    found = field(body, key) or {}
    return expect(found, dict, within + key)


def _typed(fields: dict, key: str, kind: type | tuple[type, ...], within: str = "generationConfig.") -> Any:
    """`fields[key]` (camelCase keys) if it has the JSON type `kind`, None where absent or null; else a 400."""
    return optional(fields, key, kind, within + key)


# generationConfig fields that change what the caller gets back: refused, as OpenAI's response_format, n and logprobs.
_ANSWER_SHAPING = ("responseSchema", "responseJsonSchema", "responseLogprobs", "logprobs")


def _read_generation_config(chat: Chat, gen: dict) -> None:
    for key in _ANSWER_SHAPING:
        if gen.get(key):
            raise refuse(f"generationConfig.{key}", NAME)
    if gen.get("responseMimeType", "text/plain") != "text/plain":
        raise refuse("generationConfig.responseMimeType", NAME)
    if (_typed(gen, "candidateCount", int) or 1) > 1:
        raise refuse("generationConfig.candidateCount > 1", NAME)
    for key in sorted(gen.keys() - {"maxOutputTokens", "temperature", "topP", "stopSequences", "candidateCount",
                                    "responseMimeType"}):
        chat.notes.append(f"dropped generationConfig.{key} (no equivalent in the target format)")


def _call_id_by_place(name: str, turn: int, seen: dict[str, int]) -> str:
    """An id for a call without one, or for its answer: parallel calls are answered in order, so the n-th answer
    to a name links to the n-th call of that name one turn before (the other APIs refuse repeated call ids)."""
    seen[name] = seen.get(name, 0) + 1
    return f"call_{name}_{turn}" + (f"_{seen[name]}" if seen[name] > 1 else "")


def write_chat(chat: Chat, model: str) -> dict:
    """A generateContent body; the model and streaming go in the URL, not here."""
    names = chat.call_names()
    out: dict[str, Any] = {}
    contents: list[dict] = []
    for turn in chat.turns:
        if turn.role == "system" and not contents:
            out.setdefault("systemInstruction", {"parts": []})["parts"].extend({"text": p.text} for p in turn.parts)
            continue
        role = "model" if turn.role == "assistant" else "user"
        parts = [_neutral_part(p, names) for p in turn.parts]
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    if _checks_thought_signatures(model):
        for content in contents:
            _sign_unsigned_calls(content)
    out["contents"] = contents
    note_tool_options(chat, "Gemini")
    if chat.tools:
        out["tools"] = [{"functionDeclarations": [{"name": t.name, "description": t.description, "parameters": t.schema}
                                                  for t in chat.tools]}]
    gen: dict[str, Any] = {}
    put(gen, maxOutputTokens=within_gemini_limit(chat, model), temperature=chat.temperature, topP=chat.top_p,
        stopSequences=chat.stop or None)
    if gen:
        out["generationConfig"] = gen
    if chat.tool_choice:
        mode = {"auto": "AUTO", "any": "ANY", "none": "NONE"}.get(chat.tool_choice)
        cfg = {"mode": mode} if mode else {"mode": "ANY", "allowedFunctionNames": [chat.tool_choice]}
        out["toolConfig"] = {"functionCallingConfig": cfg}
    if any(p.checkpoint for t in chat.turns for p in t.parts) or chat.auto_cache or chat.cache_key:
        chat.notes.append("checkpoints -> Gemini implicit caching of the same prefix (no explicit cache created)")
    return out


# Gemini 3 answers a replayed function call without its thought signature with a 400 ("Function call is missing a
# thought_signature"); a call from another format has none, and Google's documented stand-in for history from
# another model is this value, on the first call of each model step (where Gemini itself puts the signature).
SKIP_SIGNATURE = "skip_thought_signature_validator"


def _checks_thought_signatures(model: str) -> bool:
    """Whether `model` is Gemini 3 or later. An alias names no version (`gemini-pro-latest` is 3.1 Pro): the
    catalogue's id for it does; one the catalogue lacks points at the newest models, which check."""
    from prefixgate.providers.pricing import UnknownModel, resolve_model  # the catalogue loads on first use

    try:
        model = resolve_model(NAME, model).id
    except UnknownModel:
        pass
    version = re.search(r"gemini-(\d+)", model)
    return version is None or int(version.group(1)) >= 3


def _sign_unsigned_calls(content: dict) -> None:
    if content["role"] == "model":
        call = next((p for p in content["parts"] if "functionCall" in p), None)
        if call is not None:
            call.setdefault("thoughtSignature", SKIP_SIGNATURE)


def _neutral_part(p: Part, names: dict[str, str]) -> dict:
    if p.kind == "text":
        return {"text": p.text}
    if p.kind == "image":
        if p.url:
            return {"fileData": {"mimeType": p.mime or "image/*", "fileUri": p.url}}
        return {"inlineData": {"mimeType": p.mime, "data": p.data}}
    if p.kind == "tool_call":
        return {"functionCall": {"id": p.call_id, "name": p.name, "args": p.args or {}}}
    return {"functionResponse": {"id": p.call_id, "name": p.name or names.get(p.call_id, ""),
                                 "response": {"error" if p.is_error else "output": p.text}}}


# Every finish but STOP and MAX_TOKENS means the answer was withheld or failed (a malformed or unexpected call, a
# missing thought signature, OTHER): content_filter, the one neutral finish that says "not a whole answer" in
# every caller's format (docs/translation.md, "Finish reasons").
FINISH_FROM = {"STOP": "stop", "MAX_TOKENS": "length"} | dict.fromkeys((
    "SAFETY", "RECITATION", "LANGUAGE", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL",
    "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_OTHER", "NO_IMAGE", "IMAGE_RECITATION", "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS", "MISSING_THOUGHT_SIGNATURE", "MALFORMED_RESPONSE", "MODEL_ARMOR"), "content_filter")
FINISH_TO = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP", "content_filter": "SAFETY"}


def read_reply(body: dict) -> Reply:
    cand = (body.get("candidates") or [{}])[0]
    parts = (cand.get("content") or {}).get("parts") or []
    text = "".join(p.get("text", "") for p in parts if "text" in p and not p.get("thought"))
    calls = [ToolCall(_call_id(p["functionCall"]), p["functionCall"].get("name", ""), p["functionCall"].get("args") or {})
             for p in parts if "functionCall" in p]
    # Gemini says STOP after a function call; the neutral reason is the call.
    native = cand.get("finishReason") or blocked_prompt(body)
    finish = "tool_calls" if calls else FINISH_FROM.get(native, "stop")
    return Reply(text, usage_from_response(body), finish, calls, body.get("responseId"), native)


def blocked_prompt(body: dict) -> str | None:
    """Why Gemini refused the prompt itself (`promptFeedback.blockReason`: SAFETY, BLOCKLIST, PROHIBITED_CONTENT,
    OTHER, ...), answering with no candidates, if it did: the answer is then content_filter, never an empty stop."""
    if body.get("candidates"):
        return None
    reason = (body.get("promptFeedback") or {}).get("blockReason")
    return reason if isinstance(reason, str) and reason in FINISH_FROM else "OTHER" if reason else None


def _call_id(call: dict) -> str:
    """The call's own id, else a fresh one (Gemini's `id` is optional): a caller in another format links each result
    to its call by id, and an id repeated across turns linked an earlier result to the later call's tool."""
    return call.get("id") or "call_" + uuid.uuid4().hex[:24]


def write_reply(reply: Reply, model: str) -> dict:
    out = build_response(model, reply.text, reply.usage, finish_reason=FINISH_TO[reply.finish])
    if reply.tool_calls:
        parts = out["candidates"][0]["content"]["parts"]
        if not reply.text:
            parts.clear()
        parts += [{"functionCall": {"id": c.id, "name": c.name, "args": c.args}} for c in reply.tool_calls]
    return out


def read_deltas(event: dict) -> list[Delta]:
    out: list[Delta] = []
    for cand in event.get("candidates") or []:
        for part in (cand.get("content") or {}).get("parts") or []:
            if "text" in part and not part.get("thought") and part["text"]:
                out.append(("text", part["text"]))
            elif "functionCall" in part:
                # Each call comes whole, but calls may come in separate chunks: the id, not the part's place, keys it.
                call = part["functionCall"]
                call_id = _call_id(call)
                out.append(("call", call_id, call_id, call.get("name", "")))
                out.append(("args", call_id, json.dumps(call.get("args") or {})))
        if cand.get("finishReason"):
            calls = any(d[0] == "call" for d in out)
            out.append(("finish", "tool_calls" if calls else FINISH_FROM.get(cand["finishReason"], "stop"),
                        cand["finishReason"]))
    if (blocked := blocked_prompt(event)) is not None:
        out.append(("finish", FINISH_FROM[blocked], blocked))
    return out


class ChunkWriter(StreamWriter):
    """`alt=sse` chunks for neutral deltas: text streams through; a function call is sent whole once its
    arguments are complete (Gemini never streams a call's arguments), in the last chunk with usage."""

    def __init__(self, model: str, include_usage: bool = True) -> None:
        super().__init__(model, include_usage)
        self._id = uuid.uuid4().hex[:24]
        self._calls: dict[Any, dict] = {}      # tool calls buffered until complete

    def _delta(self, d: Delta) -> bytes:
        if d[0] == "text":
            return encode_sse({"candidates": [{"content": {"parts": [{"text": d[1]}], "role": "model"}, "index": 0}],
                               "modelVersion": self.model, "responseId": self._id})
        if d[0] == "call":
            self._calls[d[1]] = {"id": d[2], "name": d[3], "args": ""}
        else:
            self._calls.setdefault(d[1], {"id": "", "name": "", "args": ""})["args"] += d[2]
        return b""

    def _finish(self, usage: Usage) -> bytes:
        parts = [{"functionCall": {"id": c["id"], "name": c["name"], "args": json_or_raw(c["args"])}}
                 for c in self._calls.values()] or [{"text": ""}]
        chunk = {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": FINISH_TO[self.finish_reason],
                                 "index": 0}],
                 "usageMetadata": usage_json(usage), "modelVersion": self.model, "responseId": self._id}
        return encode_sse(chunk)


# ---- the adapter ------------------------------------------------------------------------------

# google-genai calls `/v1beta/models/{model}:{method}` or `/v1/...` by API version.
MODEL_PATHS = ("/v1beta/models/", "/v1/models/")
GENERATE = ("generateContent", "streamGenerateContent")


def generate_parser(target: str) -> Parse | None:
    """The body parser for a `{model}:generateContent` or `:streamGenerateContent` target, else None."""
    model, _, action = target.rpartition(":")
    if not model or action not in GENERATE:
        return None
    stream = action == "streamGenerateContent"

    def parse(raw: bytes) -> Conversation:
        conv = parse_request(raw, model=model)
        conv.stream = stream       # Gemini streams by URL, not by a body field
        return conv
    return parse


class GeminiGenerate(WireFormat):
    name = NAME
    planner_provider = NAME
    span_name = "POST /{version}/models/{model}"
    model_in_body = False
    finish_from, finish_to = FINISH_FROM, FINISH_TO
    # Only STOP: OTHER, SAFETY, BLOCKLIST, PROHIBITED_CONTENT, SPII, MALFORMED_FUNCTION_CALL... did not end by themselves.
    natural_finishes = ("STOP",)
    usage_marks = (b"usageMetadata",)
    terminal = b"finishReason"
    explicit_cache_path = "/v1beta/cachedContents"

    # This module's functions are the adapter's methods.
    encode_request, build_response, error_event = staticmethod(encode_request), staticmethod(build_response), \
        staticmethod(error_event)
    read_chat, write_chat, read_reply, write_reply, read_deltas = (
        staticmethod(read_chat), staticmethod(write_chat), staticmethod(read_reply), staticmethod(write_reply),
        staticmethod(read_deltas))
    writer = ChunkWriter

    def error_reply(self, err: RequestError) -> tuple[int, dict, dict[str, str]]:
        body = self.error_body(err)
        return body["error"]["code"], body, {}      # the status Google pairs with the error's (errors.error_body)

    def tag_prompt(self, payload: dict, tag: str) -> None:
        if payload.get("cachedContent"):
            return      # the explicit cache holds the prefix, and it is its tenant's alone already
        key = "systemInstruction" if "systemInstruction" in payload or "system_instruction" not in payload else "system_instruction"
        system = payload.get(key) or {}
        payload[key] = {**system, "parts": [{"text": tag}, *(system.get("parts") or [])]}

    def parser_for(self, path: str) -> Parse | None:
        if path.startswith(MODEL_PATHS) and path.count("/") == 3:
            return generate_parser(path.rsplit("/", 1)[1])
        return None

    def owns_path(self, path: str) -> bool:
        return path.startswith(("/v1beta/", "/upload/")) or ":" in path.rsplit("/", 1)[-1]

    def streams_json_array(self, query: Mapping[str, str]) -> bool:
        # The REST API streams server-sent events only with ?alt=sse; without it (the older
        # google-generativeai SDK) the same chunks come as elements of one JSON array.
        return query.get("alt") != "sse"

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return parse_request(body, model=model)

    def usage_of(self, body: dict, conv: Conversation | None = None) -> Usage:
        return usage_from_response(body)

    def has_usage(self, body: dict) -> bool:
        return bool(body.get("usageMetadata"))

    def stream_usage(self, conv: Conversation | None = None) -> StreamUsage:
        return StreamUsage()

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        action = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{base_url}/v1beta/models/{path_model(model)}:{action}"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}


WIRE = GeminiGenerate()
