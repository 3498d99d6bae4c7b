"""When mock-providers answers a Responses request with a function call instead of text.

An agent loop needs the model to call its tools, then answer. The mock calls a function tool when:

- `tool_choice` is `"required"` (the first function tool) or `{"type": "function", "name": N}` (that one), or
- the newest user message contains the marker `[[mock:call NAME]]` or `[[mock:call NAME {json arguments}]]`
  and NAME is one of the request's function tools,

and the request's last input item is not already a tool's output (so every loop ends: call, output, text).
Arguments not given in the marker are filled from the tool's JSON schema with fixed values per type (the
same values answer a `text.format` JSON schema).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MARKER = re.compile(r"\[\[mock:call ([A-Za-z0-9_.-]+)(?: (\{.*?\}))?\]\]", re.S)
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: str


def scripted_call(body: dict, items: list[dict]) -> ScriptedCall | None:
    """The function call this request gets, or None for a text answer. `items`: the whole input."""
    tools = {t["name"]: t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"
             and isinstance(t.get("name"), str)}
    if not tools or not items or items[-1].get("type") in _OUTPUTS:
        return None
    choice = body.get("tool_choice", "auto")
    if choice == "none":
        return None
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name") in tools:
        return ScriptedCall(choice["name"], _arguments(tools[choice["name"]]))
    if choice == "required":
        first = next(iter(tools.values()))
        return ScriptedCall(first["name"], _arguments(first))
    found = MARKER.search(_latest_user_text(items))
    if found is None or found.group(1) not in tools:
        return None
    return ScriptedCall(found.group(1), found.group(2) or _arguments(tools[found.group(1)]))


def _latest_user_text(items: list[dict]) -> str:
    for item in reversed(items):
        if item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
    return ""


def _arguments(tool: dict) -> str:
    return json.dumps(value_for(tool.get("parameters") or {"type": "object"}), separators=(",", ":"))


def value_for(schema: Any) -> Any:
    """A fixed value that fits `schema` (enum's first, else by type): tool arguments, structured output."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: value_for(sub) for name, sub in props.items()}
    return {"string": "mock", "integer": 1, "number": 1, "boolean": True, "array": [], "null": None}.get(kind, "mock")
