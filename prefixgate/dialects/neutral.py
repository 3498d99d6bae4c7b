"""The neutral forms cross-format translation passes through: a chat request (`Chat`), a reply
(`Reply`) and stream deltas (`Delta`). Each wire format reads its own bodies and events into these and
writes them back out (`WireFormat.read_chat` / `write_chat`, `read_reply` / `write_reply`,
`read_deltas` / `stream_writer`), so translating between N formats takes N adapters, not N x N.

A `Chat` holds only what all three APIs can express (text, images, tool calls and results, tool definitions,
common sampling options) plus the caching intent: checkpoints on parts and tools, a cache key, and
Anthropic's request-level automatic caching. Anything else is refused or named in the explanation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from prefixgate.errors import RequestError
from prefixgate.ir import Checkpoint
from prefixgate.usage import Usage

PartKind = Literal["text", "image", "tool_call", "tool_result"]


@dataclass
class Part:
    kind: PartKind
    text: str = ""
    checkpoint: Checkpoint | None = None
    mime: str = ""         # image: media type with inline base64 `data`, or a `url`
    data: str = ""
    url: str = ""
    call_id: str = ""      # tool_call / tool_result
    name: str = ""
    args: Any = None       # tool_call arguments (a JSON object)
    is_error: bool = False


@dataclass
class Turn:
    role: Literal["system", "user", "assistant", "tool"]
    parts: list[Part]


@dataclass
class Tool:
    name: str
    description: str = ""
    schema: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    checkpoint: Checkpoint | None = None
    # The caller asked for arguments that follow the schema exactly (OpenAI/Anthropic `strict: true`).
    strict: bool = False


@dataclass
class Chat:
    turns: list[Turn]
    tools: list[Tool] = field(default_factory=list)
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    # "auto", "any" (must call some tool), "none", or a tool name to force.
    tool_choice: str | None = None
    # False: at most one tool call per answer (an agent that runs calls one at a time); None: the API's default.
    parallel_calls: bool | None = None
    user: str | None = None
    # OpenAI's prompt_cache_key: "requests with this key share a prefix; keep them together".
    cache_key: str | None = None
    # Anthropic's top-level cache_control: cache up to the last cacheable block.
    auto_cache: Checkpoint | None = None
    # What translation could not carry over, for the plan's explanation.
    notes: list[str] = field(default_factory=list)

    def leading_system(self) -> tuple[str | None, list[Turn]]:
        """The text of the leading system turns (one line each), for formats with one instruction field, and
        the turns after them."""
        turns, system = self.turns, []
        while turns and turns[0].role == "system":
            system.append("\n".join(p.text for p in turns[0].parts if p.kind == "text"))
            turns = turns[1:]
        return ("\n".join(system) if system else None), turns

    def call_names(self) -> dict[str, str]:
        """tool call id -> tool name (Gemini answers calls by name, the others by id)."""
        return {p.call_id: p.name for t in self.turns for p in t.parts if p.kind == "tool_call" and p.call_id}


@dataclass
class ToolCall:
    id: str
    name: str
    args: Any


@dataclass
class Reply:
    """A non-streamed answer. `finish` is neutral: stop, length, tool_calls, content_filter."""

    text: str
    usage: Usage
    finish: str = "stop"
    tool_calls: list[ToolCall] = field(default_factory=list)
    id: str | None = None
    # The format's own finish reason, as the answer said it (what a response cache judges: `WireFormat.natural_finishes`).
    native_finish: str | None = field(default=None, compare=False)


# One step of a streamed answer: ("text", str) | ("call", index, id, name) | ("args", index, str)
# | ("finish", reason, native reason[, answer id]): the native reason is the format's own word (None where it has
# none); the id, where a later request reaches the answer by it (a stored Responses response, an interaction)
Delta = tuple


class StreamWriter:
    """A caller's stream events for neutral deltas, written as they arrive (the caller's time to first
    token is the target's). A format fills in `_start`, `_delta` and `_finish`; `finish` closes the
    stream with the usage the target reported."""

    def __init__(self, model: str, include_usage: bool = True) -> None:
        self.model, self.include_usage = model, include_usage
        self.started = False
        self.finish_reason = "stop"     # neutral
        self.opened: dict[Any, str] = {}    # the target's index of each call opened -> its id

    def write(self, deltas: list[Delta]) -> bytes:
        out = []
        for d in deltas:
            if d[0] == "finish":
                self.finish_reason = d[1]
                continue
            if d[0] == "call":
                # Calls are told apart by index, as the OpenAI SDK merges them: a compatible server (LiteLLM's
                # proxy) repeats the call's id on every chunk, which is the same call going on, not a new one.
                # (A new id at an index already open is a new call: servers that send no index say 0 for each.)
                if d[1] in self.opened and d[2] in ("", self.opened[d[1]]):
                    continue
                self.opened[d[1]] = d[2]
            if not self.started:
                self.started = True
                out.append(self._start())
            out.append(self._delta(d))
        return b"".join(out)

    def keep_id(self, answer_id: str) -> None:
        """Stream the answer under `answer_id` (the response cache's replay of a stored answer) where a later
        request reaches an answer by its id; other formats' answers keep the fresh id they have."""

    def finish(self, usage: Usage | None) -> bytes:
        return self.opening() + self._finish(usage or Usage())

    def opening(self) -> bytes:
        """The stream's opening events, if they have not gone out: whatever ends the stream (its finish, an error)
        comes after them, as from the format's own provider (an SDK reads a Responses error before
        `response.created` as its own failure)."""
        if self.started:
            return b""
        self.started = True
        return self._start()

    def _start(self) -> bytes:
        return b""

    def _delta(self, d: Delta) -> bytes:
        raise NotImplementedError

    def _finish(self, usage: Usage) -> bytes:
        raise NotImplementedError


def checkpoint_of(native: dict) -> Checkpoint | None:
    """A caller's checkpoint on a block, in either spelling (Anthropic `cache_control`, OpenAI's breakpoint)."""
    cc = native.get("cache_control")
    if isinstance(cc, dict):
        return Checkpoint(cc.get("ttl", "5m"))
    if native.get("prompt_cache_breakpoint") is not None:
        return Checkpoint("30m")
    return None


def refuse(what: str, source: str) -> RequestError:
    """What a target cannot carry: refused (the route may fall over to a target that can), never dropped."""
    return RequestError(f"cannot translate {what} from the {source} format for this route's target", field=what)


def join_turn(chat: Chat, role: str, part: Part) -> None:
    """`part` joins the last turn when that turn has `role` (parallel tool calls, several tool results answering
    them, a text before the calls: one turn each), else opens a turn of its own. For formats that send calls
    and results as separate items (OpenAI Responses, Gemini Interactions)."""
    last = chat.turns[-1] if chat.turns else None
    if last is not None and last.role == role:
        last.parts.append(part)
    else:
        chat.turns.append(Turn(role, [part]))


def note_dropped(chat: Chat, body: dict, known: set[str]) -> None:
    for key in body:
        if key not in known:
            chat.notes.append(f"dropped {key} (no equivalent in the target format)")


def note_tool_options(chat: Chat, target: str, takes_strict: bool = False) -> None:
    """A caller's "one tool call at a time" and strict tools (unless `takes_strict`), which `target` cannot say,
    named in the explanation."""
    if chat.parallel_calls is False and chat.tools:
        chat.notes.append(f"dropped parallel_tool_calls false ({target} has no switch; it may answer with several calls)")
    if not takes_strict and any(t.strict for t in chat.tools):
        chat.notes.append(f"dropped strict on tools ({target} does not constrain arguments to the schema)")


def note_error_results(chat: Chat, target: str) -> None:
    """Tool results marked as failures, where `target`'s results carry no such mark (their text alone tells)."""
    if any(p.is_error for t in chat.turns for p in t.parts if p.kind == "tool_result"):
        chat.notes.append(f"dropped is_error on tool results ({target} tool results have no error flag)")


def non_empty_parts(chat: Chat, turn: Turn, target: str) -> list[Part]:
    """`turn`'s parts but its empty text ones, which Claude's APIs refuse though OpenAI takes them (an agent's ""
    assistant turn); noted on `chat` when there were any."""
    parts = [p for p in turn.parts if p.kind != "text" or p.text]
    if len(parts) < len(turn.parts):
        chat.notes.append(f"an empty text part was left out ({target} refuses empty text blocks)")
    return parts


def put(out: dict, **values: Any) -> None:
    """Set the options that have a value."""
    out.update({k: v for k, v in values.items() if v is not None})


def json_or_raw(text: str) -> Any:
    """Tool-call arguments as JSON; a model's malformed arguments are kept, not lost."""
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {"_raw": text}


def unreadable_args(args: Any) -> bool:
    """Whether `args` are a model's malformed arguments as `json_or_raw` kept them."""
    return isinstance(args, dict) and list(args) == ["_raw"] and isinstance(args["_raw"], str)
