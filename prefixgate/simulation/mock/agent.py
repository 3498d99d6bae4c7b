"""How the mock providers answer an agent: a tool call or text, per the request's tools and `tool_choice`, and
schema-conforming JSON when the request asks for structured output. One decision for the four formats
(Chat Completions, Messages, Gemini, Responses); each format's reader below turns its body into a `Turn`.

The rules, as the providers document `tool_choice` (OpenAI `none|auto|required|{function}`, Anthropic
`none|auto|any|{tool}`, Gemini `NONE|AUTO|ANY(+allowedFunctionNames)|VALIDATED`):

- `none`, or no tools: text.
- A named tool (or ANY with one allowed name): that tool, every time: the caller forces it, even after a result.
- `required` / `any` / ANY: some tool, every time: the one the user's text names, else the first not yet called
  in the conversation, else the last declared (output tools such as pydantic-ai's `final_result` or smolagents'
  `final_answer` come last, so forced loops end where real models end them). A call counts whether it was sent
  natively or rendered as text in an assistant turn (smolagents writes "Calling tools: [... 'name': 'x' ...]").
- `auto` (the default): after a tool result, text; otherwise a call when the user's latest text names a tool
  (every word of `get_weather` appears: "get the weather in Paris"), or carries the marker `[[mock:call NAME
  {json}]]`; else text.

Arguments are the tool schema's fixed values (schema_value.py), or the marker's. Text answers to a request with
a JSON schema (`response_format`, `output_config.format`, `responseSchema`/`responseJsonSchema`, Responses
`text.format`) are that schema's fixed values as JSON.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from prefixgate.simulation.mock.schema_value import value_for

MARKER = re.compile(r"\[\[mock:call ([A-Za-z0-9_.-]+)(?: (\{.*?\}))?\]\]", re.S)


@dataclass
class Turn:
    """What the decision needs from a request, whatever its format."""

    tools: dict[str, dict] = field(default_factory=dict)   # name -> JSON schema of its arguments, declared order
    choice: str = "auto"            # "auto", "none", "any", or a tool's name
    after_result: bool = False      # the last input is a tool's result
    called: list[str] = field(default_factory=list)    # tools called since the user last wrote
    called_ever: set[str] = field(default_factory=set)  # tools called anywhere in the conversation
    user_text: str = ""             # the user's latest text
    schema: dict | None = None      # a structured-output schema ({} asks for any JSON object)


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str       # JSON text

    @property
    def args(self) -> Any:
        return json.loads(self.arguments)


def decide(turn: Turn) -> Call | None:
    """The tool call this turn gets, or None for a text answer."""
    if not turn.tools or turn.choice == "none":
        return None
    if turn.choice in turn.tools:
        return _call(turn, turn.choice)
    if turn.choice == "any":
        named = _named(turn)
        uncalled = next((n for n in turn.tools if n not in turn.called_ever), None)
        return _call(turn, named or uncalled or list(turn.tools)[-1])
    if turn.after_result:
        return None
    found = MARKER.search(turn.user_text)
    if found is not None and found.group(1) in turn.tools:
        return _call(turn, found.group(1), found.group(2))
    named = _named(turn)
    return _call(turn, named) if named else None


def structured_text(turn: Turn) -> str | None:
    """The JSON answer a structured-output request gets (None: no schema asked for)."""
    if turn.schema is None:
        return None
    value = value_for(turn.schema) if turn.schema else {"answer": "mock"}
    return json.dumps(value, separators=(",", ":"))


def _named(turn: Turn) -> str | None:
    """The first tool not yet called whose name's every word is in the user's latest text."""
    said = set(re.findall(r"[a-z0-9]+", turn.user_text.lower()))
    for name in turn.tools:
        words = [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)]
        if words and name not in turn.called and all(w in said for w in words):
            return name
    return None


def _call(turn: Turn, name: str, arguments: str | None = None) -> Call:
    args = arguments or json.dumps(value_for(turn.tools[name] or {"type": "object"}), separators=(",", ":"))
    return Call("call_" + uuid.uuid4().hex[:24], name, args)


def _note_calls(turn: Turn, names: list[str], assistant_text: str = "") -> None:
    """Calls seen in one turn: native ones by name, and text-rendered ones (a tool's name quoted in the text)."""
    turn.called += names
    turn.called_ever.update(names)
    turn.called_ever.update(n for n in turn.tools if f"'{n}'" in assistant_text or f'"{n}"' in assistant_text)


def _text(content: Any, kinds: tuple[str, ...] = ("text", "input_text")) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type", "text") in kinds)


# ---- Chat Completions ---------------------------------------------------------------------------------------

def chat_turn(body: dict) -> Turn:
    turn = Turn()
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            turn.tools[fn["name"]] = fn.get("parameters") or {"type": "object"}
    choice = body.get("tool_choice", "auto")
    if isinstance(choice, dict):
        choice = (choice.get("function") or {}).get("name", "auto")
    turn.choice = {"required": "any"}.get(choice, choice)
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    turn.after_result = bool(messages) and messages[-1].get("role") in ("tool", "function")
    for message in messages:
        if message.get("role") == "user":
            turn.user_text, turn.called = _text(message.get("content")), []
        text = _text(message.get("content"), ("text", "output_text")) if message.get("role") == "assistant" else ""
        _note_calls(turn, [(c.get("function") or {}).get("name", "") for c in message.get("tool_calls") or []], text)
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        turn.schema = (fmt.get("json_schema") or {}).get("schema") or {}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        turn.schema = {}
    return turn


# ---- Messages ------------------------------------------------------------------------------------------------

def messages_turn(body: dict) -> Turn:
    turn = Turn()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and "input_schema" in tool and isinstance(tool.get("name"), str):
            turn.tools[tool["name"]] = tool["input_schema"]
    choice = body.get("tool_choice") or {}
    kind = choice.get("type", "auto") if isinstance(choice, dict) else "auto"
    turn.choice = choice.get("name", "auto") if kind == "tool" else kind
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "user" and (isinstance(content, str) or any(b.get("type") == "text" for b in blocks)):
            turn.user_text, turn.called = _text(content), []
        text = _text(content) if message.get("role") == "assistant" else ""
        _note_calls(turn, [b.get("name", "") for b in blocks if b.get("type") == "tool_use"], text)
    last = messages[-1].get("content") if messages else None
    turn.after_result = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    fmt = (body.get("output_config") or {}).get("format") or body.get("output_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        turn.schema = fmt.get("schema") or {}
    return turn


# ---- Gemini --------------------------------------------------------------------------------------------------

def gemini_turn(body: dict) -> Turn:
    turn = Turn()
    for tool in body.get("tools") or []:
        for decl in (tool.get("functionDeclarations") or tool.get("function_declarations") or []) if isinstance(tool, dict) else []:
            schema = decl.get("parametersJsonSchema") or decl.get("parameters_json_schema") or decl.get("parameters")
            turn.tools[decl.get("name", "")] = schema or {"type": "object"}
    config = (body.get("toolConfig") or body.get("tool_config") or {})
    calling = config.get("functionCallingConfig") or config.get("function_calling_config") or {}
    mode = str(calling.get("mode", "AUTO")).upper()
    allowed = calling.get("allowedFunctionNames") or calling.get("allowed_function_names") or []
    turn.choice = {"NONE": "none", "ANY": "any"}.get(mode, "auto")
    if turn.choice == "any" and len(allowed) == 1:
        turn.choice = allowed[0]
    elif allowed:
        turn.tools = {n: s for n, s in turn.tools.items() if n in allowed}
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    for content in contents:
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        if content.get("role", "user") == "user" and any("text" in p for p in parts):
            turn.user_text, turn.called = "\n".join(p["text"] for p in parts if "text" in p), []
        text = "\n".join(p["text"] for p in parts if "text" in p) if content.get("role") == "model" else ""
        _note_calls(turn, [(p.get("functionCall") or p.get("function_call") or {}).get("name", "") for p in parts
                           if "functionCall" in p or "function_call" in p], text)
    last = contents[-1].get("parts") or [] if contents else []
    turn.after_result = any(isinstance(p, dict) and ("functionResponse" in p or "function_response" in p) for p in last)
    gen = body.get("generationConfig") or body.get("generation_config") or {}
    schema = gen.get("responseJsonSchema") or gen.get("response_json_schema") or gen.get("responseSchema") \
        or gen.get("response_schema")
    if schema:
        turn.schema = schema
    elif (gen.get("responseMimeType") or gen.get("response_mime_type")) == "application/json":
        turn.schema = {}
    return turn


# ---- Responses -----------------------------------------------------------------------------------------------

_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def responses_turn(body: dict, items: list[dict]) -> Turn:
    """`items`: the whole input, a `previous_response_id` chain's included."""
    turn = Turn()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("name"), str):
            turn.tools[tool["name"]] = tool.get("parameters") or {"type": "object"}
    choice = body.get("tool_choice", "auto")
    if isinstance(choice, dict):
        choice = choice.get("name", "auto") if choice.get("type") == "function" else "auto"
    turn.choice = {"required": "any"}.get(choice, choice)
    for item in items:
        if item.get("role") == "user":
            turn.user_text, turn.called = _text(item.get("content")), []
        elif item.get("type") == "function_call":
            _note_calls(turn, [item.get("name", "")])
        elif item.get("role") == "assistant":
            _note_calls(turn, [], _text(item.get("content"), ("text", "output_text")))
    turn.after_result = bool(items) and items[-1].get("type") in _OUTPUTS
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        turn.schema = fmt.get("schema") or {}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        turn.schema = {}
    return turn
