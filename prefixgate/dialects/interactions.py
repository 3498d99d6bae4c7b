"""Gemini Interactions API (`POST /{v1,v1beta}/interactions`) <-> IR, interaction objects, streaming, usage.

Shapes are google-genai 3.6.1's (`google/genai/_gaos/types/interactions/`). The prefix is the system
instruction (a plain string), then `tools`, then `input`. `input` is a string, one content block, a list
of content blocks, or a list of steps (`user_input` / `model_output` with their `content`; `thought`,
`function_call`, `function_result` and the built-in tools' call/result steps, each kept whole as one block
and sent back byte for byte). With `previous_interaction_id` the server holds the earlier turns: the
request carries only the new input, and the usage counts (and caches) the whole conversation.

Caching is implicit only (no cachedContents, no markers); the usage reports hits in
`usage.total_cached_tokens`. `total_input_tokens` is read as including the cached tokens (as Gemini's
`promptTokenCount` does) and thoughts are billed as output; tool-use prompt tokens are input.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from prefixgate.compact_json import compact
from prefixgate.dialects.body import DROP, merge_native, rebuild_body, split_body
from prefixgate.dialects.sse import encode_sse
from prefixgate.dialects.validate import expect, load_body, require, typed_tool
from prefixgate.errors import _KINDS, RequestError
from prefixgate.ir import Block, BlockKind, Conversation, Role, Segment
from prefixgate.usage import Usage, checked_usage

NAME = "interactions"
PREFIX_FIELDS = {"system_instruction", "tools", "input"}
CONTENT_KINDS: dict[str, BlockKind] = {
    "text": "text", "image": "image", "document": "document", "audio": "audio", "video": "file",
}
# Google's built-in tools: each has a call step and a result step, kept whole.
BUILT_IN_TOOLS = ("code_execution", "google_search", "url_context", "file_search", "google_maps", "mcp_server_tool",
                  "retrieval", "tool_search", "processing")
# Steps other than user_input / model_output: the role their segment plays and the block kind they hold.
_STEPS: dict[str, tuple[Role, BlockKind]] = {
    "thought": ("assistant", "thinking"),
    "function_call": ("assistant", "tool_call"),
    "function_result": ("tool", "tool_result"),
    **{f"{tool}_call": ("assistant", "other") for tool in BUILT_IN_TOOLS},
    **{f"{tool}_result": ("tool", "other") for tool in BUILT_IN_TOOLS},
}
TURN_STEPS: dict[str, Role] = {"user_input": "user", "model_output": "assistant"}
STEP_TYPES = (*TURN_STEPS, *_STEPS)
# `{role, content}` turns pass through the SDK untouched (wire sheet, section 1); read as the steps they mean.
_TURN_ROLES: dict[str, Role] = {"user": "user", "model": "assistant"}
# The stream's last event; `interaction.completed` carries the final status and usage.
COMPLETED = "interaction.completed"
PATHS = ("/v1/interactions", "/v1beta/interactions")


# ---- requests ---------------------------------------------------------------------------------

def is_interactions_body(body: dict) -> bool:
    """An Interactions request rather than a generateContent one (which always has `contents`)."""
    return "contents" not in body and any(k in body for k in ("input", "previous_interaction_id", "agent"))


def parse_request(body: bytes | str | dict) -> Conversation:
    data = load_body(body)
    if "agent" in data and "model" not in data:
        require(data, "agent", str)
    else:
        require(data, "model", str)
    stream = expect(data.get("stream", False), (bool, type(None)), "stream") or False
    previous = data.get("previous_interaction_id")
    if previous is not None:
        expect(previous, str, "previous_interaction_id")
    for name in ("generation_config", "labels"):
        if data.get(name) is not None:
            expect(data[name], dict, name)
    _check_generation(data.get("generation_config") or {})
    segments: list[Segment] = []
    if data.get("system_instruction") is not None:
        text = expect(data["system_instruction"], str, "system_instruction")
        segments.append(Segment("system", [Block("text", text, text=text)], blocks_field="system_instruction",
                                form="string"))
    if data.get("tools") is not None:
        tools = expect(data["tools"], list, "tools")
        blocks = [Block("tool_def", typed_tool(t, f"tools.{i}"), text=compact(t)) for i, t in enumerate(tools)]
        segments.append(Segment("tools", blocks, blocks_field="tools", form="list"))
    segments += input_segments(data.get("input"), "input" in data, previous is not None)
    params, order = split_body(data, PREFIX_FIELDS)
    return Conversation(NAME, data.get("model") or data.get("agent"), segments, params=params, field_order=order,
                        stream=stream)


# generation_config's fields a translation reads, with their JSON types (the Interactions API reference).
GENERATION_TYPES: dict[str, type | tuple[type, ...]] = {
    "max_output_tokens": int, "temperature": (int, float), "top_p": (int, float), "seed": int, "stop_sequences": list}


def _check_generation(config: dict) -> None:
    for name, kind in GENERATION_TYPES.items():
        if config.get(name) is not None:
            expect(config[name], kind, f"generation_config.{name}")
    for i, stop in enumerate(config.get("stop_sequences") or []):
        expect(stop, str, f"generation_config.stop_sequences.{i}")


def input_segments(raw: Any, present: bool, continued: bool) -> list[Segment]:
    if isinstance(raw, str):
        return [Segment("user", [Block("text", raw, text=raw)], blocks_field="input", form="string")]
    if isinstance(raw, dict):
        return [Segment("user", [_content_block(raw, "input")], blocks_field="input", form="object")]
    if isinstance(raw, list):
        if raw and all(isinstance(item, dict) and item.get("type") in CONTENT_KINDS for item in raw):
            blocks = [_content_block(item, f"input.{i}") for i, item in enumerate(raw)]
            return [Segment("user", blocks, blocks_field="input", form="list")]
        return [_step_segment(item, f"input.{i}") for i, item in enumerate(raw)]
    if raw is not None or present:
        raise RequestError("input: expected a string, a content block, or a list of content blocks or steps",
                           field="input")
    if not continued:
        raise RequestError("input: field required", field="input")
    return []


def _step_segment(step: Any, field: str) -> Segment:
    expect(step, dict, field)
    kind = step.get("type")
    if kind is None and isinstance(step.get("role"), str):
        role = _TURN_ROLES.get(step["role"])
        if role is None:
            raise RequestError(f"{field}.role: must be one of user, model, got {step['role']!r}", field=f"{field}.role")
        return _turn_segment(step, role, field)
    if kind in CONTENT_KINDS:
        raise RequestError(f"{field}: a content block in a list of steps; wrap it in a user_input step",
                           field=field)
    if kind not in STEP_TYPES:
        raise RequestError(f"{field}.type: must be one of {', '.join(STEP_TYPES)}, got {kind!r}",
                           field=f"{field}.type")
    if kind in TURN_STEPS:
        return _turn_segment(step, TURN_STEPS[kind], field)
    role, block_kind = _STEPS[kind]
    text = ""
    if kind == "function_call":
        require(step, "id", str, f"{field}.id")
        require(step, "name", str, f"{field}.name")
        text = compact(step.get("arguments") or {})
    elif kind == "function_result":
        require(step, "call_id", str, f"{field}.call_id")
        if "result" not in step:
            raise RequestError(f"{field}.result: field required", field=f"{field}.result")
        text = step["result"] if isinstance(step["result"], str) else compact(step["result"])
    elif kind == "thought":
        text = "\n".join(s.get("text", "") for s in step.get("summary") or [] if isinstance(s, dict))
    # The whole step is one block, sent back as it came (a thought's signature must stay byte-exact).
    return Segment(role, [Block(block_kind, step, text=text)], native=step, form="object")


def _turn_segment(step: dict, role: Role, field: str) -> Segment:
    content = step.get("content")
    if content is None:
        return Segment(role, [], native=step, blocks_field="content", form="absent")
    if isinstance(content, str):    # a `{role, content}` turn may carry a bare string
        return Segment(role, [Block("text", content, text=content)], native=step, blocks_field="content",
                       form="string")
    items = expect(content, list, f"{field}.content")
    blocks = [_content_block(c, f"{field}.content.{j}", any_type=True) for j, c in enumerate(items)]
    return Segment(role, blocks, native=step, blocks_field="content", form="list")


def _content_block(item: Any, field: str, any_type: bool = False) -> Block:
    expect(item, dict, field)
    kind = item.get("type", "text" if "text" in item else None)
    if kind not in CONTENT_KINDS and not (any_type and isinstance(kind, str)):
        raise RequestError(f"{field}.type: must be one of {', '.join(CONTENT_KINDS)}, got {kind!r}",
                           field=f"{field}.type")
    if kind == "text":
        return Block("text", item, text=expect(item.get("text"), str, f"{field}.text"))
    if kind in CONTENT_KINDS and "data" not in item and "uri" not in item:
        raise RequestError(f"{field}: {kind} content needs `data` (base64) or `uri`", field=field)
    return Block(CONTENT_KINDS.get(kind, "other"), item)


def encode_request(conv: Conversation) -> dict:
    encoded: dict[str, Any] = {"system_instruction": DROP, "tools": DROP}
    inputs = [seg for seg in conv.segments if seg.role not in ("system", "tools") or seg.blocks_field == "input"]
    for seg in conv.segments:
        if seg.role == "tools":
            encoded["tools"] = [b.native for b in seg.blocks]
        elif seg.blocks_field == "system_instruction":
            encoded["system_instruction"] = "".join(b.text for b in seg.blocks)
    if len(inputs) == 1 and inputs[0].blocks_field == "input":
        encoded["input"] = _bare_input(inputs[0])
    elif inputs:
        encoded["input"] = [_step(seg) for seg in inputs]
    else:
        encoded["input"] = [] if "input" in conv.field_order else DROP
    body = rebuild_body(conv, encoded)
    if conv.params.get("agent") is not None and "model" not in conv.field_order:
        # An agent call names no model; the gateway routes it by the agent's name, which is not a model to send.
        body.pop("model", None)
    return body


def _bare_input(seg: Segment) -> Any:
    """An input sent without steps, in the form it came (a string, one block, a list of blocks) unless the
    planner changed its blocks so that the form no longer holds them."""
    only = seg.blocks[0] if len(seg.blocks) == 1 else None
    if seg.form == "string" and only is not None and only.kind == "text" and not isinstance(only.native, dict):
        return only.text
    if seg.form == "object" and only is not None:
        return _content(only)
    return [_content(b) for b in seg.blocks]


def _step(seg: Segment) -> dict:
    if seg.form == "object" and seg.blocks_field is None:
        return seg.blocks[0].native
    if seg.blocks_field == "input":      # planner-made or bare content among steps: one user_input step
        return {"type": "user_input", "content": [_content(b) for b in seg.blocks]}
    if seg.form == "absent" and not seg.blocks:
        return seg.native
    if seg.native == {"role": "user"}:      # the planner's new user turn after tool results
        return {"type": "user_input", "content": [_content(b) for b in seg.blocks]}
    only = seg.blocks[0] if len(seg.blocks) == 1 else None
    if seg.form == "string" and only is not None and not isinstance(only.native, dict):
        return merge_native(seg.native, {"content": only.text})
    return merge_native(seg.native, {"content": [_content(b) for b in seg.blocks]})


def _content(block: Block) -> dict:
    if not isinstance(block.native, dict):
        return {"type": "text", "text": block.text}
    return merge_native(block.native, {"text": block.text}) if block.edited else block.native


# ---- usage ------------------------------------------------------------------------------------

@checked_usage()
def parse_usage(usage: dict) -> Usage:
    """`total_input_tokens` includes `total_cached_tokens`; thoughts are billed as output, tool-use prompt
    tokens as input."""
    total_input = usage.get("total_input_tokens") or 0
    cached = usage.get("total_cached_tokens") or 0
    return Usage(uncached_input=max(total_input - cached, 0) + (usage.get("total_tool_use_tokens") or 0),
                 cache_read=cached,
                 output=(usage.get("total_output_tokens") or 0) + (usage.get("total_thought_tokens") or 0),
                 reasoning=usage.get("total_thought_tokens") or 0)


def usage_from_response(body: dict) -> Usage:
    return parse_usage(body.get("usage") or {})


def usage_json(usage: Usage, thought: int = 0) -> dict:
    total_input = usage.input_total
    thought = thought or usage.thinking
    out = {"total_input_tokens": total_input, "total_cached_tokens": usage.cache_read,
           "total_output_tokens": usage.output - thought, "total_tokens": total_input + usage.output,
           "input_tokens_by_modality": [{"modality": "text", "tokens": total_input}]}
    if thought:
        out["total_thought_tokens"] = thought
    if usage.cache_read:
        out["cached_tokens_by_modality"] = [{"modality": "text", "tokens": usage.cache_read}]
    return out


class StreamUsage:
    """Usage of a stream: `interaction.completed` (and status updates) carry the interaction's usage."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.status: str | None = None

    def feed(self, event: dict) -> None:
        kind = event.get("event_type")
        if kind == COMPLETED:
            interaction = event.get("interaction") or {}
            self.status = interaction.get("status") or self.status
            if interaction.get("usage"):
                self.usage = parse_usage(interaction["usage"])
        elif kind == "interaction.status_update":
            self.status = event.get("status") or self.status
            if event.get("usage"):
                self.usage = parse_usage(event["usage"])


# ---- interaction objects and events ------------------------------------------------------------

def new_id() -> str:
    return "int_" + uuid.uuid4().hex[:24]


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def interaction_object(model: str, steps: list[dict], usage: Usage | None, *, status: str = "completed",
                       id: str | None = None, previous: str | None = None, thought: int = 0) -> dict:
    stamp = now_rfc3339()
    out: dict[str, Any] = {"id": id or new_id(), "status": status, "model": model, "created": stamp,
                           "updated": stamp, "steps": steps}
    if previous is not None:
        out["previous_interaction_id"] = previous
    if usage is not None:
        out["usage"] = usage_json(usage, thought)
    return out


def text_step(text: str) -> dict:
    return {"type": "model_output", "content": [{"type": "text", "text": text}]}


def build_response(model: str, text: str, usage: Usage, *, finish_reason: str | None = None,
                   id: str | None = None) -> dict:
    return interaction_object(model, [text_step(text)], usage, status=finish_reason or "completed", id=id)


def output_text(body: dict) -> str:
    """The SDK's `output_text` (never on the wire): the text of the last model_output after the last
    user_input, thoughts skipped."""
    steps = body.get("steps") or []
    start = max((i for i, s in enumerate(steps) if s.get("type") == "user_input"), default=-1) + 1
    outputs = [s for s in steps[start:] if s.get("type") == "model_output"]
    if not outputs:
        return ""
    return "".join(c.get("text", "") for c in outputs[-1].get("content") or [] if c.get("type") == "text")


def interaction_events(interaction: dict, chunks: Iterable[str] = ()) -> Iterator[bytes]:
    """A whole interaction as its stream: created, each step started / its text deltas / stopped, completed."""
    seq = iter(range(1, 1 << 30))
    pending = {k: v for k, v in interaction.items() if k not in ("steps", "usage")}
    yield event({"event_type": "interaction.created", "interaction": {**pending, "status": "in_progress"}}, next(seq))
    pieces = list(chunks)
    for index, step in enumerate(interaction.get("steps") or []):
        if step.get("type") == "model_output" and pieces:
            yield event({"event_type": "step.start", "index": index, "step": {**step, "content": []}}, next(seq))
            for piece in pieces:
                yield event({"event_type": "step.delta", "index": index, "delta": {"type": "text", "text": piece}},
                            next(seq))
            pieces = []
        else:
            yield event({"event_type": "step.start", "index": index, "step": step}, next(seq))
        yield event({"event_type": "step.stop", "index": index}, next(seq))
    yield event({"event_type": COMPLETED, "interaction": interaction}, next(seq))


def event(data: dict, seq: int) -> bytes:
    """One SSE event: `event_type` leads the JSON (the gateway's relay spots the terminal one by its bytes)."""
    return encode_sse({**data, "event_id": f"evt_{seq}"}, data["event_type"])


def error_json(err: RequestError) -> dict:
    """Google's shape for this API: `{"error": {"code": string, "message": string}}`."""
    return {"error": {"code": _KINDS.get(err.kind, _KINDS["server"])[2].lower(), "message": err.message}}


def error_event(err: RequestError) -> bytes:
    return encode_sse({"event_type": "error", **error_json(err)}, "error")
