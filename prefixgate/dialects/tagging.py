"""A tenant's tag at the start of an encoded request's cache prefix (`WireFormat.tag_prompt`, used by the gateway's
`isolation: tenant`), in the shapes formats share. New objects replace the ones changed, never edited in place:
the originals may be the caller's parsed body, which the body memo keeps."""

from __future__ import annotations

from typing import Any


def first_tool(payload: dict[str, Any], tag: str) -> bool:
    """The first tool's description starts with `tag` (tools come first in these formats' cache order); False
    when the request has no tools."""
    tools = payload.get("tools")
    if not (isinstance(tools, list) and tools and isinstance(tools[0], dict)):
        return False
    first = dict(tools[0])
    if isinstance(first.get("function"), dict):         # Chat Completions: {"type": "function", "function": {...}}
        first["function"] = {**first["function"], "description": f"{tag} {first['function'].get('description', '')}"}
    else:                                                # Anthropic, Responses: the tool itself
        first["description"] = f"{tag} {first.get('description', '')}"
    payload["tools"] = [first, *tools[1:]]
    return True


def system_blocks(payload: dict[str, Any], tag: str) -> None:
    """Anthropic's `system` (a string or text blocks) starts with `tag`."""
    system = payload.get("system")
    block = {"type": "text", "text": tag}
    payload["system"] = [block, *system] if isinstance(system, list) else [block, {"type": "text", "text": system}] \
        if system else tag


def system_message(payload: dict[str, Any], tag: str) -> None:
    """A system message first (Chat Completions and compatible servers)."""
    if isinstance(payload.get("messages"), list):
        payload["messages"] = [{"role": "system", "content": tag}, *payload["messages"]]
