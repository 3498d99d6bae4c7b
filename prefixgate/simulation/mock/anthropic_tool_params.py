"""What the Messages API accepts of a conversation's tool calls: each `tool_use` id once and of `[a-zA-Z0-9_-]`, each
`tool_use` answered by a `tool_result` in the next message, and each `tool_result` answering a `tool_use` of the
message before it. Refused, as invalid_request_error 400s, in the API's words (quoted by the agents that hit them,
e.g. anthropics/claude-code#20508 for the first, anomalyco/opencode#1279 for the second):

- `messages.<i>.content.<j>: `tool_use` ids must be unique`
- `messages.<i>.content.<j>.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'`
- `messages.<i>: `tool_use` ids were found without `tool_result` blocks immediately after: <ids>. Each `tool_use`
  block must have a corresponding `tool_result` block in the next message.`
- `messages.<i>.content.<j>: unexpected `tool_use_id` found in `tool_result` blocks: <id>. Each `tool_result`
  block must have a corresponding `tool_use` block in the previous message.`
"""

from __future__ import annotations

import re
from typing import Any

from prefixgate.errors import RequestError

_ID = re.compile(r"[a-zA-Z0-9_-]+")


def check_tool_pairs(messages: list[Any]) -> None:
    """Raise the 400 the Messages API answers `messages` with for its tool calls, if any."""
    seen: set[str] = set()
    asked: list[str] = []          # the tool_use ids of the message before
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        for j, block in enumerate(blocks):
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in asked:
                raise RequestError(f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                                   f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                                   "`tool_use` block in the previous message.", field=f"messages.{i}.content.{j}")
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        unanswered = [tool_id for tool_id in asked if tool_id not in answered]
        if unanswered:
            raise RequestError(f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                               f"after: {', '.join(unanswered)}. Each `tool_use` block must have a corresponding "
                               "`tool_result` block in the next message.", field=f"messages.{i - 1}")
        asked = []
        for j, block in enumerate(blocks):
            if block.get("type") != "tool_use":
                continue
            if not isinstance(block.get("id"), str) or not _ID.fullmatch(block["id"]):
                raise RequestError(f"messages.{i}.content.{j}.tool_use.id: String should match pattern "
                                   "'^[a-zA-Z0-9_-]+$'", field=f"messages.{i}.content.{j}.tool_use.id")
            if block.get("id") in seen:
                raise RequestError(f"messages.{i}.content.{j}: `tool_use` ids must be unique",
                                   field=f"messages.{i}.content.{j}")
            seen.add(block.get("id"))
            asked.append(block.get("id"))


def _blocks(message: Any) -> list[dict]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
