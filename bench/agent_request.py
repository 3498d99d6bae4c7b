"""A coding agent's request, as its shape arrives at a gateway: synthetic text, real structure.

The shape follows a request recorded from a coding agent through the gateway (an 87 KB Anthropic Messages
body of ~20k tokens): a system prompt in blocks with a cache marker, a dozen tools whose JSON schemas and long
descriptions come first in the provider's prefix, and a history of user turns made of several content parts
(`<system-reminder>` parts beside the user's text), assistant text with `tool_use` blocks and `tool_result`
blocks holding file contents and command output; the last user turn carries the agent's own cache marker.
The words are generated (deterministically), never copied from an agent's prompt.

Successive requests of a session repeat all of this and differ only in the last user text, which is what
`variants` varies: a gateway whose cost grows with the whole body pays for every unchanged byte each time.
"""

from __future__ import annotations

import copy
import json
import random

WORDS = ("file function module test change commit branch diff error stack trace build install command output "
         "path directory config option value return type class method import package version lint format "
         "review refactor rename argument parameter default edge case failure retry timeout cache request "
         "response header body stream token limit budget plan step task tool result read write edit search").split()
TOOLS = ("Bash", "Read", "Edit", "MultiEdit", "Write", "Glob", "Grep", "LS", "TodoWrite", "WebFetch", "Task",
         "NotebookEdit")
CODE = ("def handle(request):\n    body = parse(request.body)\n    if not body.ok:\n        raise BadRequest(body.error)\n"
        "    result = service.run(body.value, timeout=30)\n    return Response(result, status=200)\n")


def _prose(rng: random.Random, sentences: int) -> str:
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + "."
                    for _ in range(sentences))


def _tool(rng: random.Random, name: str) -> dict:
    props = {f"{w}_{i}": {"type": rng.choice(["string", "integer", "boolean"]), "description": _prose(rng, 1)}
             for i, w in enumerate(rng.sample(WORDS, 5))}
    return {"name": name, "description": _prose(rng, 14),
            "input_schema": {"type": "object", "properties": props, "required": list(props)[:2],
                             "additionalProperties": False, "$schema": "http://json-schema.org/draft-07/schema#"}}


def _exchange(rng: random.Random, turn: int) -> list[dict]:
    """One agent step: the user's parts, the assistant's text and tool call, the tool's result."""
    tool_id = f"toolu_{turn:04d}{rng.randrange(16 ** 8):08x}"
    user = {"role": "user", "content": [
        {"type": "text", "text": f"<system-reminder>\n{_prose(rng, 3)}\n</system-reminder>"},
        {"type": "text", "text": _prose(rng, 2)}]}
    assistant = {"role": "assistant", "content": [
        {"type": "text", "text": _prose(rng, 2)},
        {"type": "tool_use", "id": tool_id, "name": rng.choice(TOOLS),
         "input": {"file_path": f"/repo/src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py", "limit": 400}}]}
    result = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tool_id,
         "content": "\n".join(f"{n:>6}\t{line}" for n, line in enumerate((CODE * 6).splitlines(), 1))},
        {"type": "text", "text": f"<system-reminder>\n{_prose(rng, 2)}\n</system-reminder>"}]}
    return [user, assistant, result]


def agent_body(tokens: int, model: str = "claude-sonnet-5-5", seed: int = 7) -> dict:
    """An Anthropic Messages body of about `tokens` tokens (cl100k estimate, ~4.3 bytes a token)."""
    rng = random.Random(seed)
    body = {
        "model": model, "max_tokens": 32000,
        "system": [{"type": "text", "text": "You are a coding agent working in the user's repository."},
                   {"type": "text", "text": _prose(rng, 180), "cache_control": {"type": "ephemeral"}}],
        "tools": [_tool(rng, name) for name in TOOLS],
        "messages": [],
        "metadata": {"user_id": "user_bench_session_0001"},
    }
    size, turn = len(json.dumps(body)), 0
    while size < tokens * 4.3:
        exchange = _exchange(rng, turn)
        body["messages"].extend(exchange)
        size += len(json.dumps(exchange))
        turn += 1
    body["messages"].append({"role": "user", "content": [
        {"type": "text", "text": f"<system-reminder>\n{_prose(rng, 2)}\n</system-reminder>"},
        {"type": "text", "text": "", "cache_control": {"type": "ephemeral"}}]})
    return body


def variants(body: dict, n: int) -> list[dict]:
    """`n` copies of `body` whose last user text differs, as a session's next requests do."""
    out = []
    for i in range(n):
        b = copy.deepcopy(body)
        b["messages"][-1]["content"][-1]["text"] = f"Now fix failing test number {i} and run the suite again."
        out.append(b)
    return out
