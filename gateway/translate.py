"""Cross-dialect request translation: caller's wire body -> neutral `Chat` -> target's wire body.

Caching intent survives the trip, because losing it silently is the bug users of other gateways
report most after wrong costs: `cache_control` checkpoints become OpenAI `prompt_cache_breakpoint`s
(and the reverse), the TTL maps to the shortest TTL the target offers that is at least as long,
OpenAI's `prompt_cache_key` becomes Anthropic automatic caching, and a checkpoint the target cannot
express is reported in the explanation instead of vanishing. The result is parsed by the target
dialect's own parser, so a translated body is validated exactly like a native one.
"""

from __future__ import annotations

import json
from typing import Any

from prefixgate.errors import RequestError
from prefixgate.gateway.chat import Chat, Part, Tool, Turn
from prefixgate.ir import Checkpoint

# Shortest TTL each target offers that is at least as long as the one asked for.
_ANTHROPIC_TTL = {"5m": "5m", "30m": "1h", "1h": "1h", "24h": "1h"}


def translate_body(body: dict, source: str, target: str, model: str) -> tuple[dict, list[str]]:
    """`body` (in `source`'s wire format) as a `target` body for `model`, plus explanation lines."""
    chat = READERS[source](body)
    out = WRITERS[target](chat, model)
    return out, [f"translate: {source} -> {target}"] + [f"translate: {n}" for n in chat.notes]


def _cp(native: dict) -> Checkpoint | None:
    cc = native.get("cache_control")
    if isinstance(cc, dict):
        return Checkpoint(cc.get("ttl", "5m"))
    if native.get("prompt_cache_breakpoint") is not None:
        return Checkpoint("30m")
    return None


def _refuse(what: str, source: str) -> RequestError:
    return RequestError(f"cannot translate {what} from the {source} format for this route's target", field=what)


def _data_url(url: str) -> tuple[str, str] | None:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return head, data
    return None


# ---- readers ------------------------------------------------------------------------------------

def read_openai(body: dict) -> Chat:
    chat = Chat([], stream=bool(body.get("stream")))
    for msg in body["messages"]:
        role = {"developer": "system", "function": "tool"}.get(msg["role"], msg["role"])
        content = msg.get("content")
        parts: list[Part] = []
        if isinstance(content, str):
            parts.append(Part("text", content))
        for p in content if isinstance(content, list) else []:
            if p.get("type") in ("text", "refusal"):
                parts.append(Part("text", p.get("text") or p.get("refusal") or "", _cp(p)))
            elif p.get("type") == "image_url":
                url = (p.get("image_url") or {}).get("url", "")
                inline = _data_url(url)
                parts.append(Part("image", mime=inline[0], data=inline[1], checkpoint=_cp(p)) if inline
                             else Part("image", url=url, checkpoint=_cp(p)))
            else:
                raise _refuse(f"content part type {p.get('type')!r}", "openai")
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                raise _refuse("tool call arguments that are not JSON", "openai") from None
            parts.append(Part("tool_call", call_id=call.get("id", ""), name=fn.get("name", ""), args=args))
        if role == "tool":
            text = "\n".join(p.text for p in parts if p.kind == "text")
            cp = next((p.checkpoint for p in parts if p.checkpoint), None)
            parts = [Part("tool_result", text, cp, call_id=msg.get("tool_call_id", ""), name=msg.get("name", ""))]
        chat.turns.append(Turn(role, parts))
    for t in body.get("tools") or []:
        fn = t.get("function") or {}
        chat.tools.append(Tool(fn.get("name", ""), fn.get("description", ""), fn.get("parameters") or Tool("").schema))
    chat.max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    chat.temperature, chat.top_p, chat.user = body.get("temperature"), body.get("top_p"), body.get("user")
    stop = body.get("stop")
    chat.stop = [stop] if isinstance(stop, str) else list(stop or [])
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        chat.tool_choice = (choice.get("function") or {}).get("name")
    elif choice is not None:
        chat.tool_choice = {"required": "any"}.get(choice, choice)
    chat.cache_key = body.get("prompt_cache_key")
    if body.get("n", 1) != 1:
        raise _refuse("n > 1", "openai")
    if body.get("response_format", {}).get("type", "text") != "text":
        raise _refuse("response_format", "openai")
    _note_dropped(chat, body, {"messages", "model", "stream", "stream_options", "tools", "max_tokens",
                               "max_completion_tokens", "temperature", "top_p", "user", "stop", "tool_choice",
                               "prompt_cache_key", "n", "response_format", "prompt_cache_options"})
    return chat


def read_anthropic(body: dict) -> Chat:
    chat = Chat([], stream=bool(body.get("stream")))
    system = body.get("system")
    if isinstance(system, str):
        chat.turns.append(Turn("system", [Part("text", system)]))
    elif isinstance(system, list):
        chat.turns.append(Turn("system", [Part("text", b.get("text", ""), _cp(b)) for b in system]))
    for msg in body["messages"]:
        content = msg["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        parts, results = [], []
        for b in blocks:
            kind = b.get("type")
            if kind == "text":
                parts.append(Part("text", b.get("text", ""), _cp(b)))
            elif kind == "image":
                src = b.get("source") or {}
                parts.append(Part("image", mime=src.get("media_type", ""), data=src.get("data", ""),
                                  url=src.get("url", ""), checkpoint=_cp(b)))
            elif kind == "document" and (b.get("source") or {}).get("type") == "text":
                parts.append(Part("text", b["source"].get("data", ""), _cp(b)))
            elif kind == "tool_use":
                parts.append(Part("tool_call", call_id=b.get("id", ""), name=b.get("name", ""), args=b.get("input") or {}))
            elif kind == "tool_result":
                inner = b.get("content", "")
                text = inner if isinstance(inner, str) else "\n".join(
                    c.get("text", "") for c in inner if isinstance(c, dict) and c.get("type") == "text")
                results.append(Part("tool_result", text, _cp(b), call_id=b.get("tool_use_id", ""),
                                    is_error=bool(b.get("is_error"))))
            elif kind in ("thinking", "redacted_thinking"):
                chat.notes.append("dropped a thinking block (only Anthropic models read them back)")
            else:
                raise _refuse(f"content block type {kind!r}", "anthropic")
        if results:
            chat.turns.append(Turn("tool", results))
        if parts or not results:
            chat.turns.append(Turn(msg["role"], parts))
    for t in body.get("tools") or []:
        if "input_schema" not in t:
            raise _refuse(f"server tool {t.get('type') or t.get('name')!r}", "anthropic")
        chat.tools.append(Tool(t.get("name", ""), t.get("description", ""), t["input_schema"], _cp(t)))
    chat.max_tokens, chat.temperature, chat.top_p = body.get("max_tokens"), body.get("temperature"), body.get("top_p")
    chat.stop = list(body.get("stop_sequences") or [])
    choice = body.get("tool_choice") or {}
    chat.tool_choice = choice.get("name") if choice.get("type") == "tool" else choice.get("type")
    chat.user = (body.get("metadata") or {}).get("user_id")
    if isinstance(body.get("cache_control"), dict):
        chat.auto_cache = Checkpoint(body["cache_control"].get("ttl", "5m"))
    _note_dropped(chat, body, {"messages", "model", "stream", "system", "tools", "max_tokens", "temperature",
                               "top_p", "stop_sequences", "tool_choice", "metadata", "cache_control"})
    return chat


def read_gemini(body: dict) -> Chat:
    chat = Chat([])
    if body.get("cachedContent") or body.get("cached_content"):
        raise _refuse("cachedContent (a Gemini cache only Gemini can read)", "gemini")
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        chat.turns.append(Turn("system", [Part("text", p.get("text", "")) for p in system.get("parts", [])]))
    for content in body["contents"]:
        role = {"model": "assistant"}.get(content.get("role", "user"), "user")
        parts, results = [], []
        for p in content.get("parts", []):
            inline = p.get("inlineData") or p.get("inline_data")
            call = p.get("functionCall") or p.get("function_call")
            answer = p.get("functionResponse") or p.get("function_response")
            if "text" in p and not p.get("thought"):
                parts.append(Part("text", p["text"]))
            elif p.get("thought"):
                chat.notes.append("dropped a thought part")
            elif inline:
                parts.append(Part("image", mime=inline.get("mimeType") or inline.get("mime_type", ""),
                                  data=inline.get("data", "")))
            elif call:
                call_id = call.get("id") or f"call_{call.get('name', '')}_{len(chat.turns)}"
                parts.append(Part("tool_call", call_id=call_id, name=call.get("name", ""), args=call.get("args") or {}))
            elif answer:
                resp = answer.get("response")
                call_id = answer.get("id") or f"call_{answer.get('name', '')}_{len(chat.turns) - 1}"
                results.append(Part("tool_result", json.dumps(resp) if not isinstance(resp, str) else resp,
                                    call_id=call_id, name=answer.get("name", "")))
            else:
                raise _refuse(f"part with keys {sorted(p)}", "gemini")
        if results:
            chat.turns.append(Turn("tool", results))
        if parts or not results:
            chat.turns.append(Turn(role, parts))
    for tool in body.get("tools") or []:
        decls = tool.get("functionDeclarations") or tool.get("function_declarations")
        if decls is None:
            raise _refuse(f"tool {sorted(tool)}", "gemini")
        for d in decls:
            chat.tools.append(Tool(d.get("name", ""), d.get("description", ""),
                                   d.get("parameters") or d.get("parametersJsonSchema") or Tool("").schema))
    gen = body.get("generationConfig") or body.get("generation_config") or {}
    chat.max_tokens = gen.get("maxOutputTokens") or gen.get("max_output_tokens")
    chat.temperature, chat.top_p = gen.get("temperature"), gen.get("topP", gen.get("top_p"))
    chat.stop = list(gen.get("stopSequences") or gen.get("stop_sequences") or [])
    _note_dropped(chat, body, {"contents", "systemInstruction", "system_instruction", "tools", "generationConfig",
                               "generation_config"})
    return chat


def _note_dropped(chat: Chat, body: dict, known: set[str]) -> None:
    for key in body:
        if key not in known:
            chat.notes.append(f"dropped {key} (no equivalent in the target format)")


# ---- writers ------------------------------------------------------------------------------------

def write_openai(chat: Chat, model: str) -> dict:
    messages: list[dict] = []
    for turn in chat.turns:
        if turn.role == "tool":
            for p in turn.parts:
                msg = {"role": "tool", "tool_call_id": p.call_id, "content": _oa_content([Part("text", p.text, p.checkpoint)])}
                messages.append(msg)
            continue
        calls = [p for p in turn.parts if p.kind == "tool_call"]
        msg: dict[str, Any] = {"role": turn.role, "content": _oa_content([p for p in turn.parts if p.kind != "tool_call"])}
        if calls:
            msg["tool_calls"] = [{"id": c.call_id, "type": "function",
                                  "function": {"name": c.name, "arguments": json.dumps(c.args)}} for c in calls]
            if not msg["content"]:
                msg["content"] = None
        messages.append(msg)
    out: dict[str, Any] = {"model": model, "messages": messages}
    if chat.tools:
        out["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                          "parameters": t.schema}} for t in chat.tools]
        if any(t.checkpoint for t in chat.tools):
            chat.notes.append("tool checkpoint: OpenAI caches tools automatically as the head of the prefix")
    _put(out, max_completion_tokens=chat.max_tokens, temperature=chat.temperature, top_p=chat.top_p,
         user=chat.user, stop=chat.stop or None)
    if chat.tool_choice:
        out["tool_choice"] = ({"auto": "auto", "any": "required", "none": "none"}.get(chat.tool_choice)
                              or {"type": "function", "function": {"name": chat.tool_choice}})
    if chat.stream:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    if chat.cache_key:
        out["prompt_cache_key"] = chat.cache_key
    if chat.auto_cache:
        chat.notes.append("automatic cache_control -> OpenAI implicit caching of the whole prefix")
    return out


def _oa_content(parts: list[Part]) -> Any:
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
            item["prompt_cache_breakpoint"] = {"mode": "explicit"}
        out.append(item)
    return out


def write_anthropic(chat: Chat, model: str) -> dict:
    system: list[dict] = []
    messages: list[dict] = []
    for turn in chat.turns:
        if turn.role == "system" and not messages:
            system.extend(_an_block(p) for p in turn.parts)
            continue
        role = "assistant" if turn.role == "assistant" else "user"
        blocks = [_an_block(p) for p in turn.parts]
        if turn.role == "system":
            chat.notes.append("a system message after the first turn became user text")
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)      # Anthropic merges consecutive turns; keep them explicit
        else:
            messages.append({"role": role, "content": blocks})
    out: dict[str, Any] = {"model": model, "max_tokens": chat.max_tokens or 4096}
    if system:
        out["system"] = system
    out["messages"] = messages
    if chat.tools:
        out["tools"] = [_with_cp({"name": t.name, "description": t.description, "input_schema": t.schema}, t.checkpoint)
                        for t in chat.tools]
    _put(out, temperature=chat.temperature, top_p=chat.top_p, stop_sequences=chat.stop or None)
    if chat.tool_choice:
        out["tool_choice"] = ({"type": chat.tool_choice} if chat.tool_choice in ("auto", "any", "none")
                              else {"type": "tool", "name": chat.tool_choice})
    if chat.user:
        out["metadata"] = {"user_id": chat.user}
    if chat.stream:
        out["stream"] = True
    marked = any(p.checkpoint for t in chat.turns for p in t.parts) or any(t.checkpoint for t in chat.tools)
    if chat.auto_cache or (chat.cache_key and not marked):
        # A cache key says "these requests share a prefix": Anthropic's automatic caching is that intent.
        out["cache_control"] = _an_cc(chat.auto_cache or Checkpoint("5m"))
        if chat.cache_key:
            chat.notes.append("prompt_cache_key -> automatic cache_control")
    return out


def _an_block(p: Part) -> dict:
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
        block["cache_control"] = _an_cc(cp)
    return block


def _an_cc(cp: Checkpoint) -> dict:
    ttl = _ANTHROPIC_TTL.get(cp.ttl, "1h")
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def write_gemini(chat: Chat, model: str) -> dict:
    names = chat.call_names()
    out: dict[str, Any] = {}
    contents: list[dict] = []
    for turn in chat.turns:
        if turn.role == "system" and not contents:
            out.setdefault("systemInstruction", {"parts": []})["parts"].extend({"text": p.text} for p in turn.parts)
            continue
        role = "model" if turn.role == "assistant" else "user"
        parts = [_ge_part(p, names) for p in turn.parts]
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    out["contents"] = contents
    if chat.tools:
        out["tools"] = [{"functionDeclarations": [{"name": t.name, "description": t.description, "parameters": t.schema}
                                                  for t in chat.tools]}]
    gen: dict[str, Any] = {}
    _put(gen, maxOutputTokens=chat.max_tokens, temperature=chat.temperature, topP=chat.top_p,
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


def _ge_part(p: Part, names: dict[str, str]) -> dict:
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


def _put(out: dict, **values: Any) -> None:
    out.update({k: v for k, v in values.items() if v is not None})


READERS = {"openai": read_openai, "anthropic": read_anthropic, "gemini": read_gemini}
WRITERS = {"openai": write_openai, "anthropic": write_anthropic, "gemini": write_gemini}
