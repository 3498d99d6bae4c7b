"""OpenAI Responses API (`POST /v1/responses`) <-> IR, response objects, streaming and usage.

The prefix is `tools`, then `instructions`, then the `input` items in order (each item one segment).
Items other than messages (function calls and their outputs, reasoning items with their encrypted
content, item references, hosted-tool calls) are kept whole as one block each and encoded back byte for
byte: the planner never edits them. Caching is automatic, steered by `prompt_cache_key` and
`prompt_cache_retention`; `usage.input_tokens` *includes* cached tokens and `output_tokens` includes
reasoning tokens (pricing them again would bill them twice).
"""

from __future__ import annotations

import operator
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from prefixgate.compact_json import compact
from prefixgate.dialects.body import DROP, merge_native, rebuild_body, split_body
from prefixgate.dialects.openai import BREAKPOINT, breakpoint_of, check_cache_control
from prefixgate.dialects.resent import ResentBodies, element_segments, field_segment
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import expect, load_resent, require, typed_tool
from prefixgate.errors import RequestError
from prefixgate.ir import Block, BlockKind, Conversation, Role, Segment, touched
from prefixgate.usage import Usage, checked_usage

NAME = "responses"
PREFIX_FIELDS = {"tools", "instructions", "input"}
MIN_OUTPUT_TOKENS = 16     # the API refuses a smaller max_output_tokens
ROLES = ("user", "assistant", "system", "developer")
_PART_KINDS: dict[str, BlockKind] = {
    "input_text": "text", "output_text": "text", "refusal": "text", "input_image": "image",
    "input_file": "file", "input_audio": "audio",
}
# Non-message input items: the role their segment plays in the prefix and the block kind they hold.
_ITEMS: dict[str, tuple[Role, BlockKind]] = {
    "function_call": ("assistant", "tool_call"),
    "function_call_output": ("tool", "tool_result"),
    "custom_tool_call": ("assistant", "tool_call"),
    "custom_tool_call_output": ("tool", "tool_result"),
    "reasoning": ("assistant", "thinking"),
    "item_reference": ("user", "other"),
    "compaction": ("assistant", "other"),
    "web_search_call": ("assistant", "other"),
    "file_search_call": ("assistant", "other"),
    "computer_call": ("assistant", "other"),
    "computer_call_output": ("tool", "other"),
    "code_interpreter_call": ("assistant", "other"),
    "image_generation_call": ("assistant", "other"),
    "local_shell_call": ("assistant", "other"),
    "local_shell_call_output": ("tool", "other"),
    "shell_call": ("assistant", "other"),
    "shell_call_output": ("tool", "other"),
    "apply_patch_call": ("assistant", "other"),
    "apply_patch_call_output": ("tool", "other"),
    "mcp_list_tools": ("assistant", "other"),
    "mcp_approval_request": ("assistant", "other"),
    # Newer items (openai-python 3.57.0's `ResponseInputItemParam`; Codex sends `additional_tools` first on
    # GPT-6 models, and a body with an item type missing here was refused).
    "additional_tools": ("developer", "other"),     # tools made available from this item on (role: developer)
    "configuration_update": ("developer", "other"),  # reasoning / text settings from this item on
    "compaction_trigger": ("user", "other"),         # compacts the context; must be the last item
    "program": ("assistant", "other"),
    "program_output": ("tool", "other"),
    "tool_search_call": ("assistant", "other"),
    "tool_search_output": ("tool", "other"),
    "mcp_approval_response": ("user", "other"),
    "mcp_call": ("assistant", "other"),
}
ITEM_TYPES = ("message", *_ITEMS)
UNRENDERED = ("id",)       # an input item's fields that are not prompt content
# Recent bodies and where their input items sit, so a body that resends one is parsed from where it differs.
BODIES = ResentBodies()
TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def is_responses_body(body: dict) -> bool:
    """A Responses request rather than a Chat Completions one: Chat always has `messages`, Responses never."""
    return "messages" not in body and any(k in body for k in ("input", "instructions", "previous_response_id"))


# ---- requests ---------------------------------------------------------------------------------

def parse_request(body: bytes | str | dict) -> Conversation:
    # An agent (Codex) resends its whole input every turn: parsed from where it differs (`dialects.resent`).
    data, resent = load_resent(body, "input", BODIES)
    model = require(data, "model", str)
    stream = expect(data.get("stream", False), (bool, type(None)), "stream") or False
    limit = data.get("max_output_tokens")
    if limit is not None and expect(limit, int, "max_output_tokens") < MIN_OUTPUT_TOKENS:
        raise RequestError(f"max_output_tokens: must be >= {MIN_OUTPUT_TOKENS}", field="max_output_tokens")
    previous = data.get("previous_response_id")
    if previous is not None:
        expect(previous, str, "previous_response_id")
        if data.get("conversation") is not None:
            raise RequestError("previous_response_id: cannot be used together with conversation",
                               field="previous_response_id")
    segments: list[Segment] = []
    if data.get("tools") is not None:
        tools = expect(data["tools"], list, "tools")
        segments.append(field_segment(resent, "tools", tools, lambda: _tools_segment(tools)))
    instructions = data.get("instructions")
    if instructions is not None:
        text = expect(instructions, str, "instructions")
        segments.append(Segment("system", [Block("text", text, text=text)], blocks_field="instructions", form="string"))
    raw_input = data.get("input")
    if isinstance(raw_input, str):
        segments.append(Segment("user", [Block("text", raw_input, text=raw_input)], native={"role": "user"},
                                blocks_field="input", form="string"))
    elif isinstance(raw_input, list):
        segments += element_segments(resent, len(raw_input), lambda i: _item_segment(raw_input[i], f"input.{i}"))
    elif raw_input is not None or "input" in data:
        raise RequestError("input: expected a string or an array of input items", field="input")
    elif data.get("prompt") is None and data.get("conversation") is None:
        raise RequestError("input: field required (unless a stored prompt or conversation supplies it)", field="input")
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation("responses", model, segments, params=params, field_order=order, stream=stream, source=resent)


def _tools_segment(tools: list) -> Segment:
    blocks = [Block("tool_def", typed_tool(t, f"tools.{i}"), text=compact(t)) for i, t in enumerate(tools)]
    return Segment("tools", blocks, blocks_field="tools", form="list")


def input_items(data: dict) -> list[dict]:
    """A request's `input` as a list of items (a bare string is one user message)."""
    raw = data.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return list(raw or [])


def _item_segment(item: Any, field: str) -> Segment:
    expect(item, dict, field)
    kind = item.get("type", "message" if "role" in item else None)
    if kind is None:
        raise RequestError(f"{field}.type: field required (an input item without `role` needs a `type`)",
                           field=f"{field}.type")
    if kind not in ITEM_TYPES:
        raise RequestError(f"{field}.type: must be one of {', '.join(ITEM_TYPES)}, got {kind!r}", field=f"{field}.type")
    if kind != "message":
        role, block_kind = _ITEMS[kind]
        text = ""
        if kind in ("function_call", "custom_tool_call"):
            require(item, "call_id", str, f"{field}.call_id")
            require(item, "name", str, f"{field}.name")
            if kind == "function_call" and item.get("arguments") is not None:   # a JSON string, parsed if translated
                expect(item["arguments"], str, f"{field}.arguments")
            text = item.get("arguments") or item.get("input") or ""
        elif kind in ("function_call_output", "custom_tool_call_output"):
            require(item, "call_id", str, f"{field}.call_id")
            output = require(item, "output", (str, list), f"{field}.output")
            text = output if isinstance(output, str) else compact(output)
        elif kind == "reasoning":
            summary = expect(item.get("summary") or [], list, f"{field}.summary")
            text = "\n".join(expect(s.get("text", ""), str, f"{field}.summary.{j}.text")
                              for j, s in enumerate(summary) if isinstance(s, dict))
        # The whole item is one block, sent back as it came (encrypted reasoning must stay byte-exact); the
        # segment's native is the item too, which an untouched segment encodes to.
        # An item's `id` names it (the client's, or a stored item's) and is not what the model reads: a client
        # that gives each request's items new ids (Codex's `additional_tools`) still resends the same prefix.
        return Segment(role, [Block(block_kind, item, text=text if isinstance(text, str) else "", unrendered=UNRENDERED)],
                       native=item, form="object")
    role = require(item, "role", str, f"{field}.role")
    if role not in ROLES:
        raise RequestError(f"{field}.role: must be one of {', '.join(ROLES)}, got {role!r}", field=f"{field}.role")
    content = require(item, "content", (str, list), f"{field}.content")
    if isinstance(content, str):
        blocks, form = [Block("text", content, text=content)], "string"
    else:
        blocks, form = [_part_block(p, f"{field}.content.{j}") for j, p in enumerate(content)], "list"
    return Segment(role, blocks, native=item, blocks_field="content", form=form)  # type: ignore[arg-type]


def _part_block(part: Any, field: str) -> Block:
    expect(part, dict, field)
    ptype = require(part, "type", str, f"{field}.type")
    if ptype not in _PART_KINDS:
        raise RequestError(f"{field}.type: must be one of {', '.join(_PART_KINDS)}, got {ptype!r}",
                           field=f"{field}.type")
    key = "refusal" if ptype == "refusal" else "text"
    text = expect(part.get(key, ""), str, f"{field}.{key}") if _PART_KINDS[ptype] == "text" else ""
    check_cache_control(part, field)
    return Block(_PART_KINDS[ptype], part, text=text, checkpoint=breakpoint_of(part, field))


def encode_request(conv: Conversation) -> dict:
    encoded: dict[str, Any] = {"tools": DROP, "instructions": DROP}
    items: list[Any] = []
    string_input: str | None = None
    string_at = 0
    segments, done = conv.segments, 0
    # Most of an agent's input goes out as it came in: those items are taken whole, found in C.
    for i in touched(segments):
        items.extend(map(_NATIVE, segments[done:i]))
        done = i + 1
        seg = segments[i]
        if seg.role == "tools":
            encoded["tools"] = [b.native for b in seg.blocks]
        elif seg.blocks_field == "instructions" and any(b.checkpoint is not None for b in seg.blocks):
            # `instructions` is a string, which no breakpoint can mark: marked, they go as what they are, the
            # first message of the context, a developer one (the planner marks them only where that is safe).
            items.append({"role": "developer", "content": [_encode_part(b, "developer") for b in seg.blocks]})
        elif seg.blocks_field == "instructions":
            encoded["instructions"] = "".join(b.text for b in seg.blocks)
        elif seg.form == "object":
            items.append(seg.blocks[0].native)
        elif seg.blocks_field == "input":
            only = seg.blocks[0] if len(seg.blocks) == 1 else None
            if only is not None and only.kind == "text" and only.checkpoint is None:
                string_input, string_at = only.text, len(items)
            else:
                # The planner added a block to a bare-string input: it becomes one user message.
                items.append({"role": "user", "content": [_encode_part(b, "user") for b in seg.blocks]})
        else:
            items.append(_encode_message(seg))
    items.extend(map(_NATIVE, segments[done:]))
    if string_input is not None and not items:
        encoded["input"] = string_input
    elif string_input is not None:
        encoded["input"] = [*items[:string_at], {"role": "user", "content": string_input}, *items[string_at:]]
    else:
        encoded["input"] = items if items or "input" in conv.field_order else DROP
    return rebuild_body(conv, encoded)


_NATIVE = operator.attrgetter("native")


def _encode_message(seg: Segment) -> dict:
    native = seg.native if seg.native is not None else {"role": seg.role}
    only = seg.blocks[0] if len(seg.blocks) == 1 else None
    if seg.form == "string" and only is not None and only.checkpoint is None and only.kind == "text":
        content: Any = only.text
    else:
        content = [_encode_part(b, seg.role) for b in seg.blocks]
    return merge_native(native, {"content": content})


def _encode_part(block: Block, role: str) -> dict:
    if not isinstance(block.native, dict):
        native = {"type": "output_text" if role == "assistant" else "input_text", "text": block.text}
        return {**native, "prompt_cache_breakpoint": dict(BREAKPOINT)} if block.checkpoint is not None else native
    changes: dict[str, Any] = {}
    if block.edited:
        changes["text"] = block.text
    had = breakpoint_of(block.native) is not None
    if had != (block.checkpoint is not None):
        changes["prompt_cache_breakpoint"] = dict(BREAKPOINT) if block.checkpoint is not None else DROP
    return merge_native(block.native, changes) if changes else block.native


def context_part(text: str) -> dict:
    """A text part the planner adds to a user turn."""
    return {"type": "input_text", "text": text}


# ---- usage ------------------------------------------------------------------------------------

# `cache_write_tokens_details` fields, per TTL (a breakpoint may carry its own `ttl`: one request can write both).
WRITE_DETAILS = {"30m": "ttl_30m_tokens", "12h": "ttl_12h_tokens"}


@checked_usage()
def parse_usage(usage: dict, write_ttl: str = "30m") -> Usage:
    """Cached (and, on GPT-5.6+, written) tokens are inside `input_tokens`; reasoning inside `output_tokens`.
    Writes are split by TTL from `cache_write_tokens_details` where the answer has it, else all at `write_ttl`
    (the request's `prompt_cache_options.ttl`)."""
    details = usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    by_ttl = details.get("cache_write_tokens_details")
    writes = {ttl: n for ttl, name in WRITE_DETAILS.items() if isinstance(by_ttl, dict) and (n := by_ttl.get(name) or 0)}
    if sum(writes.values()) != written:
        writes = {write_ttl: written} if written else {}
    return Usage(
        uncached_input=max((usage.get("input_tokens") or 0) - cached - written, 0),
        cache_read=cached,
        cache_writes=writes,
        output=usage.get("output_tokens") or 0,
        reasoning=reasoning_tokens(usage),
    )


def reasoning_tokens(usage: dict) -> int:
    return (usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0


def usage_from_response(resp: dict, write_ttl: str = "30m") -> Usage:
    # The model that ran beside the usage: what an Azure deployment's call is priced as (providers/deployments.py).
    model = resp.get("model")
    return replace(parse_usage(resp.get("usage") or {}, write_ttl), service_tier=str(resp.get("service_tier") or ""),
                   model=model if isinstance(model, str) else "")


def usage_json(usage: Usage, reasoning: int = 0) -> dict:
    details: dict[str, Any] = {"cached_tokens": usage.cache_read}
    if usage.cache_write:
        details["cache_write_tokens"] = usage.cache_write
        details["cache_write_tokens_details"] = {name: usage.cache_writes.get(ttl, 0) for ttl, name in WRITE_DETAILS.items()}
    return {
        "input_tokens": usage.input_total,
        "input_tokens_details": details,
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": reasoning or usage.thinking},
        "total_tokens": usage.input_total + usage.output,
    }


class StreamUsage:
    """Usage of a streamed response: only the terminal event's embedded `response` carries it."""

    def __init__(self, write_ttl: str = "30m") -> None:
        self._usage: Usage | None = None
        self.finish_reason: str | None = None
        self.write_ttl = write_ttl

    def feed(self, event: dict) -> None:
        if event.get("type") not in TERMINAL_EVENTS:
            return
        response = event.get("response") or {}
        if response.get("usage"):
            self._usage = usage_from_response(response, self.write_ttl)
        self.finish_reason = finish_reason(response)

    @property
    def usage(self) -> Usage | None:
        return self._usage


def finish_reason(response: dict) -> str:
    """The Chat-style stop reason of a response object."""
    if response.get("status") == "incomplete":
        return "length" if (response.get("incomplete_details") or {}).get("reason") == "max_output_tokens" else "content_filter"
    if any(item.get("type") == "function_call" for item in response.get("output") or []):
        return "tool_calls"
    return "stop"


# ---- response objects -------------------------------------------------------------------------

def new_id(prefix: str = "resp") -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def message_item(text: str, *, id: str | None = None) -> dict:
    return {"id": id or new_id("msg"), "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


def function_call_item(name: str, arguments: str, *, call_id: str | None = None) -> dict:
    return {"id": new_id("fc"), "type": "function_call", "status": "completed", "arguments": arguments,
            "call_id": call_id or new_id("call"), "name": name}


def response_object(model: str, output: list[dict], usage: Usage | None, *, request: dict | None = None,
                    id: str | None = None, status: str = "completed", reasoning: int = 0,
                    incomplete_reason: str | None = None) -> dict:
    """A Response as the API returns it, echoing the request's settings."""
    req = request or {}
    now = int(time.time())
    return {
        "id": id or new_id(), "object": "response", "created_at": now,
        "completed_at": now if status == "completed" else None, "status": status, "background": req.get("background", False),
        "error": None, "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": req.get("instructions"), "max_output_tokens": req.get("max_output_tokens"),
        "max_tool_calls": req.get("max_tool_calls"), "model": model, "output": output,
        "parallel_tool_calls": req.get("parallel_tool_calls", True),
        "previous_response_id": req.get("previous_response_id"),
        "prompt_cache_key": req.get("prompt_cache_key"), "prompt_cache_retention": req.get("prompt_cache_retention"),
        "reasoning": req.get("reasoning") or {"effort": None, "summary": None},
        "safety_identifier": req.get("safety_identifier"), "service_tier": "default", "store": req.get("store", True),
        "temperature": req.get("temperature", 1.0), "text": req.get("text") or {"format": {"type": "text"}},
        "tool_choice": req.get("tool_choice", "auto"), "tools": req.get("tools") or [],
        "top_p": req.get("top_p", 1.0), "truncation": req.get("truncation", "disabled"),
        "usage": usage_json(usage, reasoning) if usage is not None else None,
        "user": req.get("user"), "metadata": req.get("metadata") or {},
    }


def output_text(response: dict) -> str:
    """The assistant text of a response (every output_text part of every message item)."""
    return "".join(part.get("text", "") for item in response.get("output") or [] if item.get("type") == "message"
                   for part in item.get("content") or [] if part.get("type") == "output_text")


def build_response(model: str, text: str, usage: Usage, *, finish_reason: str | None = None,
                   id: str | None = None) -> dict:
    """The common writer's signature (as for the other dialects): one text message."""
    incomplete = "max_output_tokens" if finish_reason == "length" else None
    return response_object(model, [message_item(text)], usage, id=id, status="incomplete" if incomplete else "completed",
                           incomplete_reason=incomplete)


# ---- streaming --------------------------------------------------------------------------------

def response_events(response: dict, chunks: dict[str, list[str]] | None = None, *,
                    starting_after: int = -1) -> Iterator[bytes]:
    """The SSE events that stream `response` (its final form), each with its `sequence_number`.

    `chunks` maps a message item's id to the pieces its text is streamed in (default: one delta).
    `starting_after` drops events up to that sequence number (the resume path of GET ?stream=true).
    """
    seq = 0

    def event(kind: str, **fields: Any) -> Iterator[bytes]:
        nonlocal seq
        data = {"type": kind, "sequence_number": seq, **fields}
        seq += 1
        if data["sequence_number"] > starting_after:
            yield encode_sse(data, kind)

    pending = {**response, "status": "in_progress", "completed_at": None, "output": [], "usage": None}
    yield from event("response.created", response=pending)
    yield from event("response.in_progress", response=pending)
    for index, item in enumerate(response.get("output") or []):
        yield from event("response.output_item.added", output_index=index, item=_started(item))
        if item.get("type") == "message":
            for ci, part in enumerate(item.get("content") or []):
                yield from _part_events(event, item, index, ci, part, (chunks or {}).get(item.get("id", "")))
        elif item.get("type") == "function_call":
            yield from event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                             delta=item["arguments"])
            yield from event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                             name=item["name"], arguments=item["arguments"])
        yield from event("response.output_item.done", output_index=index, item=item)
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(response["status"],
                                                                                          "response.failed")
    yield from event(terminal, response=response)


def _started(item: dict) -> dict:
    if item.get("type") == "message":
        return {**item, "status": "in_progress", "content": []}
    if item.get("type") == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    return item


def _part_events(event: Any, item: dict, index: int, ci: int, part: dict, pieces: list[str] | None) -> Iterator[bytes]:
    where = {"item_id": item["id"], "output_index": index, "content_index": ci}
    if part.get("type") != "output_text":
        yield from event("response.content_part.added", **where, part=part)
        yield from event("response.content_part.done", **where, part=part)
        return
    yield from event("response.content_part.added", **where, part={**part, "text": ""})
    for piece in pieces if pieces is not None else [part["text"]]:
        if piece:
            yield from event("response.output_text.delta", **where, delta=piece, logprobs=[])
    yield from event("response.output_text.done", **where, text=part["text"], logprobs=[])
    yield from event("response.content_part.done", **where, part=part)


def stream_events(model: str, chunks: Iterable[str], usage: Usage, *, finish_reason: str | None = None,
                  id: str | None = None, include_usage: bool = True) -> Iterator[bytes]:
    """The common writer's signature: one text message streamed in `chunks` (usage is always sent)."""
    pieces = list(chunks)
    response = build_response(model, "".join(pieces), usage, finish_reason=finish_reason, id=id)
    yield from response_events(response, {response["output"][0]["id"]: pieces})


def error_event(err: RequestError) -> bytes:
    # Its code an upstream's own, else the one a failed response's error has for it (ResponseError.code).
    code = err.code or ("rate_limit_exceeded" if err.kind == "rate_limit" else "server_error" if err.status >= 500 else None)
    data = {"type": "error", "code": code, "message": err.message, "param": err.field, "sequence_number": 0}
    return encode_sse(data, "error")
